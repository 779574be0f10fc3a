import JSON
import Postgres

/// herald.admin_log: when, what, which ids, from where.
public enum AdminLog {
    public struct Entry: Sendable {
        public var at: String
        public var action: String
        public var ids: [Int]
        public var details: JSONValue
        public var source: String
    }

    public static func record(_ connection: PGConnection, action: String, ids: [Int], details: JSONValue, source: String) throws(PostgresError) {
        try connection.query(SQL.adminLogRecord,
                             [.text(action), .textArray(ids.map(String.init)), .text(details.serialized), .text(source)])
    }

    public static func recent(_ connection: PGConnection, limit: Int) throws(PostgresError) -> [Entry] {
        let rows = try connection.query(SQL.adminLogRecent, [.int(limit)])
        return (0..<rows.rowCount).map { row in
            let ids = ((try? JSONValue.parse(rows[row, 2] ?? "[]"))?.arrayValue ?? []).compactMap(\.intValue)
            return Entry(at: rows[row, 0] ?? "", action: rows[row, 1] ?? "", ids: ids,
                         details: (try? JSONValue.parse(rows[row, 3] ?? "{}")) ?? .null, source: rows[row, 4] ?? "")
        }
    }
}
