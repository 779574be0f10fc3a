import JSON
import Postgres

/// One row of herald.jobs as the dashboard's job page and API show it.
public struct JobDetails: Sendable {
    public var id: Int
    public var queue: String
    public var kind: String
    public var state: String
    public var priority: Int
    public var attempts: Int
    public var maxAttempts: Int
    public var dedupeKey: String?
    /// RFC 3339 timestamps (UTC); nil where the column is null.
    public var runAt: String
    public var createdAt: String
    public var finishedAt: String?
    public var lockedUntil: String?
    public var lastError: String?
    public var fcmMessageName: String?
    public var message: JSONValue
    public var errors: JSONValue

    public var json: JSONValue {
        var object = JSONObject()
        object["id"] = JSONValue(id)
        object["queue"] = .string(queue)
        object["kind"] = .string(kind)
        object["state"] = .string(state)
        object["priority"] = JSONValue(priority)
        object["attempts"] = JSONValue(attempts)
        object["max_attempts"] = JSONValue(maxAttempts)
        object["dedupe_key"] = dedupeKey.map { .string($0) } ?? .null
        object["run_at"] = .string(runAt)
        object["created_at"] = .string(createdAt)
        object["finished_at"] = finishedAt.map { .string($0) } ?? .null
        object["locked_until"] = lockedUntil.map { .string($0) } ?? .null
        object["last_error"] = lastError.map { .string($0) } ?? .null
        object["fcm_message_name"] = fcmMessageName.map { .string($0) } ?? .null
        object["message"] = message
        object["errors"] = errors
        return .object(object)
    }

    public static func get(_ connection: PGConnection, id: Int) throws(PostgresError) -> JobDetails? {
        let rows = try connection.query(SQL.jobDetails, [.int(id)])
        guard rows.rowCount == 1 else { return nil }
        return JobDetails(id: rows.int(0, 0) ?? id, queue: rows[0, 1] ?? "", kind: rows[0, 2] ?? "", state: rows[0, 3] ?? "",
                          priority: rows.int(0, 4) ?? 0, attempts: rows.int(0, 5) ?? 0, maxAttempts: rows.int(0, 6) ?? 0,
                          dedupeKey: rows[0, 7], runAt: rows[0, 8] ?? "", createdAt: rows[0, 9] ?? "", finishedAt: rows[0, 10],
                          lockedUntil: rows[0, 11], lastError: rows[0, 12], fcmMessageName: rows[0, 13],
                          message: (try? JSONValue.parse(rows.bytes(0, 14) ?? [])) ?? .null,
                          errors: (try? JSONValue.parse(rows.bytes(0, 15) ?? [])) ?? .array([]))
    }
}
