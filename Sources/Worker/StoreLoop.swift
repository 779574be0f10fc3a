import Foundation
import Postgres
import Queue

/// The store thread: claims batches while the sender has room, records outcomes in batches,
/// listens for herald_jobs notifications (and polls, so a lost one only delays), and — in the
/// one process that holds the maintenance lock — takes back expired leases and purges finished
/// jobs past their retention.
final class StoreLoop {
    /// pg_try_advisory_lock key of the maintenance leader: "heraldm" in ASCII.
    static let maintenanceLockKey = 0x68_6572_616c_646d

    let configuration: WorkerConfiguration
    var connection: PGConnection
    var store: JobStore
    let inbox: Mailbox<ClaimedJob>
    let outbox: Mailbox<JobOutcome>
    let sender: Sender
    let stop: Flag
    let log: Logger
    private(set) var recorded = 0
    private var leader = false

    init(configuration: WorkerConfiguration, connection: PGConnection, inbox: Mailbox<ClaimedJob>,
         outbox: Mailbox<JobOutcome>, sender: Sender, stop: Flag, log: Logger) {
        self.configuration = configuration
        self.connection = connection
        self.store = JobStore(connection: connection, retention: configuration.retentionSeconds)
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

            if databaseDown {
                if now < nextReconnect {
                    if stop.isSet && sender.finished.isSet && now > nextReconnect + configuration.shutdownTimeout { return 1 }
                    _ = waitReadable(outbox.fileDescriptor, milliseconds: 100)
                    continue
                }
                do {
                    try connection.reconnect()
                    listen()
                    databaseDown = false
                    leader = false
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
                    let summary = try store.record(pending) { self.log.warning($0) }
                    if summary.stale > 0 {
                        log.warning("\(summary.stale) outcomes were for jobs whose lease had run out (another worker took them)")
                    }
                    recorded += pending.count
                    pending.removeAll(keepingCapacity: true)
                }
                if stop.isSet && sender.finished.isSet && outbox.count == 0 && outstanding <= 0 {
                    return 0
                }

                var claimedFull = false
                let capacity = configuration.concurrency - outstanding
                let due = notified || lastClaimFoundWork || now - lastEmptyClaim >= configuration.pollInterval
                if due && !stop.isSet && now >= sender.pausedUntil && (capacity >= threshold || (outstanding == 0 && capacity > 0)) {
                    let limit = min(capacity, batch)
                    notified = false
                    let jobs = try store.claim(queues: configuration.queues, limit: limit, leaseSeconds: configuration.leaseSeconds)
                    lastClaimFoundWork = !jobs.isEmpty
                    if jobs.isEmpty { lastEmptyClaim = now }
                    if !jobs.isEmpty {
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

                if now - lastMaintenance >= max(0.5, min(configuration.leaseSeconds / 4, 15)) {
                    lastMaintenance = now
                    try maintain()
                }

                if claimedFull && configuration.concurrency - outstanding >= threshold { continue }
                if waitForWork() { notified = true }
            } catch {
                log.warning("PostgreSQL error: \(error)")
                if !connection.isHealthy {
                    databaseDown = true
                    nextReconnect = now + reconnectDelay
                }
                else { _ = waitReadable(outbox.fileDescriptor, milliseconds: 200) }
            }
        }
    }

    private func listen() {
        do {
            try connection.listen("herald_jobs")
        } catch {
            log.warning("LISTEN herald_jobs failed (polling every \(configuration.pollInterval) s instead): \(error)")
        }
    }

    private func maintain() throws(PostgresError) {
        if !leader {
            leader = try connection.query("SELECT pg_try_advisory_lock($1)", [.int(Self.maintenanceLockKey)]).bool(0, 0) ?? false
        }
        guard leader else { return }
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
