import JSON
import Postgres

/// The SQL the commands run besides the job life cycle: checks, reports, the sample batch and
/// device-group bookkeeping. Kept here, with the rest of Herald's SQL, so the CLI holds none.
public enum Administration {
    /// Whether `herald migrate` has created the schema in this database.
    public static func isMigrated(_ connection: PGConnection) throws(PostgresError) -> Bool {
        try connection.query("SELECT to_regclass('herald.jobs') IS NOT NULL").bool(0, 0) ?? false
    }

    /// `application_name` of worker connections, visible in pg_stat_activity.
    public static let workerApplicationName = "herald work"

    /// Worker processes connected to this database and past their start-up checks.
    public static func connectedWorkers(_ connection: PGConnection) throws(PostgresError) -> Int {
        try connection.query("""
            SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND datname = current_database()
            """, [.text(workerApplicationName)]).int(0, 0) ?? 0
    }

    /// Marks a connection as a worker's (see `connectedWorkers`).
    public static func identifyAsWorker(_ connection: PGConnection) throws(PostgresError) {
        try connection.query("SELECT set_config('application_name', $1, false)", [.text(workerApplicationName)])
    }

    public struct Summary: Sendable {
        /// Jobs per state, by state name.
        public var states: [(state: String, count: Int)]
        public var deadLetters: Int
        public var prunedTokens: Int
    }

    public static func summary(_ connection: PGConnection) throws(PostgresError) -> Summary {
        let states = try connection.query("SELECT state, count(*) FROM herald.jobs GROUP BY state ORDER BY state")
        return Summary(states: (0..<states.rowCount).map { (states[$0, 0] ?? "?", states.int($0, 1) ?? 0) },
                       deadLetters: try connection.query("SELECT count(*) FROM herald.dead_letters").int(0, 0) ?? 0,
                       prunedTokens: try connection.query("SELECT count(*) FROM herald.pruned_tokens").int(0, 0) ?? 0)
    }

    /// The sample batch of the embedded default: one INSERT ... SELECT, like a campaign. A few
    /// emulator test tokens show the other outcomes: a retried 503, pruned tokens, a dead letter.
    @discardableResult
    public static func enqueueSampleBatch(_ connection: PGConnection, count: Int) throws(PostgresError) -> Int {
        try connection.query("""
            INSERT INTO herald.jobs (message)
            SELECT jsonb_build_object(
                       'token', CASE WHEN g % 500 = 0 THEN 'fail-unregistered-' || g
                                     WHEN g % 200 = 0 THEN 'fail-unavailable-1-' || g
                                     WHEN g = 7 THEN 'fail-invalid-7'
                                     ELSE 'sample-device-' || g END,
                       'notification', jsonb_build_object('title', 'Hello from Herald', 'body', 'Sample message ' || g),
                       'data', jsonb_build_object('sample', g::text))
            FROM generate_series(1, $1::int) AS g
            """, [.int(count)]).affectedRows
    }

    /// A device group as herald.device_groups has it.
    public struct DeviceGroup: Sendable, Equatable {
        public var notificationKey: String
        public var members: [String]
    }

    public static func deviceGroup(_ connection: PGConnection, name: String) throws(PostgresError) -> DeviceGroup? {
        let row = try connection.query("SELECT notification_key, array_to_json(members)::text FROM herald.device_groups WHERE name = $1",
                                       [.text(name)])
        guard row.rowCount == 1, let key = row[0, 0] else { return nil }
        return DeviceGroup(notificationKey: key, members: JobStore.members(fromJSON: row[0, 1]))
    }

    /// Applies a change FCM confirmed (from `herald groups`) in its own transaction; returns the group after it.
    public static func recordGroupChange(_ connection: PGConnection, _ change: GroupChange) throws(PostgresError) -> DeviceGroup? {
        try connection.transaction { () throws(PostgresError) in try JobStore(connection: connection).apply(change) }
        return try deviceGroup(connection, name: change.name)
    }
}
