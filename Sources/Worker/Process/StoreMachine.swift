import Queue

/// What the sender thread tells the store thread, through the outbox mailbox.
public enum SenderEvent: Sendable, Equatable {
    /// Jobs settled (answered, or settled without a request); each carries its attempt.
    case outcomes([JobOutcome])
    /// A project or topic quota answer, or FCM unreachable (the sender's circuit is open): send
    /// nothing new before this time (seconds since 1970). `reason` goes to herald.project_pauses.
    case projectPaused(until: Double, reason: String = "QUOTA_EXCEEDED")
    /// A project quota answer: lower the project's adapted rate. `accepted`: the sends a second
    /// FCM accepted just before (nil: too short a time to tell); `proven`: the most it accepted
    /// over the last minute (nil: nothing delivered), both as the pool's. `stated`: the limit the
    /// answer stated (messages a second, ErrorInfo `quota_limit_value` per `quota_unit`), which
    /// sets the rate at once (nil: none, or one that could not be used).
    case projectQuota(accepted: Double?, proven: Double?, stated: Double? = nil)
    /// The project's quota window is spent (its quota answers kept coming while every pool
    /// paced at the stated limit): every pool holds the project's sends, probing about one
    /// message a second, until `until` (seconds since 1970) at the latest. `seenAt`: when the
    /// last refused send that showed it was sent.
    case quotaWindowSpent(until: Double, seenAt: Double)
    /// A probe sent at `seenAt` was accepted while the window was held: a new window; every pool
    /// paces at the stated limit again.
    case quotaWindowRenewed(seenAt: Double)
    /// The sender's window (requests in flight it wants at most) changed.
    case window(Int)
    /// The sender has stopped: nothing is in flight any more.
    case finished
    /// In a worker carrying several projects: a project's pause or quota answer, for that
    /// project alone (its registry name; nil: the jobs of no project). The store loop handles it
    /// per project (its claims, its FCM project's rate and pauses); the machine never sees it.
    indirect case forProject(String?, SenderEvent)
    /// An APNs app's answer every job of it would meet (a 403 of its key, TopicDisallowed, a URL
    /// that is not APNs's): pause the app with `reason` (only inside `forProject`).
    case apnsAppRefused(reason: String)
}

extension SenderEvent {
    init(_ change: QuotaWindowWatch.Change) {
        switch change {
        case .spent(let until, let seenAt): self = .quotaWindowSpent(until: until, seenAt: seenAt)
        case .renewed(let seenAt): self = .quotaWindowRenewed(seenAt: seenAt)
        }
    }
}

/// The store thread's decisions, without I/O: a value that holds the loop's phase, its timers
/// and the work in hand. The loop (`StoreLoop`) asks `next(now:)` what to do, does it, and
/// reports the result with one of the event methods; then it asks again. Time is always passed
/// in, so unit tests drive it with a clock of their own, no database and no sleep.
///
/// Wake-up rules (what makes the worker claim):
/// - a NOTIFY on `herald_jobs` (a statement inserted jobs, or another worker promoted some):
///   promote (which also reports when the next scheduled job is due), then claim;
/// - the earliest due time it knows of: the next scheduled job the database reported after its
///   last promotion, and the retries and releases it recorded itself. Then it promotes the due
///   scheduled jobs to available and claims;
/// - a claim that came back full (there is probably more), as soon as the sender has room;
/// - every `pollInterval`, promote and claim anyway: the safety net for a lost notification.
struct StoreMachine: Sendable {
    struct Settings: Sendable, Equatable {
        /// Requests in flight the sender takes at most.
        var concurrency: Int
        /// Jobs claimed per statement at most.
        var batch: Int
        var leaseSeconds: Double
        var pollInterval: Double
        var shutdownTimeout: Double
        /// Stop once no scheduled, available or running job is left.
        var drain: Bool
        /// Scheduled jobs promoted per statement at most.
        var promoteBatch = 10_000
        /// After a statement fails on a healthy connection, wait this long before claiming again.
        var errorPause = 0.2

