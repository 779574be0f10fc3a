import Foundation
import Postgres
import Queue
import Worker
import Synchronization

/// Jobs for benchmarks: valid v1 messages to tokens `bench-<g>`, added with one
/// `INSERT ... SELECT generate_series` per call, the way a campaign would be enqueued.
public enum BenchmarkJobs {
    /// Enqueues the jobs for tokens `bench-<first>` ... `bench-<first + count - 1>`, of no
    /// project, or split evenly between the registry `projects`; returns how many.
    @discardableResult
    public static func enqueue(_ connection: PGConnection, first: Int = 1, count: Int, projects: [String] = [], apnsApp: String? = nil) throws(PostgresError) -> Int {
        guard count > 0 else { return 0 }
        if let apnsApp {
            return try connection.query(SQL.enqueueApnsJobs, [.int(first), .int(first + count - 1), .text(apnsApp)]).affectedRows
        }
        return try connection.query(SQL.enqueueJobs, [.int(first), .int(first + count - 1), PGValue.textArray(projects)]).affectedRows
    }
    /// Adds `count` jobs that finished an hour ago (completed, within the default 24 h
    /// retention, so maintenance keeps them), as a table that has delivered for a while holds;
    /// then VACUUM ANALYZE, as autovacuum would have by then, and a CHECKPOINT, as the server
    /// would have made by then: without it the checkpoint of the fill's gigabyte of dirty pages
    /// runs during the measured phase and is counted as its CPU. Returns how many.
    @discardableResult
    public static func addFinished(_ connection: PGConnection, count: Int) throws(PostgresError) -> Int {
        guard count > 0 else { return 0 }
        let added = try connection.query(SQL.addFinishedJobs, [.int(count)]).affectedRows
        try connection.execute(SQL.vacuumAnalyzeJobs)
        try connection.execute(SQL.checkpoint)
        return added
    }

    /// Jobs in herald.jobs.
    public static func count(_ connection: PGConnection) throws(PostgresError) -> Int {
        try connection.query(SQL.countJobs).int(0, 0) ?? 0
    }

    /// The highest job id so far (0 for none): the bench's jobs are those above it.
    public static func maxID(_ connection: PGConnection) throws(PostgresError) -> Int {
        try connection.query(SQL.maxJobId).int(0, 0) ?? 0
    }

    /// Empties the queue: TRUNCATE in a database of the bench's own; elsewhere only its own jobs.
    public static func clear(_ connection: PGConnection, ownDatabase: Bool, afterID: Int) throws(PostgresError) {
        if ownDatabase {
            try connection.execute(SQL.truncateJobs)
        } else {
            try connection.query(SQL.deleteBenchJobs, [.int(afterID)])
            try? connection.execute(SQL.vacuumJobs)
        }
    }

    /// Empties herald.events (before a phase of a run `--with events`).
    public static func clearEvents(_ connection: PGConnection) throws(PostgresError) {
        try connection.execute(SQL.truncateEvents)
    }

    /// Readies a connection that watches a phase: its counts run in its own backend, whose time
    /// is left out of the phase's (a parallel scan would spend it in worker processes counted as
    /// the cluster's). Returns that backend's process id.
    public static func watchSession(_ connection: PGConnection) throws(PostgresError) -> Int32? {
        try connection.execute(SQL.watchSession)
        return try connection.query(SQL.backendPid).int(0, 0).map { Int32($0) }
    }

    /// Completed jobs above `afterID`.
    public static func completed(_ connection: PGConnection, afterID: Int) throws(PostgresError) -> Int {
        try connection.query(SQL.countCompleted, [.int(afterID)]).int(0, 0) ?? 0
    }

    /// herald.events rows of kind `completed` for the jobs above `afterID` (`herald bench --with events`).
    public static func completedEvents(_ connection: PGConnection, afterID: Int) throws(PostgresError) -> Int {
        try connection.query(SQL.countCompletedEvents, [.int(afterID)]).int(0, 0) ?? 0
    }

    /// Completed jobs above `afterID` and the last finished_at (seconds since 1970).
    public static func throughput(_ connection: PGConnection, afterID: Int) throws(PostgresError) -> (completed: Int, lastFinished: Double?) {
        let result = try connection.query(SQL.throughput, [.int(afterID)])
        return (result.int(0, 0) ?? 0, result.double(0, 1))
    }

    /// Enqueue-to-delivered (finished_at - created_at) of the completed jobs above `afterID`, in ms.
    public static func latency(_ connection: PGConnection, afterID: Int) throws(PostgresError) -> (count: Int, p50: Double, p99: Double, max: Double) {
        let result = try connection.query(SQL.latency, [.int(afterID)])
        return (result.int(0, 0) ?? 0, result.double(0, 1) ?? 0, result.double(0, 2) ?? 0, result.double(0, 3) ?? 0)
    }

