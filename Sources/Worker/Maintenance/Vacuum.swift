import Foundation
import Postgres
import Queue

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

/// Looks at herald.jobs' statistics and VACUUMs it when `JobsVacuumPolicy` says so. A role that
/// may not VACUUM herald.jobs (it does not own it) is refused: its leader stops, leaving the
/// table to autovacuum.
final class Vacuum: MaintenanceTask {
    let name = "vacuum"
    /// Seconds between two looks at the table's statistics.
    let interval: Double
    let waitsForGrace = false
    let policy: JobsVacuumPolicy
    /// The last pass's length and end (seconds since 1970).
    private var lastPass: (seconds: Double, ended: Double)?

    init(policy: JobsVacuumPolicy = JobsVacuumPolicy(), interval: Double = 1) {
        self.policy = policy
        self.interval = interval
    }

    func runOnce(_ run: MaintenanceRun) throws(PostgresError) -> MaintenanceResult {
        let counts = try run.connection.query(MaintenanceSQL.jobsRowCounts)
        let live = counts.int(0, try counts.column("live")) ?? 0, dead = counts.int(0, try counts.column("dead")) ?? 0
        guard counts.bool(0, try counts.column("may_vacuum")) ?? false else {
            return MaintenanceResult(note: .init(level: .info, text: "this role does not own herald.jobs, so workers leave its VACUUM to autovacuum; claims slow down while dead rows pile up between its runs (see docs/operations.md, Vacuum of herald.jobs)"),
                                     refused: true)
        }
        let now = run.clock()
        guard policy.shouldVacuum(deadRows: dead, lastPass: lastPass.map { ($0.seconds, now - $0.ended) }) else { return MaintenanceResult() }
        try run.connection.execute(MaintenanceSQL.vacuumJobs)  // not inside a transaction
        let ended = run.clock()
        lastPass = (ended - now, ended)
        return MaintenanceResult(counts: ["dead_rows": dead, "live_rows": live],
                                 note: .init(level: .debug, text: "vacuumed herald.jobs (\(dead) dead row versions, \(live) live) in \(String(format: "%.2f", ended - now)) s"))
    }
}
