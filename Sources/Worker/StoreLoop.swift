import Foundation
import Postgres
import Queue

/// The store thread: claims batches while the sender has room, records outcomes in batches,
/// listens for herald_jobs notifications (and polls, so a lost one only delays), and — in the
/// one process that holds the maintenance lock — takes back expired leases and purges finished
/// jobs past their retention.
final class StoreLoop {
    let configuration: WorkerConfiguration
    var connection: PGConnection
    var store: JobStore
    let inbox: Mailbox<ClaimedJob>
    let outbox: Mailbox<JobOutcome>
    let sender: Sender
    let stop: Flag
    let log: Logger
    private(set) var recorded = 0
    /// When this process became the maintenance leader (nil: it is not).
    private var leaderSince: Double?
    /// The attempt of every job handed to the sender and not yet recorded.
    private var attempts: [Int: Int] = [:]
    /// When each of those was claimed (or its lease last extended).
    private var leasedAt: [Int: Double] = [:]
    /// Outcomes since the last activity line in the log.
    private var window = Window()
    private var windowStart = Date().timeIntervalSince1970
    private struct Window { var delivered = 0; var retried = 0; var dead = 0; var discarded = 0 }

    init(configuration: WorkerConfiguration, connection: PGConnection, inbox: Mailbox<ClaimedJob>,
         outbox: Mailbox<JobOutcome>, sender: Sender, stop: Flag, log: Logger, projectID: String) {
        self.configuration = configuration
        self.connection = connection
        self.store = JobStore(connection: connection, retention: configuration.retentionSeconds, projectID: projectID)
        self.inbox = inbox
        self.outbox = outbox
        self.sender = sender
        self.stop = stop
        self.log = log
    }

    func run() -> Int32 {
        var pending: [JobOutcome] = []
        var outstanding = 0
        var lastMaintenance = 0.0
        var databaseDown = false
        var nextReconnect = 0.0
        var reconnectDelay = 0.5
        var stopSeenAt: Double? = nil
        var sharedPause = 0.0
        // Claim when told (NOTIFY), while claims keep finding work, and otherwise every poll interval.
        var notified = true
        var lastClaimFoundWork = true
        var lastEmptyClaim = 0.0
        listen()
        let batch = configuration.effectiveClaimBatch
        let threshold = max(1, min(batch, configuration.concurrency) / 4)

        while true {
            let arrived = outbox.take()
            outstanding -= arrived.count
            pending += arrived
            let now = Date().timeIntervalSince1970
            if stop.isSet {
                if stopSeenAt == nil { stopSeenAt = now }
                if sender.finished.isSet {
                    // Claimed while the stop came in, never seen by the sender: back, uncounted.
                    let unsent = inbox.take()
                    outstanding -= unsent.count
                    pending += unsent.map { JobOutcome.released(id: $0.id) }
                    if let seen = stopSeenAt, databaseDown, now > seen + configuration.shutdownTimeout {
                        log.error("PostgreSQL is still unavailable; exiting with \(pending.count) outcomes unrecorded (their jobs come back when their lease runs out)")
                        return 1
                    }
                }
            }

            if databaseDown {
                if now < nextReconnect {
                    _ = waitReadable(outbox.fileDescriptor, milliseconds: 100)
                    continue
                }
                do {
                    try connection.reconnect()
                    listen()
                    databaseDown = false
                    sender.metrics.databaseConnected(true)  // metrics hook
                    leaderSince = nil
                    reconnectDelay = 0.5
                    log.info("reconnected to PostgreSQL; \(pending.count) outcomes to record")
                } catch {
                    nextReconnect = now + reconnectDelay
                    reconnectDelay = min(reconnectDelay * 2, 10)
                    log.warning("PostgreSQL unavailable (\(error)); trying again in \(reconnectDelay) s")
                    continue
                }
            }

            do {
                if !pending.isEmpty {
                    try recordAll(pending)
                    pending.removeAll(keepingCapacity: true)
                }
                // A quota answer holds back every worker of the project, through the database.
                let pausedUntil = sender.pausedUntil
                if pausedUntil > sharedPause + 0.5 && pausedUntil > now, let project = store.projectID {
                    try store.pauseProject(project, seconds: pausedUntil - now, reason: "QUOTA_EXCEEDED answered to \(store.workerID)")
                    sharedPause = pausedUntil
                }
                if stop.isSet && sender.finished.isSet && outbox.count == 0 && inbox.count == 0 && outstanding <= 0 {
                    return 0
                }
                if now - windowStart >= 60 {
                    let w = window
                    if w.delivered + w.retried + w.dead + w.discarded > 0 {
                        log.info("last \(Int(now - windowStart)) s: \(w.delivered) delivered, \(w.retried) to retry, \(w.dead) dead-lettered, \(w.discarded) discarded; \(outstanding) in hand")
                    }
                    window = Window()
                    windowStart = now
                }
                if now - lastMaintenance >= max(0.5, min(configuration.leaseSeconds / 4, 15)) {
                    lastMaintenance = now
                    // Jobs held for a third of their lease (a slow FCM, a long token renewal) keep it.
                    let old = leasedAt.filter { now - $0.value >= configuration.leaseSeconds / 3 }.map(\.key)
                    if !old.isEmpty {
                        try store.extendLeases(ids: old, leaseSeconds: configuration.leaseSeconds)
                        for id in old { leasedAt[id] = now }
                    }
                    do {
                        try maintain(now: now)
                    } catch {
                        if !connection.isHealthy { throw error }
                        log.warning("maintenance failed: \(error)")
                    }
                }

                var claimedFull = false
                let capacity = configuration.concurrency - outstanding
                let due = notified || lastClaimFoundWork || now - lastEmptyClaim >= configuration.pollInterval
                if due && !stop.isSet && now >= sender.pausedUntil && (capacity >= threshold || (outstanding == 0 && capacity > 0)) {
                    let limit = min(capacity, batch)
                    notified = false
                    let jobs = try store.claim(queues: configuration.queues, limit: limit, leaseSeconds: configuration.leaseSeconds)
                    sender.metrics.claimed(jobs)  // metrics hook: the queue of each job, for herald_messages_total
                    lastClaimFoundWork = !jobs.isEmpty
                    if jobs.isEmpty { lastEmptyClaim = now }
                    if !jobs.isEmpty {
                        for job in jobs {
                            attempts[job.id] = job.attempt
                            leasedAt[job.id] = now
                        }
                        outstanding += jobs.count
                        inbox.put(jobs)
                        claimedFull = jobs.count == limit
                    } else if configuration.drain && outstanding == 0 && pending.isEmpty {
                        if try !store.hasPendingWork(queues: configuration.queues) {
                            log.info("drained: no available, scheduled or running job left")
                            stop.set()
                            inbox.signal()
                        }
                    }
                }

                if claimedFull && configuration.concurrency - outstanding >= threshold { continue }
                if waitForWork() { notified = true }
            } catch {
                log.warning("PostgreSQL error: \(error)")
                if !connection.isHealthy {
                    databaseDown = true
                    sender.metrics.databaseConnected(false)  // metrics hook
                    nextReconnect = now + reconnectDelay
                }
                else { _ = waitReadable(outbox.fileDescriptor, milliseconds: 200) }
            }
        }
    }

