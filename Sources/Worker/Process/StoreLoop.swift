import Foundation
import Metrics
import Postgres
import Queue

/// The store thread: carries out what `StoreMachine` decides, on one PostgreSQL connection.
/// It claims batches for the sender, records the outcomes the sender hands back, promotes due
/// scheduled jobs, LISTENs for `herald_jobs`, extends leases, and (in the leader) runs
/// maintenance. Every decision is the machine's; this type only performs and reports.
final class StoreLoop: @unchecked Sendable {
    let configuration: WorkerConfiguration
    let connection: PGConnection
    let store: JobStore
    let inbox: Mailbox<ClaimedJob>
    let outbox: Mailbox<SenderEvent>
    let stop: Flag
    let log: Logger
    /// The pool's counters (herald_messages_total) and this worker's readiness.
    let metrics: WorkerMetrics
    /// The leader's upkeep (Maintenance/): it runs only while this process holds the lease.
    let maintenance: MaintenanceLeader
    /// The lease ends the sender checks before it sends a job.
    let leaseBook: LeaseBook
    private(set) var machine: StoreMachine
    private(set) var recorded = 0
    private var activity = ActivityWindow()
    /// What the drain's last check found waiting beyond its horizon, for its last word.
    private var drainedLeaving: Claimer.PendingWork?
    /// The FCM project's adapted rate (`--max-rate` the ceiling) and its shared state as last read.
    private let adaptive: AdaptiveRate
    private var rateState = AdaptiveRate.State()
    private var rateReadAt = 0.0
    /// When this process started sending (the rate's start before any quota answer).
    private let startedAt = StoreLoop.clock()
    /// A worker carrying several projects: each one's claim target, keys and rotation (nil: the
    /// one project of `configuration.project`, or the jobs of no project).
    let projects: StoreProjects?
    /// Pauses and quota answers of the projects (`.forProject`) waiting for the outcomes handed
    /// before them to be recorded.
    private var projectEvents: [(String?, SenderEvent)] = []

    init(configuration: WorkerConfiguration, connection: PGConnection, inbox: Mailbox<ClaimedJob>,
         outbox: Mailbox<SenderEvent>, stop: Flag, log: Logger, metrics: WorkerMetrics, fcmProject: String, leaseBook: LeaseBook,
         projects: StoreProjects? = nil) {
        self.projects = projects
        self.leaseBook = leaseBook
        self.configuration = configuration
        self.connection = connection
        self.store = JobStore(connection: connection, retention: configuration.retentionSeconds, fcmProject: fcmProject)
        store.claimer.fcmProjectRate = configuration.maxRate
        store.claimer.project = configuration.project
        self.inbox = inbox
        self.outbox = outbox
        self.stop = stop
        self.log = log
        self.metrics = metrics
        adaptive = AdaptiveRate(ceiling: configuration.maxRate)
        let settings = StoreMachine.Settings(
            concurrency: configuration.concurrency, batch: configuration.effectiveClaimBatch,
            leaseSeconds: configuration.leaseSeconds, pollInterval: configuration.pollInterval,
            shutdownTimeout: configuration.shutdownTimeout, drain: configuration.drain)
        maintenance = MaintenanceLeader(lease: LeaderLease(role: .maintenance, workerID: store.workerID), grace: configuration.leaseSeconds,
                                        tasks: MaintenanceLeader.duties(retention: configuration.retentionSeconds, interval: settings.upkeepInterval,
                                                                        deliveryData: (configuration.deliveryData, configuration.databaseURL, log)))
        machine = StoreMachine(settings: settings, now: Self.clock())
    }

    static func clock() -> Double { Date().timeIntervalSince1970 }

    /// Runs until the machine exits; returns the process exit status (`run()`, in
    /// WorkerServices.swift, is its `Service` shape).
    func runUntilExit() -> Int32 {
        listen()
        while true {
            takeEvents()
            let now = Self.clock()
            if stop.isSet { machine.stopRequested(now: now) }
            let action = machine.next(now: now)
            if case .exit(let status) = action {
                if connection.isHealthy { maintenance.resign(on: connection) }
                if status != 0 {
                    log.error("PostgreSQL is still unavailable; exiting with \(machine.pending.count) outcomes unrecorded (their jobs come back when their lease runs out)")
                }
                return status
            }
            perform(action, now: now)
            handleProjectEvents()
            // A NOTIFY that came in with a statement's answer: a backlog's claims go on without
            // waiting, so the wait below would never see it.
            heard(connection.bufferedNotifications())
        }
    }

