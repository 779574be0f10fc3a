import Foundation
import JSON
import Postgres

/// The job life cycle's SQL (the named statements in Sources/Queue/SQL): one statement claims a
/// batch, one records a batch. One JobStore per connection.
public final class JobStore: @unchecked Sendable {
    public let connection: PGConnection
    /// Who holds a lease (host:pid:random), stored in herald.jobs.locked_by.
    public let workerID: String
    /// Seconds finished jobs stay in herald.jobs; 0 deletes them when they finish.
    public let retention: Double

    /// The FCM project this worker sends for: claims wait while herald.project_pauses holds it
    /// back (nil: no such check, e.g. the PostgreSQL ceiling benchmark).
    public var projectID: String?
    /// Whose jobs this worker claims: a registry name (herald.projects; it sends them with that
    /// project's credentials) or nil for jobs of no project (the pool's own credentials).
    public var jobsProject: String?
    /// The project's rate, per second, shared by every pool of the project (0: none).
    public var projectRate: Double = 0
    /// The time the claim takes place at, in seconds since 1970 (nil: the database's clock), so a
    /// test can move it (a bucket refilled, a job due) without waiting.
    public var claimTime: Double?
    /// The last claim took all it asked for, or a limit held jobs back: more are probably waiting.
    var inBacklog = false

    public init(connection: PGConnection, workerID: String = JobStore.defaultWorkerID(), retention: Double = 86_400,
                projectID: String? = nil) {
        self.projectID = projectID
        self.connection = connection
        self.workerID = workerID
        self.retention = retention
    }

    /// `host:pid:random`: the random part keeps two containers that share a host name and a pid apart.
    public static func defaultWorkerID() -> String {
        "\(ProcessInfo.processInfo.hostName):\(getpid()):\(String(UInt32.random(in: 0...UInt32.max), radix: 16))"
    }

    /// A text[] parameter value (PostgreSQL array literal, every element quoted).
    public static func textArray(_ values: [String]) -> PGValue {
        let items = values.map { value -> String in
            "\"" + value.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") + "\""
        }
        return .text("{" + items.joined(separator: ",") + "}")
    }

    /// The members of a device group from `array_to_json(members)::text` (none for NULL).
    static func members(fromJSON text: String?) -> [String] {
        guard let text, let items = (try? JSONValue.parse(text))?.arrayValue else { return [] }
        return items.compactMap(\.stringValue)
    }

    /// Holds back every worker of `projectID` for `seconds` (a project or topic quota answer).
    public func pauseProject(_ projectID: String, seconds: Double, reason: String) throws(PostgresError) {
        try connection.query(SQL.pauseProject, [.text(projectID), .double(seconds), .text(Self.clean(reason))])
    }

    /// Spreads the retries due before a project pause ends (`until`, seconds since 1970) over the
    /// `window` seconds after it (at most `limit` jobs). Returns how many moved.
    @discardableResult
    public func spreadHeldRetries(until: Double, window: Double, limit: Int = 50_000) throws(PostgresError) -> Int {
        try connection.query(SQL.spreadHeldRetries, [.double(until), .double(max(0, window)), .int(limit)]).affectedRows
    }

    /// The shared adapted-rate state of `projectID` (nil members: never lowered) and until when
    /// it is paused (nil: it is not).
    public func projectRateState(_ projectID: String) throws(PostgresError) -> (rate: AdaptiveRate.State, projectPausedUntil: Double?) {
        let result = try connection.query(SQL.projectRate, [.text(projectID)])
        let state = AdaptiveRate.State(adapted: result.double(0, try result.column("adapted_per_second")),
                                       at: result.double(0, try result.column("adapted_at")),
                                       regain: result.double(0, try result.column("regain_per_second")),
                                       stated: result.double(0, try result.column("stated_per_second")),
                                       statedAt: result.double(0, try result.column("stated_at")))
        return (state, result.double(0, try result.column("paused_until")))
    }

    /// Sets the adapted rate of `projectID` to `state` (its `at` is the database's now) unless
    /// another worker lowered it since `since` (the adapted_at last read; nil: never). Returns
    /// the new state, nil when another worker's lowering came first.
    public func lowerProjectRate(_ projectID: String, to state: AdaptiveRate.State, since: Double?, ceiling: Double)
        throws(PostgresError) -> AdaptiveRate.State? {
        let result = try connection.query(SQL.lowerProjectRate, [.text(projectID), .double(state.adapted ?? ceiling),
                                                                 since.map { .double($0) }, .double(ceiling),
                                                                 state.regain.map { .double($0) }])
        guard result.rowCount > 0, let adapted = result.double(0, try result.column("adapted_per_second")),
              let at = result.double(0, try result.column("adapted_at")) else { return nil }
        return AdaptiveRate.State(adapted: adapted, at: at, regain: result.double(0, try result.column("regain_per_second")),
                                  stated: result.double(0, try result.column("stated_per_second")),
                                  statedAt: result.double(0, try result.column("stated_at")))
    }

    /// Sets the limit FCM stated for `projectID` (`stated.stated`, messages a second) and the
    /// rate it allows (`stated.adapted`) for every worker of the project. Returns the new state.
    public func stateProjectQuota(_ projectID: String, to state: AdaptiveRate.State, ceiling: Double)
        throws(PostgresError) -> AdaptiveRate.State? {
        guard let stated = state.stated, let adapted = state.adapted else { return nil }
        let result = try connection.query(SQL.stateProjectQuota, [.text(projectID), .double(stated), .double(adapted), .double(ceiling)])
        guard result.rowCount > 0, let rate = result.double(0, try result.column("adapted_per_second")),
              let at = result.double(0, try result.column("adapted_at")) else { return nil }
        return AdaptiveRate.State(adapted: rate, at: at, regain: nil, stated: result.double(0, try result.column("stated_per_second")),
                                  statedAt: result.double(0, try result.column("stated_at")))
    }
}
