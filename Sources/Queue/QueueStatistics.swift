import Foundation
import Postgres
import Synchronization

/// Jobs per queue and state, the age of each queue's oldest available job and its dead letters:
/// what `herald stats`, the dashboard and its /metrics show.
public struct QueueSnapshot: Sendable {
    public struct Queue: Sendable, Equatable {
        public var name: String
        /// Jobs by state. `scheduled` also holds available jobs whose run_at is still ahead.
        public var states: [String: Int]
        /// Seconds the oldest due available job has waited since its run_at; nil with none due.
        /// Jobs a paused registry project holds back are left out (they wait for their project,
        /// not for the pools: `ProjectOverview.heldJobs` counts them).
        public var oldestAvailableAge: Double?
        public var deadLetters: Int
        public init(name: String, states: [String: Int] = [:], oldestAvailableAge: Double? = nil, deadLetters: Int = 0) {
            self.name = name
            self.states = states
            self.oldestAvailableAge = oldestAvailableAge
            self.deadLetters = deadLetters
        }
        public func count(_ state: String) -> Int { states[state] ?? 0 }
    }
    /// By queue name.
    public var queues: [Queue]
    /// States whose counts are estimates (a sample of a large table), not exact.
    public var estimatedStates: Set<String>
    /// Every state seen, known ones first in their life-cycle order.
    public var states: [String] {
        let seen = Set(queues.flatMap { $0.states.keys })
        let extra = seen.subtracting(QueueStatistics.knownStates).sorted()
        return QueueStatistics.knownStates + extra
    }
}

/// Finished work per minute over the last hour (completed, discarded, cancelled, dead), oldest first.
public struct Throughput: Sendable {
    public struct Minute: Sendable, Equatable {
        /// Start of the minute, seconds since 1970.
        public var start: Int
        public var completed: Int
        /// Finished without being sent: a pruned token, FCM's answer that it is gone.
        public var discarded: Int
        /// Withdrawn before sending (herald.cancel, a cancelled campaign): not an error.
        public var cancelled: Int
        public var dead: Int
        public init(start: Int, completed: Int = 0, discarded: Int = 0, cancelled: Int = 0, dead: Int = 0) {
            self.start = start
            self.completed = completed
            self.discarded = discarded
            self.cancelled = cancelled
            self.dead = dead
        }
    }
    public var minutes: [Minute]
    public var completedLastMinute: Int { minutes.last?.completed ?? 0 }
    public var total: (completed: Int, discarded: Int, cancelled: Int, dead: Int) {
        minutes.reduce((0, 0, 0, 0)) { ($0.0 + $1.completed, $0.1 + $1.discarded, $0.2 + $1.cancelled, $0.3 + $1.dead) }
    }
}

/// Reads the queue gauges so that a scrape stays cheap on a table of ten million rows.
///
/// A `GROUP BY queue, state` over herald.jobs reads every row, finished ones included, which is
/// seconds on a large table. Instead:
/// - the pending states (`available`, `running`, and `scheduled` once the schema has it) are
///   counted exactly through their partial indexes (jobs_claim_unit, jobs_lease, jobs_scheduled),
///   whose size is the pending work, not the history;
/// - the other states (completed, discarded, cancelled, anything newer) are counted exactly while
///   the table is small, and estimated from a block sample (`TABLESAMPLE SYSTEM`) scaled to
///   pg_class.reltuples once it holds more than `exactRowLimit` rows;
/// - dead letters are counted exactly with an index-only walk of dead_letters_queue.
/// Each part is cached: pending counts for `pendingInterval`, estimates for `finishedInterval`,
/// so however often Prometheus and browsers ask, the database works at most that often.
public final class QueueStatistics: Sendable {
    /// The states of a job's life, in the order pages show them.
    public static let knownStates = ["available", "scheduled", "running", "completed", "discarded", "cancelled"]

    public struct Configuration: Sendable {
        /// Pending counts and dead letters are re-read at most this often (seconds). Default 2.
        public var pendingInterval: Double = 2
        /// Finished counts are re-read at most this often (seconds). Default 30.
        public var finishedInterval: Double = 30
        /// The last minutes of throughput are recounted at most this often (seconds). Default 5.
        public var throughputInterval: Double = 5
        /// Up to this many rows (pg_class.reltuples), finished states are counted exactly. Default 200,000.
        public var exactRowLimit: Double = 200_000
        /// Rows a block sample aims to read when estimating. Default 100,000.
        public var sampleRows: Double = 100_000
        public init() {}
    }

