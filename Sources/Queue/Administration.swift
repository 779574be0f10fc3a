import JSON
import Postgres

/// The SQL the commands run besides the job life cycle: checks, reports, the sample batch and
/// device-group bookkeeping (its statements in `SQL/admin/`), so the CLI and the dashboard hold none.
public enum Administration {
    /// Whether `herald migrate` has created the schema in this database.
    public static func isMigrated(_ connection: PGConnection) throws(PostgresError) -> Bool {
        try connection.query(SQL.schemaExists).bool(0, 0) ?? false
    }

    /// Whether the schema has herald.projects (the registry of Firebase projects, migration 180).
    public static func hasProjectRegistry(_ connection: PGConnection) throws(PostgresError) -> Bool {
        try connection.query(SQL.projectsTableExists).bool(0, 0) ?? false
    }

    /// Whether the schema has herald.admin_log (the dashboard's audit trail, migration 060).
    public static func hasAdminLog(_ connection: PGConnection) throws(PostgresError) -> Bool {
        try connection.query(SQL.adminLogExists).bool(0, 0) ?? false
    }

    /// Marks a connection as the dashboard's, every statement bounded by `statementTimeoutMilliseconds`.
    public static func identifyAsDashboard(_ connection: PGConnection, statementTimeoutMilliseconds: Int) throws(PostgresError) {
        try connection.query(SQL.identifyAsDashboard, [.text(String(statementTimeoutMilliseconds))])
    }

    /// `application_name` of worker connections, visible in pg_stat_activity.
    public static let workerApplicationName = "herald work"

    /// Worker processes connected to this database and past their start-up checks.
    public static func connectedWorkers(_ connection: PGConnection) throws(PostgresError) -> Int {
        try connection.query(SQL.connectedWorkers, [.text(workerApplicationName)]).int(0, 0) ?? 0
    }

    /// Marks a connection as a worker's (see `connectedWorkers`).
    public static func identifyAsWorker(_ connection: PGConnection) throws(PostgresError) {
        try connection.query(SQL.setApplicationName, [.text(workerApplicationName)])
    }

    public struct Summary: Sendable {
        /// Jobs per state, by state name.
        public var states: [(state: String, count: Int)]
        public var deadLetters: Int
        public var prunedTokens: Int
    }

    /// The database's clock now, to give `summary(_:since:)` later.
    public static func databaseNow(_ connection: PGConnection) throws(PostgresError) -> String {
        try connection.query(SQL.databaseNow)[0, 0] ?? "-infinity"
    }

    /// What happened since `since` (a time from `databaseNow`): jobs created since then per
    /// state, dead letters and pruned tokens made since then. Earlier runs' rows do not count.
    public static func summary(_ connection: PGConnection, since: String) throws(PostgresError) -> Summary {
        let states = try connection.query(SQL.jobsPerStateSince, [.text(since)])
        return Summary(states: (0..<states.rowCount).map { (states[$0, 0] ?? "?", states.int($0, 1) ?? 0) },
                       deadLetters: try connection.query(SQL.deadLettersSince, [.text(since)]).int(0, 0) ?? 0,
                       prunedTokens: try connection.query(SQL.prunedTokensSince, [.text(since)]).int(0, 0) ?? 0)
    }

    /// The sample batch of the embedded default: one INSERT ... SELECT, like a campaign. A few
    /// emulator test tokens show the other outcomes: a retried 503, pruned tokens, a dead letter.
    @discardableResult
    public static func enqueueSampleBatch(_ connection: PGConnection, count: Int) throws(PostgresError) -> Int {
        try connection.query(SQL.enqueueSampleBatch, [.int(count)]).affectedRows
    }

    /// A device group as herald.device_groups has it.
    public struct DeviceGroup: Sendable, Equatable {
        public var notificationKey: String
        public var members: [String]
    }

    public static func deviceGroup(_ connection: PGConnection, name: String) throws(PostgresError) -> DeviceGroup? {
        let row = try connection.query(SQL.deviceGroup, [.text(name)])
        guard row.rowCount == 1, let key = row[0, 0] else { return nil }
        return DeviceGroup(notificationKey: key, members: Claimer.members(fromJSON: row[0, 1]))
    }

    /// Applies a change FCM confirmed (from `herald groups`) in its own transaction; returns the group after it.
    public static func recordGroupChange(_ connection: PGConnection, _ change: GroupChange) throws(PostgresError) -> DeviceGroup? {
        try connection.transaction { () throws(PostgresError) in try OutcomeRecorder.apply(change, on: connection) }
        return try deviceGroup(connection, name: change.name)
    }
}
