import Postgres
import Queue

/// `herald bench --with`: the features of queue 'default' (the bench's jobs' queue) a run
/// measures, set up in the bench's private PostgreSQL so they run on every claim and record but
/// hold nothing back.
public enum BenchmarkFeatures {
    /// The registry projects of `--with projects`.
    public static let projectNames = ["bench-a", "bench-b"]
    /// The APNs app of `--with apns`.
    public static let apnsAppName = "bench-ios"

    /// What an earlier run set up goes first (the private cluster outlives a run), so a run
    /// without a feature runs without it, and each run starts from the same tables.
    public static func reset(_ connection: PGConnection) throws(PostgresError) {
        try connection.query(SQL.removeFrequencyCap)
        try connection.query(SQL.removeQuietHours)
        try connection.query(SQL.setQueueEvents, [.bool(false)])
        try connection.execute(SQL.truncateFeatureTables)
        try connection.query(SQL.removeBenchProjects)
    }

    /// `caps`: a frequency cap of 1,000 a day per token, which never binds.
    public static func setFrequencyCap(_ connection: PGConnection) throws(PostgresError) {
        try connection.query(SQL.setFrequencyCap, [.int(1000), .text("1 day")])
    }

    /// `quiet-hours`: a window of an hour starting 6 hours from now (UTC: the bench's tokens
    /// have no time zone), so nothing waits.
    public static func setQuietHours(_ connection: PGConnection) throws(PostgresError) {
        try connection.query(SQL.setQuietHoursAhead, [.text("6 hours"), .text("7 hours")])
    }

    /// `events`: a herald.events row per job.
    public static func setEvents(_ connection: PGConnection) throws(PostgresError) {
        try connection.query(SQL.setQueueEvents, [.bool(true)])
    }

    /// `apns`: APNs app `apnsAppName` with the key the bench's emulator wrote, for the app (topic)
    /// it wrote the key for.
    public static func addAPNsApp(_ connection: PGConnection, keyFile: String, keyID: String, teamID: String, topic: String) throws {
        _ = try APNsApps.add(connection, name: apnsAppName, keyFile: keyFile, keyID: keyID, teamID: teamID, topic: topic,
                             sandbox: false, maxRate: nil, source: "herald bench")
    }

    /// `projects`: registry project `name` for FCM project `projectID`, its key at `credentials`.
    public static func addProject(_ connection: PGConnection, name: String, projectID: String, credentials: String) throws(PostgresError) {
        try connection.query(SQL.addProject, [.text(name), .text(projectID), .text(credentials)])
    }
}