    /// NOTIFYs of herald_jobs: claim now, and (carrying many projects) for the projects named first.
    private func heard(_ notifications: [PGNotification]) {
        guard !notifications.isEmpty else { return }
        machine.notified(now: Self.clock())
        // Which projects the inserts were for: a worker carrying many claims for them first.
        projects?.notified(notifications.map(\.payload))
        // A worker of one registry project read its entry at start: a correction of it (or a
        // resume after one) stops this worker gracefully, and its supervisor starts it again
        // with the entry as it is now.
        if projects == nil, !configuration.drain, let own = configuration.project,
           notifications.contains(where: { $0.payload == StoreProjects.registryPayload + own }) {
            log.info("project \(own): its registry entry changed or it was resumed; this worker stops to start again with the entry as it is now")
            stop.set()
        }
    }

    /// Hands what the sender sent to the machine; once the sender has finished, the jobs it never
    /// took go back unsent.
    private func takeEvents() {
        var events = outbox.take()
        guard !events.isEmpty else { return }
        let now = Self.clock()
        if projects != nil {
            // One project's pause or quota answer: that project's alone, once the outcomes handed
            // with or before it are recorded (`handleProjectEvents`).
            events.removeAll { event in
                guard case .forProject(let project, let inner) = event else { return false }
                if case .apnsAppRefused(let reason) = inner, let project {
                    projects?.apnsAppRefused(project, reason: reason, connection: connection, workerID: store.workerID)
                    return true
                }
                projectEvents.append((project, inner))
                return true
            }
        }
        machine.received(events, now: now)
        if events.contains(.finished) { machine.unsent(inbox.take()) }
        handleProjectEvents()
    }

    /// The projects' pauses and quota answers from the sender, handled once no outcome handed
    /// before them waits to be recorded. A pause spreads the project's retries already in the
    /// database over the window after it (spread_held_retries.sql); the sender spreads those it
    /// hands once it knows the pause. A retry the sender handed just before it learnt the pause,
    /// still unrecorded (its job 'running' in the database), would escape both and come back
    /// with every other one at the pause's end: a burst of a hundred retries within 25 ms on a
    /// loaded machine. The machine records pending outcomes before it claims, so no claim goes
    /// out for a project while its pause waits here.
    private func handleProjectEvents() {
        guard let projects, !projectEvents.isEmpty, machine.pending.isEmpty else { return }
        let events = projectEvents
        projectEvents.removeAll()
        let now = Self.clock()
        for (project, event) in events {
            do {
                try projects.handle(project, event, rates: store.fcmProjectRates, workerID: store.workerID, now: now)
            } catch {
                log.warning("PostgreSQL error while holding back \(ProjectKeys.label(project)): \(error)")
            }
        }
    }