        /// Claim when at least this much room is free in the sender's `window` (or when nothing
        /// is in flight at all), so claims come in batches rather than one job at a time.
        func threshold(window: Int) -> Int { max(1, min(batch, window) / 4) }
        /// How often the maintenance pass runs: every pass renews the leader's lease (15 s), so
        /// at least three times a lease. The upkeep itself (rescue, retention) comes every
        /// `upkeepInterval`.
        var maintenanceInterval: Double { max(0.5, min(leaseSeconds / 4, 5)) }
        var upkeepInterval: Double { max(0.5, min(leaseSeconds / 4, 15)) }
    }

    enum Phase: Sendable, Equatable {
        /// Claiming, sending, recording.
        case running
        /// A drain found nothing left: asking the sender to stop.
        case drained
        /// Stop requested (SIGTERM, or drained): no new claims; record what the sender hands
        /// back until it has finished.
        case stopping(since: Double)
        case exited(status: Int32)
    }

    enum Database: Sendable, Equatable {
        case up
        /// Lost; try again at `retryAt`, then wait `delay` longer each time (up to 10 s).
        case down(retryAt: Double, delay: Double)
    }

    enum Action: Sendable, Equatable {
        case reconnect
        case record([JobOutcome])
        case publishProjectPause(until: Double)
        /// Lower the project's adapted rate (a project quota answer), or set it from the limit
        /// the answer stated.
        case lowerRate(accepted: Double?, proven: Double?, stated: Double?)
        /// Hold the project's spent quota window for every pool (herald.project_rates), or end
        /// the hold (a probe was accepted).
        case holdQuotaWindow(until: Double, seenAt: Double)
        case endQuotaWindowHold(seenAt: Double)
        case extendLeases([Int])
        case maintain
        case promote(limit: Int)
        case claim(limit: Int)
        case checkDrained
        /// Tell the sender to stop (the drain is complete).
        case stopSender
        /// Wait for an event (sender, notification) until this time at the latest.
        case wait(until: Double)
        case exit(status: Int32)
    }

    let settings: Settings
    private(set) var phase: Phase = .running
    private(set) var database: Database = .up
    /// Outcomes the sender handed back, not yet recorded.
    private(set) var pending: [JobOutcome] = []
    /// After PostgreSQL refused a batch on a healthy connection: how many of the pending outcomes
    /// (the first ones) to record one at a time, so one bad outcome cannot hold up the others.
    private(set) var singlesLeft = 0
    /// Retries standing in for outcomes PostgreSQL refused (job id and attempt): if one of them is
    /// refused too, the job is left to come back when its lease runs out.
    private var standIns: Set<Attempt> = []
    /// A job's attempt, as a stand-in is known by (a value: no array allocated per outcome).
    private struct Attempt: Hashable, Sendable { var id: Int; var attempt: Int }
    /// Jobs handed to the sender whose outcome has not come back.
    private(set) var outstanding = 0
    private(set) var leases: LeaseHeartbeat
    private(set) var senderFinished = false
    /// The sender's pause of the project (the same value its machine holds), and the part of it
    /// already written to herald.project_pauses.
    private(set) var pause = ProjectPause()
    private var publishedProjectPause = 0.0
    var projectPausedUntil: Double { pause.until }
    /// Why the latest pause was asked for (herald.project_pauses.reason).
    var projectPauseReason: String { pause.reason }
    /// A project quota answer asks to lower the adapted rate (what FCM accepted, if known).
    private(set) var lowering: (accepted: Double?, proven: Double?, stated: Double?)? = nil
    /// The sender's findings about the project's quota window, to be written in order
    /// (`.quotaWindowSpent`, `.quotaWindowRenewed`).
    private(set) var quotaWindowEvents: [SenderEvent] = []

