import Foundation
import Lifecycle
import Postgres
import Queue

/// The leader of the vacuum role: a thread that runs its tasks (`Vacuum`) on a connection of its
/// own, so that claims and records never wait behind a VACUUM. Every worker process runs one;
/// only the one that holds the vacuum lease (a row of herald.leaders it renews every quarter of
/// its length, so a process cut off from PostgreSQL loses it) keeps its connection and does the
/// work, so the pools vacuum once, not once per process. A task refused to this role (one that
/// may not VACUUM herald.jobs) is reported once and the thread stops.
///
/// A `Service`: `run()` runs the tasks until `beginShutdown()`, which takes effect after the
/// statement in progress, if any.
public final class JobsVacuum: Service, @unchecked Sendable {
    public enum Event: Sendable {
        /// What a task's run did (its note is the line for the log).
        case ran(MaintenanceResult)
        /// The first failure of a series (later ones are not reported until a check succeeds).
        case failed(PostgresError)
    }

    let databaseURL: String
    /// The tasks this leader runs, in order, on every pass.
    let tasks: [any MaintenanceTask]
    /// Seconds between two passes (the tasks' interval: the pace of the look at the statistics).
    let interval: Double
    /// Seconds a process that does not hold the lease waits before trying to take it again.
    let lockRetryInterval: Double
    /// The vacuum lease's length: longer than most passes, so another process rarely starts a
    /// VACUUM that would only wait behind the running one.
    let leaseSeconds: Double
    let report: @Sendable (Event) -> Void
    private let lock = NSLock()
    private var stopped = false

    public init(databaseURL: String, policy: JobsVacuumPolicy = JobsVacuumPolicy(), interval: Double = 1,
                lockRetryInterval: Double = 30, leaseSeconds: Double = 60, report: @escaping @Sendable (Event) -> Void) {
        self.leaseSeconds = leaseSeconds
        self.databaseURL = databaseURL
        self.tasks = [Vacuum(policy: policy, interval: interval)]
        self.interval = interval
        self.lockRetryInterval = lockRetryInterval
        self.report = report
    }

    public var name: String { "vacuum" }

    /// Asks the loop to stop; it does so after the statement it is running, if any.
    public func beginShutdown() {
        lock.lock(); stopped = true; lock.unlock()
        wake.signal()
    }

    /// Wakes the pause between two passes when a shutdown is asked for.
    private let wake = DispatchSemaphore(value: 0)

    private var isStopped: Bool { lock.lock(); defer { lock.unlock() }; return stopped }

    public func run() {
        var connection: PGConnection?
        // Each connection takes the lease under a worker id of its own: a connection lost on a
        // silent path may still be running a VACUUM on the server, and a new one waits until that
        // session ends or its lease runs out rather than start a second one behind it.
        var lease = LeaderLease(role: .vacuum, workerID: JobStore.defaultWorkerID())
        var nextLockAttempt = 0.0
        var renewedAt = 0.0
        var failing = false
        while !isStopped {
            let now = Date().timeIntervalSince1970
            do {
                if connection == nil, now >= nextLockAttempt {
                    // Only the lease holder keeps a connection; the others look again later, so
                    // the pools hold one connection for this, not one per process.
                    let candidate = try PGConnection(url: databaseURL)
                    lease = LeaderLease(role: .vacuum, workerID: JobStore.defaultWorkerID())
                    if try lease.take(on: candidate, seconds: leaseSeconds) {
                        connection = candidate
                        renewedAt = now
                    } else {
                        nextLockAttempt = now + lockRetryInterval
                    }
                } else if let holder = connection, now - renewedAt >= leaseSeconds / 4 {
                    if try lease.take(on: holder, seconds: leaseSeconds) {
                        renewedAt = now
                    } else {
                        connection = nil
                        nextLockAttempt = now + lockRetryInterval
                    }
                }
                if let connection {
                    for task in tasks {
                        let result = try task.runOnce(MaintenanceRun(connection: connection, now: now))
                        if result.note != nil || result.refused { report(.ran(result)) }
                        if result.refused {
                            try? lease.resign(on: connection)
                            return
                        }
                    }
                }
                failing = false
            } catch {
                if !failing { report(.failed(error)) }
                failing = true
                if connection?.isHealthy == false { connection = nil }
                nextLockAttempt = now + interval * 5
            }
            _ = wake.wait(timeout: .now() + interval)  // the pace of the passes; a shutdown ends it
        }
        if let connection { try? lease.resign(on: connection) }
    }
}