    private func perform(_ action: StoreMachine.Action, now: Double) {
        do {
            switch action {
            case .reconnect:
                do {
                    try connection.reconnect()
                    maintenance.connectionLost()
                    listen()
                    machine.reconnected(now: now)
                    metrics.databaseConnected(true)
                    log.info("reconnected to PostgreSQL; \(machine.pending.count) outcomes to record")
                } catch {
                    machine.reconnectFailed(now: now)
                    log.warning("PostgreSQL unavailable (\(error)); trying again")
                }
            case .record(let outcomes):
                let summary: RecordSummary
                do {
                    summary = try store.recorder.record(outcomes) { self.log.warning($0) }
                } catch {
                    guard connection.isHealthy else { throw error }
                    switch machine.recordRefused(outcomes, code: error.sqlState, now: now) {
                    case .oneByOne(let count):
                        log.warning("recording \(count) outcomes failed (\(error)); recording them one by one")
                    case .replaced(let refused, _):
                        log.error("job \(refused.id): outcome refused by PostgreSQL (\(error)); retrying it in \(Int(StoreMachine.standInDelay)) s")
                    case .givenUp(let refused):
                        log.error("job \(refused.id): cannot record any outcome (\(error)); it comes back when its lease runs out")
                    }
                    return
                }
                leaseBook.settled(outcomes.map(\.id))
                note(summary, outcomes)
                recorded += outcomes.count
                activity.count(outcomes)
                machine.recorded(count: outcomes.count)
                logActivity(now: now)
            case .publishProjectPause(let until):
                // A quota answer, or FCM unreachable, holds back every worker of the FCM project,
                // through the database.
                if let fcmProject = store.claimer.fcmProject {
                    try store.fcmProjectRates.hold(fcmProject, seconds: until - now, reason: "\(machine.projectPauseReason) answered to \(store.workerID)")
                    // What was held comes back over the jitter window after the pause, not at once.
                    let window = max(1, (until - now) * configuration.retryPolicy.jitter)
                    let spread = try store.fcmProjectRates.spreadHeldRetries(project: store.claimer.project, fcmProject: fcmProject,
                                                                             until: until, window: window)
                    if spread > 0 { log.info("\(spread) held retries spread over \(String(format: "%.1f", window)) s after the pause") }
                }
                machine.projectPausePublished(until: until)
            case .extendLeases(let ids):
                try store.claimer.extendLeases(ids: ids, leaseSeconds: configuration.leaseSeconds)
                leaseBook.held(ids, sentAt: now, leaseSeconds: configuration.leaseSeconds, onlyKnown: true)
                machine.leasesExtended(ids, now: now)
            case .maintain:
                do {
                    for done in try maintenance.run(on: connection, now: now) { log.log(done.result) }
                } catch {
                    if !connection.isHealthy { throw error }
                    log.warning("maintenance failed: \(error)")
                }
                machine.maintained(now: now)
            case .promote(let limit):
                machine.promoted(try store.claimer.promoteDueJobs(limit: limit), now: Self.clock())
            case .lowerRate(let accepted, let proven, let stated):
                if let stated {
                    try stateQuota(perSecond: stated, now: now)
                } else {
                    try lowerRate(accepted: accepted, proven: proven, now: now)
                }
                machine.rateLowered()
            case .holdQuotaWindow(let until, let seenAt):
                try quotaWindow(now: now) { (rates, fcmProject) throws(PostgresError) in
                    try rates.holdWindow(fcmProject, until: until, seenAt: seenAt, ceiling: adaptive.ceiling)
                }
                machine.quotaWindowWritten()
            case .endQuotaWindowHold(let seenAt):
                try quotaWindow(now: now) { (rates, fcmProject) throws(PostgresError) in try rates.endWindowHold(fcmProject, seenAt: seenAt) }
                machine.quotaWindowWritten()
            case .claim(let limit):
                let claim: Claim
                if let projects {
                    claim = try projects.claim(store, connection: connection, queues: configuration.queues, limit: limit,
                                               leaseSeconds: configuration.leaseSeconds, now: now)
                } else {
                    try refreshRate(now: now)
                    claim = try store.claimer.claimBatch(queues: configuration.queues, limit: limit, leaseSeconds: configuration.leaseSeconds)
                }
                let jobs = claim.jobs
                machine.claimed(jobs, limit: limit, heldBackFor: claim.heldBackFor, now: now)
                // Each job's queue, so its outcome is counted under it (herald_messages_total).
                metrics.claimed(jobs) { [projects] in projects?.isAPNsApp($0) ?? false }
                leaseBook.held(jobs.map(\.id), sentAt: now, leaseSeconds: configuration.leaseSeconds)
                inbox.put(jobs)
            case .checkDrained:
                let work = try projects?.pendingWork(store.claimer, connection: connection, queues: configuration.queues, horizon: configuration.drainHorizon)
                    ?? store.claimer.pendingWork(queues: configuration.queues, horizon: configuration.drainHorizon)
                drainedLeaving = work
                machine.drainChecked(workLeft: work.due, now: now)
            case .stopSender:
                log.info(Self.drainedMessage(drainedLeaving, horizon: configuration.drainHorizon))
                stop.set()
                inbox.signal()
                machine.senderStopRequested(now: now)
            case .wait(let until):
                waitForEvents(until: until)
            case .exit:
                break
            }
        } catch {
            log.warning("PostgreSQL error: \(error)")
            if connection.isHealthy {
                machine.statementFailed(now: now)
            } else {
                machine.connectionLost(now: now)
                metrics.databaseConnected(false)
            }
        }
    }