    /// Requests in flight the sender wants at most now (its adaptive window; at most concurrency).
    private(set) var window: Int
    /// Worth claiming now (notified, or the last claim came back full).
    private(set) var claimWanted = true
    /// A NOTIFY said new jobs arrived: claim with whatever room there is, not only once a quarter
    /// batch is free, so a one-time code does not wait for a backlog's answers to come back.
    private var newWork = false
    /// Worth promoting now (start, reconnect, a promotion that hit its limit).
    private(set) var promoteWanted = true
    /// The earliest known due time of a scheduled job.
    private(set) var nextDue: Double?
    private(set) var nextPoll: Double
    private var nextHeartbeat: Double
    private var nextMaintenance: Double
    private var claimNotBefore = 0.0
    /// A rate limit or max_in_flight held jobs back at the last claim: claim again from then.
    private(set) var limitedUntil = 0.0
    private var drainCheckWanted = false

    init(settings: Settings, now: Double) {
        self.settings = settings
        window = settings.concurrency
        leases = LeaseHeartbeat(leaseSeconds: settings.leaseSeconds)
        nextPoll = now + settings.pollInterval
        nextHeartbeat = now + leases.interval
        nextMaintenance = now
    }

    // MARK: Deciding

    /// What to do now. Call again after reporting the action's result.
    mutating func next(now: Double) -> Action {
        if case .exited(let status) = phase { return .exit(status: status) }

        if case .down(let retryAt, _) = database {
            if case .stopping(let since) = phase, senderFinished, now >= since + settings.shutdownTimeout {
                phase = .exited(status: 1)
                return .exit(status: 1)
            }
            return now >= retryAt ? .reconnect : .wait(until: retryAt)
        }

        if !pending.isEmpty { return .record(singlesLeft > 0 ? [pending[0]] : pending) }

        // Every extension of the pause is shared, however small: FCM counts its Retry-After from
        // its latest quota answer, which another worker of the project may not have seen.
        if projectPausedUntil > publishedProjectPause + 0.02 && projectPausedUntil > now {
            return .publishProjectPause(until: projectPausedUntil)
        }

        if let lowering { return .lowerRate(accepted: lowering.accepted, proven: lowering.proven, stated: lowering.stated) }

        switch quotaWindowEvents.first {
        case .quotaWindowSpent(let until, let seenAt)?: return .holdQuotaWindow(until: until, seenAt: seenAt)
        case .quotaWindowRenewed(let seenAt)?: return .endQuotaWindowHold(seenAt: seenAt)
        default: break
        }

        if case .stopping = phase, senderFinished, outstanding <= 0 {
            phase = .exited(status: 0)
            return .exit(status: 0)
        }

        if now >= nextHeartbeat {
            let due = leases.due(now: now)
            if !due.isEmpty { return .extendLeases(due) }
            nextHeartbeat = now + leases.interval
        }

        if now >= nextMaintenance { return .maintain }

        if case .drained = phase { return .stopSender }

        if case .running = phase, now >= claimNotBefore {
            if promoteWanted || now >= nextPoll || (nextDue.map { now >= $0 } ?? false) {
                return .promote(limit: settings.promoteBatch)
            }
            if claimWanted, now >= projectPausedUntil, now >= limitedUntil, let limit = claimLimit { return .claim(limit: limit) }
            if drainCheckWanted { return .checkDrained }
        }
        return .wait(until: wakeUpTime(now: now))
    }

    /// How many jobs a claim may take now, or nil when the sender has too little room.
    private var claimLimit: Int? {
        let capacity = window - outstanding
        guard capacity >= settings.threshold(window: window) || (capacity > 0 && (outstanding <= 0 || newWork)) else { return nil }
        return min(capacity, settings.batch)
    }

    /// The earliest timer: poll, due job, heartbeat, maintenance, the end of a quota pause.
    private func wakeUpTime(now: Double) -> Double {
        var time = min(nextHeartbeat, nextMaintenance)
        if case .running = phase {
            time = min(time, nextPoll)
            if let nextDue { time = min(time, nextDue) }
            if claimWanted && projectPausedUntil > now { time = min(time, projectPausedUntil) }
            if claimWanted && limitedUntil > now { time = min(time, limitedUntil) }
            if claimNotBefore > now { time = min(time, claimNotBefore) }
        }
        if case .stopping(let since) = phase, senderFinished, case .down = database {
            time = min(time, since + settings.shutdownTimeout)
        }
        return time
    }

    // MARK: Events

