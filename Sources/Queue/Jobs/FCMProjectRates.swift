import Postgres

/// The FCM projects' shared rates (herald.project_rates) and holds (herald.project_pauses): what
/// a worker reads and writes when FCM answers with a quota error, so every worker of the FCM
/// project slows down or waits together. One per connection (`JobStore.fcmProjectRates`).
/// (An operator's pause of a registry entry is another thing: herald.pause_project_sending,
/// `ProjectRegistry.pause`.)
public final class FCMProjectRates: @unchecked Sendable {
    let connection: PGConnection

    init(connection: PGConnection) {
        self.connection = connection
    }

    /// Holds back every worker of `fcmProject` for `seconds` (a project or topic quota answer).
    public func hold(_ fcmProject: String, seconds: Double, reason: String) throws(PostgresError) {
        try connection.query(SQL.holdFcmProject, [.text(fcmProject), .double(seconds), .text(OutcomeRecorder.clean(reason))])
    }

    /// Spreads the retries of the paused project due before its hold ends (`until`, seconds
    /// since 1970) over the `window` seconds after it (at most `limit` jobs). `project`: whose
    /// jobs (a registry name; nil: the jobs of no project); `fcmProject`: the FCM project held,
    /// whose registry entry's jobs the hold stops too. Other projects' retries keep their times.
    /// Returns how many moved.
    @discardableResult
    public func spreadHeldRetries(project: String?, fcmProject: String?, until: Double, window: Double,
                                  limit: Int = 50_000) throws(PostgresError) -> Int {
        try connection.query(SQL.spreadHeldRetries, [.double(until), .double(max(0, window)), .int(limit),
                                                     project.map { .text($0) }, fcmProject.map { .text($0) }]).affectedRows
    }

    /// The shared adapted-rate state of `fcmProject` (nil members: never lowered) and until when
    /// it is held (nil: it is not).
    public func state(_ fcmProject: String) throws(PostgresError) -> (rate: AdaptiveRate.State, heldUntil: Double?) {
        let result = try connection.query(SQL.fcmProjectRate, [.text(fcmProject)])
        return (try Self.rateState(result, row: 0), result.double(0, try result.column("paused_until")))
    }

    /// The adapted-rate state in `row` of a statement that returns herald.project_rates' columns
    /// (adapted_per_second, adapted_at, regain_per_second, stated_per_second, stated_at,
    /// window_held_until; times in seconds since 1970).
    static func rateState(_ result: PGResult, row: Int) throws(PostgresError) -> AdaptiveRate.State {
        AdaptiveRate.State(adapted: result.double(row, try result.column("adapted_per_second")),
                           at: result.double(row, try result.column("adapted_at")),
                           regain: result.double(row, try result.column("regain_per_second")),
                           stated: result.double(row, try result.column("stated_per_second")),
                           statedAt: result.double(row, try result.column("stated_at")),
                           windowHeldUntil: result.double(row, try result.column("window_held_until")))
    }

    /// `fcmProject`'s quota window is spent: every worker of it sends at the probe rate
    /// (`AdaptiveRate.probeRate`) until `until` (seconds since 1970) at the latest, or until a
    /// probe is accepted (`endWindowHold`). `seenAt`: when the refused request that showed it
    /// was sent; nothing changes (nil) when an answer to a request sent later came first.
    public func holdWindow(_ fcmProject: String, until: Double, seenAt: Double, ceiling: Double) throws(PostgresError) -> AdaptiveRate.State? {
        let result = try connection.query(SQL.holdFcmProjectWindow, [.text(fcmProject), .double(until), .double(seenAt), .double(ceiling)])
        guard result.rowCount > 0 else { return nil }
        return try Self.rateState(result, row: 0)
    }

    /// A probe of `fcmProject` sent at `seenAt` was accepted: its window is renewed and every
    /// worker paces at the rate in force again. Nil when nothing changed (no row, or the refusal
    /// of a request sent later held it again).
    public func endWindowHold(_ fcmProject: String, seenAt: Double) throws(PostgresError) -> AdaptiveRate.State? {
        let result = try connection.query(SQL.endFcmProjectWindowHold, [.text(fcmProject), .double(seenAt)])
        guard result.rowCount > 0 else { return nil }
        return try Self.rateState(result, row: 0)
    }

    /// Sets the adapted rate of `fcmProject` to `state` (its `at` is the database's now) unless
    /// another worker lowered it since `since` (the adapted_at last read; nil: never). Returns
    /// the new state, nil when another worker's lowering came first.
    public func lower(_ fcmProject: String, to state: AdaptiveRate.State, since: Double?, ceiling: Double)
        throws(PostgresError) -> AdaptiveRate.State? {
        let result = try connection.query(SQL.lowerFcmProjectRate, [.text(fcmProject), .double(state.adapted ?? ceiling),
                                                                    since.map { .double($0) }, .double(ceiling),
                                                                    state.regain.map { .double($0) }])
        guard result.rowCount > 0, result.double(0, try result.column("adapted_per_second")) != nil,
              result.double(0, try result.column("adapted_at")) != nil else { return nil }
        return try Self.rateState(result, row: 0)
    }

    /// Sets the limit FCM stated for `fcmProject` (`stated.stated`, messages a second) and the
    /// rate it allows (`stated.adapted`) for every worker of the project. Returns the new state.
    public func stateQuota(_ fcmProject: String, to state: AdaptiveRate.State, ceiling: Double)
        throws(PostgresError) -> AdaptiveRate.State? {
        guard let stated = state.stated, let adapted = state.adapted else { return nil }
        let result = try connection.query(SQL.stateFcmProjectQuota, [.text(fcmProject), .double(stated), .double(adapted), .double(ceiling)])
        guard result.rowCount > 0, result.double(0, try result.column("adapted_per_second")) != nil,
              result.double(0, try result.column("adapted_at")) != nil else { return nil }
        return try Self.rateState(result, row: 0)
    }

    /// Every FCM project's rate and hold, for `herald stats`.
    public static func overview(_ connection: PGConnection) throws(PostgresError) -> [FCMProjectRate] {
        let result = try connection.query(SQL.fcmProjectRatesOverview)
        let project = try result.column("project_id"), rate = try result.column("rate"), lowered = try result.column("lowered_to")
        let ago = try result.column("lowered_ago"), regain = try result.column("regain"), paused = try result.column("paused_for"), reason = try result.column("reason")
        return (0..<result.rowCount).map { row in
            FCMProjectRate(fcmProject: result[row, project] ?? "", rate: result.double(row, rate), loweredTo: result.double(row, lowered),
                           loweredAgo: result.double(row, ago), regain: result.double(row, regain), pausedFor: result.double(row, paused), reason: result[row, reason])
        }
    }
}

/// One FCM project's rate and hold (herald.project_rates, herald.project_pauses), as
/// `herald stats` shows it.
public struct FCMProjectRate: Sendable, Equatable {
    public var fcmProject: String
    /// Sends a second the last claim used: the adapted rate in force (at most --max-rate).
    public var rate: Double?
    /// The rate set at the last project quota answer, and how many seconds ago (nil: never).
    public var loweredTo: Double?
    public var loweredAgo: Double?
    /// The rate it doubles back to after a storm of quota answers (nil: none).
    public var regain: Double?
    /// Seconds the FCM project is still held after a quota answer (nil: not held), and why.
    public var pausedFor: Double?
    public var reason: String?
}
