import Foundation
import Postgres
import Synchronization

/// Jobs for benchmarks: valid v1 messages to tokens `bench-<g>`, added with one
/// `INSERT ... SELECT generate_series` per call, the way a campaign would be enqueued.
public enum BenchmarkJobs {
    static let insertSQL = """
        INSERT INTO herald.jobs (message)
        SELECT jsonb_build_object(
                   'token', 'bench-' || g,
                   'notification', jsonb_build_object('title', 'Herald bench', 'body', 'Message ' || g),
                   'data', jsonb_build_object('n', g::text))
        FROM generate_series($1::bigint, $2::bigint) AS g
        """

    /// Enqueues the jobs for tokens `bench-<first>` ... `bench-<first + count - 1>`; returns how many.
    @discardableResult
    public static func enqueue(_ connection: PGConnection, first: Int = 1, count: Int) throws(PostgresError) -> Int {
        guard count > 0 else { return 0 }
        return try connection.query(insertSQL, [.int(first), .int(first + count - 1)]).affectedRows
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
    public var jobsPerSecond: Double { seconds > 0 ? Double(jobs) / seconds : 0 }
    public init(jobs: Int, seconds: Double, threads: Int, batch: Int) {
        self.jobs = jobs; self.seconds = seconds; self.threads = threads; self.batch = batch
    }
}

/// The PostgreSQL ceiling of Herald's claim path: the worker's own claim and record statements
/// (`JobStore.claim`, `JobStore.record` with `.completed`) in a tight loop with no HTTP, on
/// `threads` connections, until no job is available. Whatever the worker does beyond this
/// (HTTP/2, JSON, scheduling) can only make it slower, so end-to-end / ceiling says how much of
/// the database's capacity the worker turns into deliveries.
public enum CeilingBenchmark {
    /// Runs over the jobs already available in herald.jobs (enqueue them first, e.g. with
    /// `BenchmarkJobs.enqueue`). `retention` is passed to `JobStore` as the worker passes it
    /// (0 deletes finished rows instead of updating them).
    public static func run(databaseURL: String, threads: Int, batch: Int, leaseSeconds: Double = 60,
                           retention: Double = 86_400) throws -> CeilingResult {
        let threads = max(1, threads)
        let batch = max(1, batch)
        let ready = DispatchSemaphore(value: 0)
        let go = DispatchSemaphore(value: 0)
        let done = DispatchSemaphore(value: 0)
        let completed = Locked(0)
        let failure = Locked<String?>(nil)

        for index in 0..<threads {
            let thread = Thread {
                var store: JobStore?
                do {
                    let connection = try PGConnection(url: databaseURL)
                    store = JobStore(connection: connection, workerID: "ceiling-\(getpid())-\(index)", retention: retention)
                } catch {
                    failure.withLock { $0 = $0 ?? "\(error)" }
                }
                ready.signal()
                go.wait()
                defer { done.signal() }
                guard let store else { return }
                var mine = 0
                do {
                    while true {
                        let jobs = try store.claim(queues: [], limit: batch, leaseSeconds: leaseSeconds)
                        if jobs.isEmpty { break }
                        let summary = try store.record(jobs.map { .completed(id: $0.id, messageName: "projects/p/messages/1") })
                        mine += summary.finished
                    }
                } catch {
                    failure.withLock { $0 = $0 ?? "\(error)" }
                }
                completed.withLock { $0 += mine }
            }
            thread.name = "herald-ceiling-\(index)"
            thread.start()
        }
        for _ in 0..<threads { ready.wait() }
        let started = DispatchTime.now().uptimeNanoseconds
        for _ in 0..<threads { go.signal() }
        for _ in 0..<threads { done.wait() }
        let seconds = Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9
        if let message = failure.value {
            throw PostgresError("the ceiling benchmark failed: \(message)")
        }
        return CeilingResult(jobs: completed.value, seconds: seconds, threads: threads, batch: batch)
    }
}