    /// Re-reads the FCM project's shared rate state once a second (another worker may have lowered
    /// it) and sets the rate in force for the claims.
    private func refreshRate(now: Double) throws(PostgresError) {
        guard let fcmProject = store.claimer.fcmProject, adaptive.ceiling > 0 else { return }
        if now - rateReadAt >= 1 {
            rateState = try store.fcmProjectRates.state(fcmProject).rate
            rateReadAt = now
        }
        let rate = adaptive.rate(rateState, now: now, started: startedAt)
        store.claimer.fcmProjectRate = rate
        metrics.fcmProjectRate(rate)
    }

    /// An FCM project quota answer: lowers its adapted rate for every worker of the FCM project,
    /// once per episode (another worker's lowering a moment ago counts).
    private func lowerRate(accepted: Double?, proven: Double?, now: Double) throws(PostgresError) {
        guard let fcmProject = store.claimer.fcmProject, adaptive.ceiling > 0 else { return }
        let state = try store.fcmProjectRates.state(fcmProject).rate
        rateState = state
        rateReadAt = now
        guard let target = adaptive.lowered(state, now: now, accepted: accepted ?? .infinity, proven: proven ?? 0, started: startedAt) else { return }
        if let lowered = try store.fcmProjectRates.lower(fcmProject, to: target, since: state.at, ceiling: adaptive.ceiling) {
            rateState = lowered
            let regain = lowered.regain.map { "; FCM refused most sends, so it climbs back to \(Int($0.rounded()))/s doubling each second" } ?? ""
            log.warning("FCM project \(fcmProject): send rate lowered to \(Int((lowered.adapted ?? 0).rounded()))/s after a quota answer (ceiling \(Int(adaptive.ceiling.rounded()))/s, --max-rate)\(regain); it rises again while FCM accepts")
        } else {
            rateReadAt = 0
        }
        store.claimer.fcmProjectRate = adaptive.rate(rateState, now: now, started: startedAt)
        metrics.fcmProjectRate(store.claimer.fcmProjectRate)
    }

    /// A quota answer that stated the FCM project's limit: the rate of every worker of it
    /// drops at once to the share of it paced at (`AdaptiveRate.stated`); nothing is written
    /// when that limit already binds.
    private func stateQuota(perSecond: Double, now: Double) throws(PostgresError) {
        guard let fcmProject = store.claimer.fcmProject, adaptive.ceiling > 0 else { return }
        let state = try store.fcmProjectRates.state(fcmProject).rate
        rateState = state
        rateReadAt = now
        if let target = adaptive.stated(state, perSecond: perSecond, now: now, started: startedAt),
           let set = try store.fcmProjectRates.stateQuota(fcmProject, to: target, ceiling: adaptive.ceiling) {
            rateState = set
            log.warning("FCM project \(fcmProject): its quota answer states \(Self.figure(perSecond))/s; every pool of the project now sends at most \(Self.figure(adaptive.rate(set, now: now, started: startedAt)))/s (\(Int((adaptive.pace * 100).rounded())) % of it; ceiling \(Int(adaptive.ceiling.rounded()))/s, --max-rate); the messages refused retry from a minute on")
        }
        store.claimer.fcmProjectRate = adaptive.rate(rateState, now: now, started: startedAt)
        metrics.fcmProjectRate(store.claimer.fcmProjectRate)
    }

    /// Writes the FCM project's quota window hold (or its end) with `write` for every worker of
    /// the project, and sets the rate in force from what it returns (nil: an answer to a later
    /// send came first; the state is read again at the next claim).
    private func quotaWindow(now: Double, _ write: (FCMProjectRates, String) throws(PostgresError) -> AdaptiveRate.State?) throws(PostgresError) {
        guard let fcmProject = store.claimer.fcmProject, adaptive.ceiling > 0 else { return }
        if let state = try write(store.fcmProjectRates, fcmProject) {
            rateState = state
            rateReadAt = now
        } else {
            rateReadAt = 0
        }
        store.claimer.fcmProjectRate = adaptive.rate(rateState, now: now, started: startedAt)
        metrics.fcmProjectRate(store.claimer.fcmProjectRate)
    }