    mutating func received(_ events: [SenderEvent], now: Double) {
        for event in events {
            switch event {
            case .outcomes(let outcomes):
                outstanding -= outcomes.count
                pending += outcomes
                for outcome in outcomes {
                    // A job put back for later is a due time this worker knows without asking.
                    switch outcome.action {
                    case .retry(_, let delay), .released(let delay), .snoozed(_, let delay, _, _):
                        if delay > 0 { learnDue(now + delay) } else { claimWanted = true }
                    default:
                        break
                    }
                }
                // Room again: `claimLimit` counts it at the next claim.
            case .projectPaused(let until, let reason):
                pause.extend(to: until, reason: reason, byQuota: false, now: now)
            case .projectQuota(let accepted, let proven, let stated):
                // The lowest report of what was accepted wins: it is the one closest to what FCM
                // accepts; of what was proven, the highest; of the limits stated, the latest.
                if let held = lowering {
                    lowering = (held.accepted.map { old in accepted.map { min(old, $0) } ?? old } ?? accepted,
                                held.proven.map { old in proven.map { max(old, $0) } ?? old } ?? proven,
                                stated ?? held.stated)
                } else {
                    lowering = (accepted, proven, stated)
                }
            case .quotaWindowSpent, .quotaWindowRenewed:
                // The latest finding of each kind is the one that counts; written in order.
                if let last = quotaWindowEvents.last, Self.sameKind(last, event) { quotaWindowEvents.removeLast() }
                quotaWindowEvents.append(event)
            case .window(let size):
                window = min(settings.concurrency, max(1, size))
            case .finished:
                senderFinished = true
            case .forProject, .apnsAppRefused:
                break  // the store loop's, per project
            }
        }
    }

    /// Jobs the sender never took (it stopped first): put back without counting the attempt.
    mutating func unsent(_ jobs: [ClaimedJob]) {
        guard !jobs.isEmpty else { return }
        outstanding -= jobs.count
        pending += jobs.map { $0.outcome(.released()) }
    }

    /// A NOTIFY: jobs were inserted (maybe due later: promoting also learns the next due time)
    /// or another worker promoted some.
    mutating func notified(now: Double) {
        claimWanted = true
        promoteWanted = true
        newWork = true
        // A limit that held the last claim back held back its own jobs: the new ones may be of
        // another queue, campaign or project, which it does not hold (a one-time code beside a
        // rate-limited campaign). The claim that follows finds out; what is still held says so again.
        limitedUntil = 0
    }

    mutating func stopRequested(now: Double) {
        switch phase {
        case .running, .drained: phase = .stopping(since: now)
        case .stopping, .exited: break
        }
    }

    mutating func senderStopRequested(now: Double) {
        if case .drained = phase { phase = .stopping(since: now) }
    }

    /// `heldBackFor`: a limit (a rate, max_in_flight) held jobs back for that many seconds.
    mutating func claimed(_ jobs: [ClaimedJob], limit: Int, heldBackFor: Double? = nil, now: Double) {
        outstanding += jobs.count
        leases.claimed(jobs.map(\.id), now: now)
        newWork = false
        claimWanted = jobs.count >= limit
        if let heldBackFor {
            // There is more, but not before the limit allows it.
            claimWanted = true
            limitedUntil = now + heldBackFor
        }
        if jobs.isEmpty && settings.drain && outstanding <= 0 && pending.isEmpty { drainCheckWanted = true }
    }

    mutating func promoted(_ promotion: Promotion, now: Double) {
        promoteWanted = promotion.promoted >= settings.promoteBatch
        nextDue = promotion.nextDueIn.map { now + max(0, $0) }
        nextPoll = now + settings.pollInterval
        // Whether this worker promoted them or another did a moment ago, due jobs may be waiting.
        claimWanted = true
    }

    mutating func recorded(count: Int) {
        let done = pending.prefix(count)
        leases.settled(done.map(\.id))
        if !standIns.isEmpty {
            for outcome in done { standIns.remove(Attempt(id: outcome.id, attempt: outcome.attempt)) }
        }
        pending.removeFirst(min(count, pending.count))
        singlesLeft = max(0, singlesLeft - count)
    }