    /// Records a batch; the attempt each outcome belongs to guards against applying it to a
    /// later claim of the same job. When the batch fails on a healthy connection (one outcome
    /// the database refuses), records them one by one so one bad outcome cannot hold up the
    /// others, and turns a refused one into a plain retry.
    private func recordAll(_ outcomes: [JobOutcome]) throws(PostgresError) {
        do {
            note(try store.record(outcomes, attempts: attempts) { self.log.warning($0) }, outcomes)
        } catch {
            guard connection.isHealthy, outcomes.count > 1 || !isFallback(outcomes[0]) else { throw error }
            log.warning("recording \(outcomes.count) outcomes failed (\(error)); recording them one by one")
            for outcome in outcomes {
                do {
                    note(try store.record([outcome], attempts: attempts) { self.log.warning($0) }, [outcome])
                } catch {
                    guard connection.isHealthy else { throw error }
                    let fallback = JobOutcome.retry(id: outcome.id, error: "herald could not record this job's outcome (\(error.sqlState ?? "error")); sending it again", delay: 60)
                    do {
                        note(try store.record([fallback], attempts: attempts) { self.log.warning($0) }, [fallback])
                        log.error("job \(outcome.id): outcome refused by PostgreSQL (\(error)); retrying it in 60 s")
                    } catch {
                        guard connection.isHealthy else { throw error }
                        log.error("job \(outcome.id): cannot record any outcome (\(error)); it comes back when its lease runs out")
                    }
                }
            }
        }
        for outcome in outcomes {
            attempts[outcome.id] = nil
            leasedAt[outcome.id] = nil
        }
        recorded += outcomes.count
        for outcome in outcomes {
            switch outcome {
            case .completed: window.delivered += 1
            case .retry: window.retried += 1
            case .dead: window.dead += 1
            case .discarded, .pruned: window.discarded += 1
            case .released: break
            }
        }
    }

    private func isFallback(_ outcome: JobOutcome) -> Bool {
        if case .retry(_, let error, _) = outcome { return error.hasPrefix("herald could not record") }
        return false
    }

    /// After every successful `store.record(batch)`: `summary` is what PostgreSQL did with `batch`.
    private func note(_ summary: RecordSummary, _ batch: [JobOutcome]) {
        sender.metrics.recorded(batch, stale: summary.stale)  // metrics hook: herald_messages_total
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

    private func maintain(now: Double) throws(PostgresError) {
        if leaderSince == nil {
            if try store.tryMaintenanceLock() {
                leaderSince = now
            }
        }
        guard let since = leaderSince else { return }
        // A new leader (after a start, or a PostgreSQL outage that dropped the old one) waits one
        // lease before taking leases back, so workers that are reconnecting can record first.
        guard now - since >= configuration.leaseSeconds else { return }
        let rescued = try store.rescueExpiredLeases()
        if rescued > 0 { log.info("took back \(rescued) jobs whose lease ran out (their worker stopped)") }
        var purged = 0
        for _ in 0..<10 {
            let deleted = try store.deleteFinished(batch: 5_000)
            purged += deleted
            if deleted < 5_000 { break }
        }
        if purged > 0 { log.debug("purged \(purged) finished jobs past retention") }
    }

    /// Waits for an outcome, a notification, or a quarter second; returns whether a notification came.
    private func waitForWork() -> Bool {
        var descriptors = [pollfd(fd: outbox.fileDescriptor, events: Int16(POLLIN), revents: 0),
                           pollfd(fd: connection.socket, events: Int16(POLLIN), revents: 0)]
        let timeout = Int32(min(configuration.pollInterval, 0.25) * 1000)
        _ = poll(&descriptors, descriptors[1].fd >= 0 ? 2 : 1, timeout)
        if descriptors[1].revents != 0 { return !((try? connection.notifications()) ?? []).isEmpty }
        return false
    }
}
