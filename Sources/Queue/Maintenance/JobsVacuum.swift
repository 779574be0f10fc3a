import Foundation
import Lifecycle
import Postgres

/// When herald.jobs is worth a VACUUM: pure, so unit tests drive it with made-up figures.
///
/// A claim moves jobs out of the claim index's partial predicate (`state = 'available'`), but
/// their entries stay in the index, at its front, until a VACUUM removes them, and every claim
/// (and every look for the next queue and campaign) starts there and steps over them. Between two
/// autovacuum runs (one a minute per database at most, `autovacuum_naptime`) a drain of a large
/// backlog piles up hundreds of thousands of them: a claim of 256 jobs then reads thousands of
/// index pages. A VACUUM costs about a pass over the table's indexes, which grow with the table,
/// so it is worth running when the dead rows reach a share of the table, and a minimum.
public struct JobsVacuumPolicy: Sendable, Equatable {
    /// Dead row versions below which a VACUUM is never worth it.
    public var minimumDeadRows: Int
    /// The largest share of the time the passes may take: after a pass of d seconds the next one
    /// waits at least d × (1 / share - 1). The dead entries claims step over are as many on a
    /// large table as on a small one, but a pass over a large table's indexes takes longer, so
    /// passes there come less often, in proportion to what they cost.
    public var busyShare: Double

    public init(minimumDeadRows: Int = 100_000, busyShare: Double = 0.2) {
        self.minimumDeadRows = minimumDeadRows
        self.busyShare = min(1, max(0.01, busyShare))
    }

    /// `lastPass`: how long the previous pass took and how long ago it ended (nil: none yet).
    public func shouldVacuum(deadRows: Int, lastPass: (seconds: Double, endedAgo: Double)?) -> Bool {
        guard deadRows >= minimumDeadRows else { return false }
        guard let lastPass else { return true }
        return lastPass.endedAgo >= lastPass.seconds * (1 / busyShare - 1)
    }
}

/// A thread that VACUUMs herald.jobs when `JobsVacuumPolicy` says so, on a connection of its own
/// so that claims and records never wait behind it. Every worker process runs one; only the one
/// that holds the vacuum lease (a row of herald.leaders it renews every quarter of its length, so
/// a process cut off from PostgreSQL loses it) keeps its connection and does the work, so the pools vacuum
/// once, not once per process. A role that may not VACUUM herald.jobs (it does
/// not own it) reports it once and stops, leaving the table to autovacuum.
///
/// A `Service`: `run()` looks and vacuums until `beginShutdown()`, which takes effect after the
/// statement in progress, if any.
public final class JobsVacuum: Service, @unchecked Sendable {
    public enum Event: Sendable {
        case vacuumed(deadRows: Int, liveRows: Int, seconds: Double)
        /// The first failure of a series (later ones are not reported until a check succeeds).
        case failed(PostgresError)
        case notAllowed
    }

    let databaseURL: String
    let policy: JobsVacuumPolicy
    /// Seconds between two looks at the table's statistics.
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
        self.policy = policy
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

    /// Wakes the pause between two looks when a shutdown is asked for.
    private let wake = DispatchSemaphore(value: 0)

    /// The last pass's length and end (seconds since 1970); touched by the vacuum thread only.
    private var lastPass: (seconds: Double, ended: Double)?

    private var isStopped: Bool { lock.lock(); defer { lock.unlock() }; return stopped }

    public func run() {
        var store: JobStore?
        var nextLockAttempt = 0.0
        var renewedAt = 0.0
        var failing = false
        while !isStopped {
            let now = Date().timeIntervalSince1970
            do {
                if store == nil, now >= nextLockAttempt {
                    // Only the lease holder keeps a connection; the others look again later, so
                    // the pools hold one connection for this, not one per process.
                    let candidate = JobStore(connection: try PGConnection(url: databaseURL))
                    if try candidate.takeLeadership(.vacuum, seconds: leaseSeconds) {
                        store = candidate
                        renewedAt = now
                    } else {
                        nextLockAttempt = now + lockRetryInterval
                    }
                } else if let holder = store, now - renewedAt >= leaseSeconds / 4 {
                    if try holder.takeLeadership(.vacuum, seconds: leaseSeconds) {
                        renewedAt = now
                    } else {
                        store = nil
                        nextLockAttempt = now + lockRetryInterval
                    }
                }
                if let store, try !vacuumIfDue(store) {
                    try? store.resignLeadership(.vacuum)
                    return
                }
                failing = false
            } catch {
                if !failing { report(.failed(error)) }
                failing = true
                if store?.connection.isHealthy == false { store = nil }
                nextLockAttempt = now + interval * 5
            }
            _ = wake.wait(timeout: .now() + interval)  // the pace of the look at the statistics; a shutdown ends it
        }
        try? store?.resignLeadership(.vacuum)
    }

    /// Vacuums when the policy says so. Returns false when this role may not vacuum herald.jobs.
    private func vacuumIfDue(_ store: JobStore) throws(PostgresError) -> Bool {
        let rows = try store.jobsRowCounts()
        guard rows.mayVacuum else {
            report(.notAllowed)
            return false
        }
        let now = Date().timeIntervalSince1970
        guard policy.shouldVacuum(deadRows: rows.dead, lastPass: lastPass.map { ($0.seconds, now - $0.ended) }) else { return true }
        try store.vacuumJobs()
        let ended = Date().timeIntervalSince1970
        lastPass = (ended - now, ended)
        report(.vacuumed(deadRows: rows.dead, liveRows: rows.live, seconds: ended - now))
        return true
    }
}

// The vacuum's statements: herald.jobs' row counts and the VACUUM itself (its lease is a Role).
extension JobStore {
    /// herald.jobs' live and dead row versions from PostgreSQL's statistics, and whether this
    /// role may VACUUM it.
    public func jobsRowCounts() throws(PostgresError) -> (live: Int, dead: Int, mayVacuum: Bool) {
        let result = try connection.query(SQL.jobsRowCounts)
        return (result.int(0, try result.column("live")) ?? 0, result.int(0, try result.column("dead")) ?? 0,
                result.bool(0, try result.column("may_vacuum")) ?? false)
    }

    /// VACUUMs herald.jobs (not inside a transaction).
    public func vacuumJobs() throws(PostgresError) {
        try connection.execute(SQL.vacuumJobs)
    }
}
