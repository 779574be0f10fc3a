import Foundation
import Postgres
import Queue

/// The upkeep one process of all the pools does: the one that holds the maintenance lease in
/// herald.leaders (the leader) takes back jobs whose lease ran out, marks campaigns with nothing
/// left to send finished, and deletes finished jobs past their retention, in batches.
///
/// The lease is a row with an expiry the leader renews on every pass, not a session's advisory
/// lock: a leader cut off from PostgreSQL by a silent network path cannot renew, so its lease
/// runs out and another process takes over, however long the server takes to notice the dead
/// session. A leader that has not renewed for `ttl - margin` stops acting before its lease ends.
///
/// `Leadership` holds the decisions (pure, time passed in); `Maintenance` runs them on a store.
struct Leadership: Sendable, Equatable {
    /// How long a new leader waits before taking leases back (one lease).
    let grace: Double
    /// The leader lease's length, and how long before its end an unrenewed leader stops acting.
    let ttl: Double
    let margin: Double
    /// When this process became the leader (nil: it is not, or does not know yet).
    private(set) var since: Double?
    /// When this process last renewed its lease (by its own clock, taken before the statement).
    private(set) var renewedAt: Double?

    init(grace: Double, ttl: Double = 15, margin: Double = 5) {
        self.grace = grace
        self.ttl = ttl
        self.margin = min(margin, ttl / 2)
    }

    var isLeader: Bool { since != nil }

    /// The lease was taken or renewed by a statement sent at `now`.
    mutating func acquired(now: Double) {
        if since == nil { since = now }
        renewedAt = now
    }

    /// Another process holds the lease, or renewing it failed (the connection is lost): step down.
    mutating func lost() {
        since = nil
        renewedAt = nil
    }

    /// Whether the lease is still surely this process's at `now`: renewed less than
    /// `ttl - margin` ago, so whatever the leader does now ends before its lease could.
    func holds(now: Double) -> Bool {
        guard let renewedAt else { return false }
        return now - renewedAt < ttl - margin
    }

    /// A new leader (after a start, a takeover, or a PostgreSQL outage) waits one lease before
    /// taking leases back, so workers that are reconnecting can record first.
    func mayRescue(now: Double) -> Bool {
        guard let since, holds(now: now) else { return false }
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
    /// Seconds between two rounds of upkeep; the lease is renewed at every pass, more often.
    let upkeepInterval: Double
    private var lastUpkeep: Double?
    private var lastAudience: Double?
    /// Where the audience upkeep's sweep of herald.token_sends has got to.
    private var tokenSendsSweep: TokenSendsSweep?
    let clock: () -> Double

    init(grace: Double, ttl: Double = 15, upkeepInterval: Double = 0, purgeBatch: Int = 5_000, purgeStatements: Int = 10,
         clock: @escaping () -> Double = { Date().timeIntervalSince1970 }) {
        leadership = Leadership(grace: grace, ttl: ttl)
        self.upkeepInterval = upkeepInterval
        self.purgeBatch = purgeBatch
        self.purgeStatements = purgeStatements
        self.clock = clock
    }

    func connectionLost() { leadership.lost() }

    /// Renews (or tries to take) the lease, then, while it surely holds it, does the upkeep.
    func run(_ store: JobStore, now: Double) throws(PostgresError) -> MaintenanceReport {
        var report = MaintenanceReport()
        do {
            if try store.takeLeadership(.maintenance, seconds: leadership.ttl) {
                leadership.acquired(now: now)
            } else {
                leadership.lost()
            }
        } catch {
            leadership.lost()
            throw error
        }
        if leadership.mayRescue(now: now), lastUpkeep.map({ now - $0 >= upkeepInterval }) ?? true {
            lastUpkeep = now
            report.rescued = try store.rescueExpiredLeases()
            if leadership.holds(now: clock()) {
                report.finishedCampaigns = try store.finishCampaigns()
                for _ in 0..<purgeStatements {
                    guard leadership.holds(now: clock()) else { break }
                    let deleted = try store.deleteFinished(batch: purgeBatch)
                    report.purged += deleted
                    if deleted < purgeBatch { break }
                }
            }
        }
        // The audience upkeep (token aging, dedupe keys, events) needs no grace: its first pass
        // comes with the leader's first maintenance, seconds after a pool starts, then once an
        // upkeep interval. It runs last, so a failure of it never holds back taking leases back.
        if leadership.isLeader, leadership.holds(now: clock()), lastAudience.map({ now - $0 >= upkeepInterval }) ?? true {
            lastAudience = now
            report.audience = try AudienceUpkeep.run(store, batch: purgeBatch, tokenSends: &tokenSendsSweep)
        }
        return report
    }

    /// On a clean stop: hands the lease over at once rather than after it runs out.
    func resign(_ store: JobStore) {
        guard leadership.isLeader else { return }
        try? store.resignLeadership(.maintenance)
        leadership.lost()
    }
}