    /// Whether any job above `afterID` has been claimed yet, and the server's clock now.
    public static func firstActivity(_ connection: PGConnection, afterID: Int) throws(PostgresError) -> (claimed: Bool, now: Double?) {
        let result = try connection.query(SQL.firstActivity, [.int(afterID)])
        return (result.bool(0, 0) == true, result.double(0, 1))
    }

    public static func serverVersion(_ connection: PGConnection) throws(PostgresError) -> String {
        try connection.query(SQL.serverVersion)[0, 0] ?? "?"
    }
}

/// A value shared between threads behind a mutex (a class, so escaping closures can capture it).
public final class Locked<Value: Sendable>: Sendable {
    private let mutex: Mutex<Value>
    public init(_ value: Value) { mutex = Mutex(value) }
    @discardableResult
    public func withLock<R: Sendable>(_ body: (inout Value) -> R) -> R { mutex.withLock { body(&$0) } }
    public var value: Value { mutex.withLock { $0 } }
}

/// What `CeilingBenchmark.run` measured.
public struct CeilingResult: Sendable {
    /// Jobs claimed and recorded completed.
    public var jobs: Int
    /// From the moment every thread was connected until the last one found no job left.
    public var seconds: Double
    public var threads: Int
    public var batch: Int
    /// CPU seconds the client threads spent claiming and recording (libpq and Swift, no HTTP).
    public var clientCPUSeconds: Double
    public var jobsPerSecond: Double { seconds > 0 ? Double(jobs) / seconds : 0 }
    public init(jobs: Int, seconds: Double, threads: Int, batch: Int, clientCPUSeconds: Double = 0) {
        self.jobs = jobs; self.seconds = seconds; self.threads = threads; self.batch = batch
        self.clientCPUSeconds = clientCPUSeconds
    }
}

/// The PostgreSQL ceiling of Herald's claim path: the worker's own claim and record statements
/// (`Claimer.claim`, `OutcomeRecorder.record` with `.completed`) in a tight loop with no HTTP, on
/// `threads` connections, until no job is available. Whatever the worker does beyond this
/// (HTTP/2, JSON, scheduling) can only make it slower, so end-to-end / ceiling says how much of
/// the database's capacity the worker turns into deliveries.
public enum CeilingBenchmark {
    /// Runs over the jobs already available in herald.jobs (enqueue them first, e.g. with
    /// `BenchmarkJobs.enqueue`). `retention` is passed to `JobStore` as the worker passes it
    /// (0 deletes finished rows instead of updating them).
    /// `fcmProject` and `fcmProjectRate` are the worker's FCM project and `--max-rate`: the claims
    /// spend that FCM project's token bucket as a worker's do (no project: no bucket).
    public static func run(databaseURL: String, threads: Int, batch: Int, leaseSeconds: Double = 60,
                           retention: Double = 86_400, fcmProject: String? = nil, fcmProjectRate: Double = 0) throws -> CeilingResult {
        let threads = max(1, threads)
        let batch = max(1, batch)
        let completed = Locked(0)
        let failure = Locked<String?>(nil)
        // The worker's VACUUM of herald.jobs runs beside its claims, as in `herald work`.
        let vacuum = JobsVacuum(databaseURL: databaseURL) { event in
            if case .failed(let error) = event { failure.withLock { $0 = $0 ?? "VACUUM herald.jobs: \(error)" } }
        }
        defer { vacuum.beginShutdown() }
        let (seconds, clientCPUSeconds) = TogetherThreads.run(count: threads, name: "herald-ceiling", prepare: { index -> JobStore? in
            do {
                let store = JobStore(connection: try PGConnection(url: databaseURL), workerID: "ceiling-\(getpid())-\(index)",
                                     retention: retention, fcmProject: fcmProject)
                store.claimer.fcmProjectRate = fcmProjectRate
                return store
            } catch {
                failure.withLock { $0 = $0 ?? "\(error)" }
                return nil
            }
        }, beforeStart: {
            let thread = Thread { vacuum.run() }
            thread.name = "herald-vacuum"
            thread.start()
        }, work: { _, store in
            guard let store else { return }
            var mine = 0
            do {
                while true {
                    let jobs = try store.claimer.claim(queues: [], limit: batch, leaseSeconds: leaseSeconds)
                    if jobs.isEmpty { break }
                    let summary = try store.recorder.record(jobs.map { $0.outcome(.completed(messageName: "projects/p/messages/1")) })
                    mine += summary.finished
                }
            } catch {
                failure.withLock { $0 = $0 ?? "\(error)" }
            }
            completed.withLock { $0 += mine }
        })
        if let message = failure.value {
            throw PostgresError("the ceiling benchmark failed: \(message)")
        }
        return CeilingResult(jobs: completed.value, seconds: seconds, threads: threads, batch: batch, clientCPUSeconds: clientCPUSeconds)
    }
}
