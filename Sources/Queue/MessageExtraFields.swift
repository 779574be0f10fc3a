import Postgres

/// The operator's allow-list of message fields beyond Herald's rules (herald.message_extra_fields,
/// migration 045): a field FCM added after this release, e.g. `message.android.new_option`.
/// `herald.validate_message` reads the table on every call; a worker reads it once, when it
/// starts, and hands the paths to the validator (`MessageRuleSet.allowing(extraFields:)`).
public enum MessageExtraFields {
    /// Every allowed path.
    public static func load(_ connection: PGConnection) throws(PostgresError) -> Set<String> {
        let rows: PGResult
        do {
            rows = try connection.query(SQL.messageExtraFields)
        } catch let error where error.sqlState == "42P01" {
            throw PostgresError("herald.message_extra_fields does not exist: the database's schema is older than this herald; run `herald migrate`",
                                sqlState: error.sqlState)
        }
        return Set((0..<rows.rowCount).compactMap { rows[$0, 0] })
    }
}
