import Foundation
import Testing
import Postgres
import TestSupport

/// Delivery events end to end: a pool sending to the emulator, one worker killed with SIGKILL
/// mid-way, and a consumer following herald.events_since all along.
@Suite(.serialized) struct DeliveryEventsPoolTests {
    @Test func everyCompletedDeadAndPrunedJobAppearsOnceInOrderThroughASIGKILL() throws {
        let stack = try WorkerStack(latencyMilliseconds: 40)
        defer { stack.close() }
        let c = stack.connection
        try c.query("SELECT herald.set_queue_events('default', true)")
        // Paced, so the drain lasts seconds and the kill lands in the middle of it whatever the
        // machine's load (an unpaced pool sends 2,000 jobs in about a second).
        try c.query("SELECT herald.set_queue_limits('default', max_per_second => 250)")
        // 2,000 jobs: most delivered, every 23rd refused (dead), every 31st unregistered (pruned).
        try c.query("""
            INSERT INTO herald.jobs (message, max_attempts)
            SELECT jsonb_build_object('token', CASE WHEN g % 23 = 0 THEN 'fail-invalid-' WHEN g % 31 = 0 THEN 'fail-unregistered-' ELSE 'ok-' END || g,
                                      'notification', jsonb_build_object('title', 'Hi')), 3
            FROM generate_series(1, 2000) AS g
            """)

        // The consumer: remembers the last id, asks for what came after.
        // Set once the pool has drained: the last event id there is; the consumer stops once it
        // has read up to it (a call may return nothing for a while when a transaction is open:
        // events_since waits for it up to 2 s, and a loaded machine keeps claims open that long).
        let stop = UnsafeSendableBox<Int?>(nil)
        let seen = UnsafeSendableBox<[(id: Int, kind: String, job: Int)]>([])
        let consumerFailure = UnsafeSendableBox<String?>(nil)
        let done = DispatchSemaphore(value: 0)
        let url = stack.database.url
        Thread.detachNewThread {
            defer { done.signal() }
            do {
                let reader = try PGConnection(url: url)
                var last = 0
                while true {
                    let target = stop.value
                    let rows = try reader.query("SELECT id, kind, job_id FROM herald.events_since($1, 300)", [.int(last)])
                    for row in 0..<rows.rowCount {
                        seen.mutate { $0.append((rows.int(row, 0)!, rows[row, 1]!, rows.int(row, 2)!)) }
                        last = rows.int(row, 0)!
                    }
                    if let target, rows.rowCount == 0, last >= target { return }
                    if rows.rowCount == 0 { Thread.sleep(forTimeInterval: 0.02) }
                }
            } catch {
                consumerFailure.mutate { $0 = "\(error)" }
            }
        }

        let pool = try HeraldProcess(["work", "--processes", "2", "--lease", "2", "--poll-interval", "0.2"], environment: stack.environment)
        try pool.start()
        defer { pool.signal(SIGKILL); pool.wait(timeout: 10) }
        var victim: Int32? = nil
        #expect(waitUntil(timeout: 60) {
            guard (try? stack.count("SELECT count(*) FROM herald.jobs WHERE state IN ('completed', 'discarded')")) ?? 0 >= 300 else { return false }
            let holder = try? c.query("SELECT locked_by FROM herald.jobs WHERE state = 'running' AND locked_by IS NOT NULL LIMIT 1")
            victim = holder?[0, 0].flatMap { Int32($0.split(separator: ":").dropLast().last!) }
            return victim != nil
        }, "\(pool.output)")
        let killed = try #require(victim)
        #expect(killed != pool.pid)
        kill(killed, SIGKILL)
        #expect(try stack.count("SELECT count(*) FROM herald.jobs WHERE state IN ('available', 'scheduled', 'running')") > 0,
                "the kill came before the end")
        #expect(waitUntil(timeout: 120) {
            (try? stack.count("SELECT count(*) FROM herald.jobs WHERE state IN ('available', 'scheduled', 'running')")) == 0
        }, "\(pool.output)")
        #expect(pool.output.contains("was killed by signal 9"))
        let lastEvent = try stack.count("SELECT coalesce(max(id), 0) FROM herald.events")
        stop.mutate { $0 = lastEvent }
        #expect(done.wait(timeout: .now() + 30) == .success)
        #expect(consumerFailure.value == nil, "\(consumerFailure.value ?? "")")

        // What the database says happened to each job...
        func ids(_ sql: String) throws -> Set<Int> {
            let rows = try c.query(sql)
            return Set((0..<rows.rowCount).map { rows.int($0, 0)! })
        }
        let completed = try ids("SELECT id FROM herald.jobs WHERE state = 'completed'")
        let dead = try ids("SELECT job_id FROM herald.dead_letters")
        let pruned = try ids("SELECT job_id FROM herald.pruned_tokens")
        #expect(completed.count + dead.count + pruned.count == 2000)
        #expect(dead.count == 2000 / 23)
        // ...is what the consumer saw: each job once, with its outcome, in id order, no id skipped.
        let events = seen.value
        #expect(events.map(\.id) == events.map(\.id).sorted())
        #expect(Set(events.map(\.id)).count == events.count)
        #expect(events.count == 2000, "\(events.count) events for 2000 jobs")
        #expect(Set(events.filter { $0.kind == "completed" }.map(\.job)) == completed)
        #expect(Set(events.filter { $0.kind == "dead" }.map(\.job)) == dead)
        #expect(Set(events.filter { $0.kind == "pruned" }.map(\.job)) == pruned)
        #expect(try stack.count("SELECT count(*) FROM herald.events") == events.count)
        let resent = try stack.count("SELECT count(*) FROM herald.jobs WHERE attempts > 1")
        print("delivery events: \(events.count) events for 2000 jobs through a SIGKILL (\(resent) jobs attempted again)")
    }
}
