import Foundation
import Postgres
import Queue

/// The roles one process of all the pools holds at a time: rows of herald.leaders (migration
/// 100) with an expiry the holder renews. A process cut off from PostgreSQL cannot renew, so its
/// lease runs out and another takes the role (River's leader table); a session-level lock would
/// stay held on the server for as long as the dead session looked alive.
enum LeaderRole: String, Sendable {
    /// The store thread's upkeep: `MaintenanceLeader.duties`.
    case maintenance
    /// VACUUM of herald.jobs, on a connection of its own: `JobsVacuum`.
    case vacuum
}

/// One process's claim on a role: takes or renews it, gives it up.
struct LeaderLease: Sendable {
    let role: LeaderRole
    /// This process's worker id (herald.leaders.leader_id).
    let workerID: String

    /// Takes the role, or renews it, for `seconds` by the database's clock. True when this
    /// process holds it now; false while another's lease runs.
    func take(on connection: PGConnection, seconds: Double) throws(PostgresError) -> Bool {
        try connection.query(MaintenanceSQL.takeLeadership, [.text(role.rawValue), .text(workerID), .double(seconds)]).rowCount == 1
    }

    /// Gives the role up if this process holds it (on a clean stop).
    func resign(on connection: PGConnection) throws(PostgresError) {
        try connection.query(MaintenanceSQL.resignLeadership, [.text(role.rawValue), .text(workerID)])
    }
}

/// The maintenance lease's decisions (pure, time passed in). A leader that has not renewed for
/// `ttl - margin` stops acting before its lease ends.
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

/// The upkeep one process of all the pools does, on the store thread's connection: the one that
/// holds the maintenance lease (the leader) renews it on every pass and, while it surely holds
/// it, runs its list of tasks in order, each when its interval has passed.
final class MaintenanceLeader {
    /// The duties, in the order a pass runs them. A new duty: one file in this folder, one line here.
    /// `deliveryData`: where FCM's Data API is and how to reach it (nil: no fetch, as in tests of the others).
    static func duties(retention: Double, interval: Double, batch: Int = 5_000,
                       deliveryData: (settings: DeliveryDataSettings, databaseURL: String, log: Logger)? = nil) -> [any MaintenanceTask] {
        let tasks: [(any MaintenanceTask)?] = [
            LeaseRescue(interval: interval),
            CampaignsEnd(interval: interval),
            Retention(retention: retention, batch: batch, interval: interval),
            // The audience's upkeep needs no grace: its first run comes with the leader's first
            // pass, seconds after a pool starts. It comes last, so a failure of it never holds
            // back taking leases back.
            AudienceRetention(batch: batch, interval: interval),
            TokenSendsSweep(interval: interval),
            TokenAging(batch: batch, interval: interval),
            deliveryData.map { DeliveryDataFetch(settings: $0.settings, databaseURL: $0.databaseURL, log: $0.log, interval: interval) },
        ]
        return tasks.compactMap { $0 }
    }

    let lease: LeaderLease
    private(set) var leadership: Leadership
    let tasks: [any MaintenanceTask]
    /// When each task's last run began (nil: never).
    private var lastRun: [Double?]
    let clock: () -> Double

    init(lease: LeaderLease, grace: Double, ttl: Double = 15, tasks: [any MaintenanceTask],
         clock: @escaping () -> Double = { Date().timeIntervalSince1970 }) {
        self.lease = lease
        leadership = Leadership(grace: grace, ttl: ttl)
        self.tasks = tasks
        lastRun = Array(repeating: nil, count: tasks.count)
        self.clock = clock
    }

    func connectionLost() { leadership.lost() }

    /// Renews (or tries to take) the lease, then, while it surely holds it, runs the tasks that
    /// are due. Returns what each task that ran did, in order.
    func run(on connection: PGConnection, now: Double) throws(PostgresError) -> [(task: String, result: MaintenanceResult)] {
        do {
            if try lease.take(on: connection, seconds: leadership.ttl) {
                leadership.acquired(now: now)
            } else {
                leadership.lost()
            }
        } catch {
            leadership.lost()
            throw error
        }
        var done: [(task: String, result: MaintenanceResult)] = []
        for (index, task) in tasks.enumerated() {
            guard leadership.isLeader, leadership.holds(now: clock()) else { break }
            if task.waitsForGrace, !leadership.mayRescue(now: now) { continue }
            if let last = lastRun[index], now - last < task.interval { continue }
            lastRun[index] = now
            let run = MaintenanceRun(connection: connection, now: now, clock: clock,
                                     stillLeads: { [unowned self] in leadership.holds(now: clock()) })
            done.append((task.name, try task.runOnce(run)))
        }
        return done
    }

    /// On a clean stop: hands the lease over at once rather than after it runs out.
    func resign(on connection: PGConnection) {
        guard leadership.isLeader else { return }
        try? lease.resign(on: connection)
        leadership.lost()
    }
}