    /// What became of outcomes PostgreSQL refused to record (the loop logs it).
    enum Refusal: Sendable, Equatable {
        /// A batch: its outcomes are now recorded one at a time.
        case oneByOne(count: Int)
        /// One outcome: a retry in a minute stands in for it.
        case replaced(JobOutcome, by: JobOutcome)
        /// The stand-in too: the job comes back when its lease runs out.
        case givenUp(JobOutcome)
    }

    /// The stand-in's delay: long enough that a refusal that repeats costs little.
    static let standInDelay = 60.0

    /// PostgreSQL refused to record `outcomes` (the last `.record`) on a healthy connection;
    /// `code` is its SQLSTATE. A batch is recorded again one outcome at a time; a single outcome
    /// is replaced by a plain retry; a refused retry that stood in for one is given up.
    mutating func recordRefused(_ outcomes: [JobOutcome], code: String?, now: Double) -> Refusal {
        guard outcomes.count == 1, let refused = outcomes.first, pending.first == refused else {
            singlesLeft = outcomes.count
            return .oneByOne(count: outcomes.count)
        }
        if standIns.remove(Attempt(id: refused.id, attempt: refused.attempt)) != nil {
            pending.removeFirst()
            singlesLeft = max(0, singlesLeft - 1)
            // No heartbeat for it any more: its lease runs out and the job comes back.
            leases.settled([refused.id])
            return .givenUp(refused)
        }
        let standIn = JobOutcome(id: refused.id, attempt: refused.attempt, .retry(
            error: "herald could not record this job's outcome (\(code ?? "error")); sending it again", delay: Self.standInDelay))
        pending[0] = standIn
        standIns.insert(Attempt(id: refused.id, attempt: refused.attempt))
        if singlesLeft == 0 { singlesLeft = 1 }
        return .replaced(refused, by: standIn)
    }

    mutating func rateLowered() { lowering = nil }

    /// The first of `quotaWindowEvents` is written. A renewal lets the claims go at once: the
    /// rate in force is the paced one again, not the probes' one a second that held the last claim.
    mutating func quotaWindowWritten() {
        guard !quotaWindowEvents.isEmpty else { return }
        if case .quotaWindowRenewed = quotaWindowEvents.removeFirst() {
            limitedUntil = 0
            claimWanted = true
        }
    }

    private static func sameKind(_ a: SenderEvent, _ b: SenderEvent) -> Bool {
        switch (a, b) {
        case (.quotaWindowSpent, .quotaWindowSpent), (.quotaWindowRenewed, .quotaWindowRenewed): true
        default: false
        }
    }

    mutating func projectPausePublished(until: Double) {
        publishedProjectPause = max(publishedProjectPause, until)
    }

    mutating func leasesExtended(_ ids: [Int], now: Double) {
        leases.extended(ids, now: now)
        nextHeartbeat = now + leases.interval
    }

    mutating func maintained(now: Double) {
        nextMaintenance = now + settings.maintenanceInterval
    }

    mutating func drainChecked(workLeft: Bool, now: Double) {
        drainCheckWanted = false
        if !workLeft, case .running = phase { phase = .drained }
    }

    /// A statement failed on a connection that is still healthy (one bad statement): pause
    /// claims briefly instead of spinning.
    mutating func statementFailed(now: Double) {
        claimNotBefore = now + settings.errorPause
        // Maintenance failures must not repeat at once either.
        if now >= nextMaintenance { nextMaintenance = now + settings.maintenanceInterval }
    }

    mutating func connectionLost(now: Double) {
        if case .up = database { database = .down(retryAt: now + 0.5, delay: 0.5) }
    }

    mutating func reconnectFailed(now: Double) {
        guard case .down(_, let delay) = database else { return }
        let next = min(delay * 2, 10)
        database = .down(retryAt: now + next, delay: next)
    }

    mutating func reconnected(now: Double) {
        database = .up
        claimWanted = true
        promoteWanted = true
        nextMaintenance = now
    }

    private mutating func learnDue(_ time: Double) {
        nextDue = min(nextDue ?? time, time)
    }
}