    public let configuration: Configuration
    private struct Cached<Value> {
        var value: Value
        var at: Double
    }
    private struct State: @unchecked Sendable {
        var pending: Cached<[String: QueueSnapshot.Queue]>?
        var finished: Cached<(counts: [String: [String: Int]], estimated: Bool)>?
        var throughput: Cached<Throughput>?
        /// The last hour's minutes counted so far, by start (seconds since 1970).
        var minutes: [Int: Throughput.Minute]?
        var indexedStates: Set<String>?
        /// Whether jobs name registry projects (migration 190), whose pauses hold jobs back.
        var projects: Bool?
    }
    private let state = Mutex(State())

    public init(configuration: Configuration = Configuration()) {
        self.configuration = configuration
    }

    static func now() -> Double { Date().timeIntervalSince1970 }

    /// The snapshot, from the cache where it is fresh enough.
    public func snapshot(_ connection: PGConnection) throws(PostgresError) -> QueueSnapshot {
        let now = Self.now()
        let cached = state.withLock { $0 }
        let indexed: Set<String>
        if let known = cached.indexedStates { indexed = known } else { indexed = try indexedStates(connection) }
        let projects: Bool
        if let known = cached.projects { projects = known } else { projects = try connection.query(SQL.jobsHaveProject).bool(0, 0) ?? false }
        var pending = cached.pending
        if pending == nil || now - pending!.at >= configuration.pendingInterval {
            pending = Cached(value: try readPending(connection, indexed: indexed, projects: projects), at: now)
        }
        var finished = cached.finished
        if finished == nil || now - finished!.at >= configuration.finishedInterval
            || (!finished!.value.estimated && now - finished!.at >= configuration.pendingInterval) {
            finished = Cached(value: try readOthers(connection, skipping: indexed), at: now)
        }
        state.withLock {
            $0.indexedStates = indexed
            $0.projects = projects
            $0.pending = pending
            $0.finished = finished
        }
        var byQueue = pending!.value
        for (queue, counts) in finished!.value.counts {
            var entry = byQueue[queue] ?? QueueSnapshot.Queue(name: queue)
            // Disjoint rows: the finished part never counts an indexed state, so the two add up.
            for (state, count) in counts { entry.states[state, default: 0] += count }
            byQueue[queue] = entry
        }
        let estimated = finished!.value.estimated
            ? Set(finished!.value.counts.values.flatMap(\.keys)).subtracting(indexed) : []
        return QueueSnapshot(queues: byQueue.values.sorted { $0.name < $1.name }, estimatedStates: estimated)
    }

    /// The pending states and the statement that counts each from its partial index (the state
    /// is written into each statement: see count_available.sql). With registry projects, the
    /// available jobs are counted by count_available_outside_pauses.sql instead.
    static let pendingCounts: [(state: String, sql: String)] = [
        ("available", SQL.countAvailable),
        ("running", SQL.countRunning),
        ("scheduled", SQL.countScheduled),
    ]

    /// The pending states this schema can count from an index: available and running always;
    /// scheduled once a partial index `WHERE state = 'scheduled'` exists (migration 040).
    func indexedStates(_ connection: PGConnection) throws(PostgresError) -> Set<String> {
        let scheduled = try connection.query(SQL.hasScheduledIndex).bool(0, 0) ?? false
        return scheduled ? ["available", "running", "scheduled"] : ["available", "running"]
    }

