import Postgres
import Queue

/// The upkeep one process of all the pools does: the one whose connection holds the maintenance
/// advisory lock (the leader) takes back jobs whose lease ran out, marks campaigns with nothing
/// left to send finished, and deletes finished jobs past their retention, in batches.
///
/// `Leadership` holds the decisions (pure, time passed in); `Maintenance` runs them on a store.
struct Leadership: Sendable, Equatable {
    /// How long a new leader waits before taking leases back (one lease).
    let grace: Double
    /// When this process became the leader (nil: it is not, or does not know yet).
    private(set) var since: Double?

    init(grace: Double) { self.grace = grace }

    var isLeader: Bool { since != nil }

    mutating func acquired(now: Double) {
        if since == nil { since = now }
    }

    /// The lock lives with the connection: a lost connection loses it.
    mutating func lost() { since = nil }

    /// A new leader (after a start, or a PostgreSQL outage that dropped the old one) waits one
    /// lease before taking leases back, so workers that are reconnecting can record first.
    func mayRescue(now: Double) -> Bool {
        guard let since else { return false }
        return now - since >= grace
    }
}

/// What one maintenance pass did.
struct MaintenanceReport: Sendable, Equatable {
    var rescued = 0
    var purged = 0
    var finishedCampaigns = 0
    var audience = AudienceUpkeep.Report()
}

final class Maintenance {
    private(set) var leadership: Leadership
    /// Finished jobs deleted per statement, and statements per pass at most.
    let purgeBatch: Int
    let purgeStatements: Int

    init(grace: Double, purgeBatch: Int = 5_000, purgeStatements: Int = 10) {
        leadership = Leadership(grace: grace)
        self.purgeBatch = purgeBatch
        self.purgeStatements = purgeStatements
    }

    func connectionLost() { leadership.lost() }

    func run(_ store: JobStore, now: Double) throws(PostgresError) -> MaintenanceReport {
        var report = MaintenanceReport()
        if !leadership.isLeader, try store.tryMaintenanceLock() {
            leadership.acquired(now: now)
        }
        // The audience upkeep (token aging, dedupe keys, events) needs no grace: its first pass
        // comes with the leader's first maintenance, seconds after a pool starts; after the
        // grace it runs last, so a failure of it never holds back taking leases back.
        guard leadership.mayRescue(now: now) else {
            if leadership.isLeader { report.audience = try AudienceUpkeep.run(store, batch: purgeBatch) }
            return report
        }
        report.rescued = try store.rescueExpiredLeases()
        report.finishedCampaigns = try store.finishCampaigns()
        for _ in 0..<purgeStatements {
            let deleted = try store.deleteFinished(batch: purgeBatch)
            report.purged += deleted
            if deleted < purgeBatch { break }
        }
        report.audience = try AudienceUpkeep.run(store, batch: purgeBatch)
        return report
    }
}