    static func figure(_ rate: Double) -> String {
        rate >= 10 ? String(Int(rate.rounded())) : String(format: "%.2f", rate)
    }

    /// After every recorded batch: counts it for the pool's metrics, and says when outcomes came
    /// too late (another worker had taken their jobs).
    private func note(_ summary: RecordSummary, _ batch: [JobOutcome]) {
        metrics.recorded(batch, stale: summary.stale)
        if summary.stale > 0 {
            log.warning("\(summary.stale) outcomes were for jobs whose lease had run out (another worker took them)")
        }
    }

    private func listen() {
        do {
            try connection.listen("herald_jobs")
        } catch {
            log.warning("LISTEN herald_jobs failed (polling every \(configuration.pollInterval) s instead): \(error)")
        }
    }

    /// A line a minute while there is work: what was delivered, retried, dead-lettered, discarded.
    private func logActivity(now: Double) {
        guard let line = activity.line(now: now, inHand: machine.outstanding) else { return }
        log.info(line)
    }

    /// Waits for the sender's events or a notification, until `until` at the latest (and at most
    /// a quarter second, so a stop request is seen promptly).
    private func waitForEvents(until: Double) {
        let milliseconds = Int32(max(0, min(250, ((until - Self.clock()) * 1000).rounded(.up))))
        guard milliseconds > 0 else { return }
        var descriptors = [pollfd(fd: outbox.fileDescriptor, events: Int16(POLLIN), revents: 0),
                           pollfd(fd: connection.socket, events: Int16(POLLIN), revents: 0)]
        let count = descriptors[1].fd >= 0 ? 2 : 1
        _ = poll(&descriptors, nfds_t(count), milliseconds)
        if count == 2 && descriptors[1].revents != 0 {
            do {
                heard(try connection.notifications())
            } catch {
                log.warning("PostgreSQL error: \(error)")
                machine.connectionLost(now: Self.clock())
                metrics.databaseConnected(false)
            }
        }
    }
}

/// Outcomes counted for the activity line the store thread logs once a minute, by their word.
extension StoreLoop {
    /// The log line of a finished drain: what it leaves for later, and when that is due.
    static func drainedMessage(_ work: Claimer.PendingWork?, horizon: Double) -> String {
        let within = horizon > 0 ? " or due within \(span(horizon))" : ""
        // Jobs a pause holds back are not the drain's to wait for; it says whose they are.
        let paused = work.map { $0.paused.isEmpty ? "" : "; due jobs of paused \($0.paused.prefix(10).joined(separator: ", "))\($0.paused.count > 10 ? " and \($0.paused.count - 10) more" : "") wait (herald stats says why; resume them to send)" } ?? ""
        guard let work, work.later > 0 else {
            return "drained: no job available, running\(within) left\(paused)"
        }
        let next = work.nextDueIn.map { " (the next in \(span(max(0, $0))))" } ?? ""
        return "drained: no job available, running\(within); \(work.later) scheduled job\(work.later == 1 ? "" : "s") wait for later\(next), for a pool that keeps running\(paused)"
    }

    /// "45s", "3m20s", "14h02m", "2d03h".
    static func span(_ seconds: Double) -> String { durationText(seconds) }
}

struct ActivityWindow {
    var counts = [Int](repeating: 0, count: MessageOutcome.allCases.count)
    var start = Date().timeIntervalSince1970

    mutating func count(_ outcomes: [JobOutcome]) {
        for outcome in outcomes { counts[outcome.action.outcome.index] += 1 }
    }

    /// The line to log when a minute has passed and something happened (`released` jobs, put back
    /// unsent, do not count as something); resets the window.
    mutating func line(now: Double, inHand: Int) -> String? {
        guard now - start >= 60 else { return nil }
        defer { self = ActivityWindow(start: now) }
        let shown = MessageOutcome.allCases.filter { $0 != .released }
        guard shown.contains(where: { counts[$0.index] > 0 }) else { return nil }
        let parts = shown.map { "\(counts[$0.index]) \($0.rawValue)" }.joined(separator: ", ")
        return "last \(Int(now - start)) s: \(parts); \(inHand) in hand"
    }
}
