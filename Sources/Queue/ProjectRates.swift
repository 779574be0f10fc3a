import Postgres

/// The FCM projects' rates and pauses (herald.project_rates, herald.project_pauses), for
/// `herald stats`.
public struct ProjectRate: Sendable, Equatable {
    public var projectID: String
    /// Sends a second the last claim used: the adapted rate in force (at most --max-rate).
    public var rate: Double?
    /// The rate set at the last project quota answer, and how many seconds ago (nil: never).
    public var loweredTo: Double?
    public var loweredAgo: Double?
    /// The rate it doubles back to after a storm of quota answers (nil: none).
    public var regain: Double?
    /// Seconds the project is still paused after a quota answer (nil: not paused), and why.
    public var pausedFor: Double?
    public var reason: String?

    public static func all(_ connection: PGConnection) throws(PostgresError) -> [ProjectRate] {
        let result = try connection.query(SQL.projectRatesOverview)
        let project = try result.column("project_id"), rate = try result.column("rate"), lowered = try result.column("lowered_to")
        let ago = try result.column("lowered_ago"), regain = try result.column("regain"), paused = try result.column("paused_for"), reason = try result.column("reason")
        return (0..<result.rowCount).map { row in
            ProjectRate(projectID: result[row, project] ?? "", rate: result.double(row, rate), loweredTo: result.double(row, lowered),
                        loweredAgo: result.double(row, ago), regain: result.double(row, regain), pausedFor: result.double(row, paused), reason: result[row, reason])
        }
    }
}
