import Foundation
import Postgres

/// One duty of the upkeep a leader does for all the pools (River's maintenance services): a
/// name, how often it runs at most, and one run on the leader's connection. The leaders
/// (`MaintenanceLeader`, `JobsVacuum`) hold the lease and decide when a task is due; a task only
/// does its statements and says what it did.
///
/// A new duty is one file in Sources/Worker/Maintenance with a type conforming to this, and one
/// line in `MaintenanceLeader.duties` (or in `JobsVacuum`'s list for work that must not hold up
/// the store thread's connection).
protocol MaintenanceTask: AnyObject {
    /// The duty's name, as logs and docs say it.
    var name: String { get }
    /// Seconds between two runs at least; a leader's pass runs the task when this much has
    /// passed since its last run began (0: on every pass).
    var interval: Double { get }
    /// Whether a new leader waits its grace (one lease) before running it: what takes jobs back
    /// or deletes them waits, so workers that are reconnecting can record first.
    var waitsForGrace: Bool { get }
    /// Runs the duty once. A throw ends the leader's pass (the tasks after it wait for the next).
    func runOnce(_ run: MaintenanceRun) throws(PostgresError) -> MaintenanceResult
}

/// What a task is given for one run.
struct MaintenanceRun {
    let connection: PGConnection
    /// When the leader's pass began, by its clock.
    let now: Double
    /// The leader's clock (seconds since 1970).
    let clock: () -> Double
    /// Whether the lease is still surely this leader's now: a task of several statements asks
    /// before each, so none starts after the lease could have run out.
    let stillLeads: () -> Bool

    init(connection: PGConnection, now: Double? = nil, clock: @escaping () -> Double = { Date().timeIntervalSince1970 },
         stillLeads: @escaping () -> Bool = { true }) {
        self.connection = connection
        self.now = now ?? clock()
        self.clock = clock
        self.stillLeads = stillLeads
    }
}

/// What one run of a task did: counts for the log and metrics, and the line it is worth in the
/// log, if any.
public struct MaintenanceResult: Sendable, Equatable {
    /// Rows taken back, deleted or marked, by what they are ("rescued": 3); empty: nothing done.
    public var counts: [String: Int]
    /// The line for the log, with its level (nil: nothing worth one).
    public var note: Note?
    /// The task may never run under this role (a role that may not VACUUM): its leader stops.
    public var refused: Bool

    public struct Note: Sendable, Equatable {
        public var level: Logger.Level
        public var text: String
    }

    init(counts: [String: Int] = [:], note: Note? = nil, refused: Bool = false) {
        self.counts = counts
        self.note = note
        self.refused = refused
    }

    /// A count by its name (0 when the task did not count it).
    public subscript(_ name: String) -> Int { counts[name] ?? 0 }
}

extension Logger {
    /// Writes a task's note, if it has one.
    func log(_ result: MaintenanceResult) {
        if let note = result.note { log(note.level, note.text) }
    }
}