    func readPending(_ connection: PGConnection, indexed: Set<String>, projects: Bool) throws(PostgresError) -> [String: QueueSnapshot.Queue] {
        var byQueue: [String: QueueSnapshot.Queue] = [:]
        for (state, sql) in Self.pendingCounts where indexed.contains(state) {
            let rows = try connection.query(state == "available" && projects ? SQL.countAvailableOutsidePauses : sql)
            for row in 0..<rows.rowCount {
                let name = rows[row, 0] ?? ""
                var entry = byQueue[name] ?? QueueSnapshot.Queue(name: name)
                entry.states[rows[row, 1] ?? state, default: 0] += rows.int(row, 2) ?? 0
                if let age = rows.double(row, 3) { entry.oldestAvailableAge = max(0, age) }
                byQueue[name] = entry
            }
        }
        let dead = try connection.query(SQL.deadLettersPerQueue)
        for row in 0..<dead.rowCount {
            let name = dead[row, 0] ?? ""
            var entry = byQueue[name] ?? QueueSnapshot.Queue(name: name)
            entry.deadLetters = dead.int(row, 1) ?? 0
            byQueue[name] = entry
        }
        return byQueue
    }

    func readOthers(_ connection: PGConnection, skipping indexed: Set<String>) throws(PostgresError)
        -> (counts: [String: [String: Int]], estimated: Bool) {
        let rows = try connection.query(SQL.jobsEstimatedRows).double(0, 0) ?? -1
        var counts: [String: [String: Int]] = [:]
        if rows < configuration.exactRowLimit {
            // Small (or never analysed, reltuples -1): exact, but only the states the indexes do not cover.
            let result = try connection.query(SQL.countOtherStates, [.textArray(indexed.sorted())])
            for row in 0..<result.rowCount {
                counts[result[row, 0] ?? "", default: [:]][result[row, 1] ?? "", default: 0] += result.int(row, 2) ?? 0
            }
            return (counts, false)
        }
        let percent = min(100, max(0.01, 100 * configuration.sampleRows / rows))
        let result = try connection.query(SQL.sampleStates, [.double(percent)])
        for row in 0..<result.rowCount {
            let state = result[row, 1] ?? ""
            guard !indexed.contains(state), let sampled = result.double(row, 3), sampled > 0 else { continue }
            let estimate = Int(((result.double(row, 2) ?? 0) * rows / sampled).rounded())
            counts[result[row, 0] ?? "", default: [:]][state, default: 0] += estimate
        }
        return (counts, true)
    }

    /// Completed, discarded, cancelled and dead per minute over the last hour.
    ///
    /// Counting the whole hour reads every job finished in it: on a table of ten million rows
    /// kept for a day that is about 400,000 rows and seconds (measured: a parallel sequential scan,
    /// 4 s). So the hour is counted once, and after that each refresh recounts only the last
    /// `recountMinutes` minutes (a few thousand rows through the finished_at and dead_at indexes)
    /// and keeps the older minutes, which no longer change: a job's finished_at is its recording
    /// transaction's time, and those commit within seconds.
    public func throughput(_ connection: PGConnection) throws(PostgresError) -> Throughput {
        let now = Self.now()
        let thisMinute = Int(now / 60) * 60
        let known = state.withLock { ($0.throughput, $0.minutes) }
        if let cached = known.0, now - cached.at < configuration.throughputInterval { return cached.value }
        var buckets = known.1 ?? [:]
        let from = known.1 == nil ? thisMinute - 59 * 60 : thisMinute - (Self.recountMinutes - 1) * 60
        let rows = try connection.query(SQL.finishedPerMinute, [.double(Double(from))])
        for start in stride(from: from, through: thisMinute, by: 60) {
            buckets[start] = Throughput.Minute(start: start)
        }
        for row in 0..<rows.rowCount {
            guard let start = rows.int(row, 0), start >= from, start <= thisMinute else { continue }
            let count = rows.int(row, 2) ?? 0
            switch rows[row, 1] {
            case "completed": buckets[start]?.completed += count
            case "dead": buckets[start]?.dead += count
            case "cancelled": buckets[start]?.cancelled += count
            default: buckets[start]?.discarded += count
            }
        }
        let minutes = (0..<60).map { index -> Throughput.Minute in
            let start = thisMinute - (59 - index) * 60
            return buckets[start] ?? Throughput.Minute(start: start)
        }
        let kept = Dictionary(uniqueKeysWithValues: minutes.map { ($0.start, $0) })
        let value = Throughput(minutes: minutes)
        state.withLock {
            $0.throughput = Cached(value: value, at: now)
            $0.minutes = kept
        }
        return value
    }

    /// Minutes recounted on each refresh after the first; older ones are final.
    static let recountMinutes = 3
}
