import Foundation
import Testing
import Postgres
import Queue
import TestSupport

/// The claim at a time the test chooses (herald.claim_batch's p_now), and in the shape workers of
/// the previous release read (herald.claim_jobs).
@Suite struct ClaimTimeTests {
    func enqueue(_ c: PGConnection, _ count: Int) throws {
        try c.query("""
            SELECT herald.enqueue(jsonb_build_object('token', 't' || g, 'notification', jsonb_build_object('title', 'hi')))
            FROM generate_series(1, $1::int) AS g
            """, [.int(count)])
    }

    @Test func aQueueBucketRefillsAsTheClaimsClockMovesWithoutWaiting() throws {
        let database = try TestDatabase.fresh()
        defer { database.drop() }
        let c = try database.connect()
        try enqueue(c, 5)
        // 10 a second: a bucket of one token. Empty at t0, a minute ahead, so every job is due.
        let t0 = try #require(try c.query("SELECT extract(epoch FROM now())::float8 + 60").double(0, 0))
        try c.query("SELECT herald.set_queue_limits('default', 10, NULL)")
        try c.query("UPDATE herald.queues SET tokens = 0, refilled_at = to_timestamp($1::float8)", [.double(t0)])
        let store = JobStore(connection: c, workerID: "clock")

        store.claimer.claimTime = t0
        let empty = try store.claimer.claimBatch(queues: [], limit: 5, leaseSeconds: 60)
        #expect(empty.jobs.isEmpty, "an empty bucket allows nothing")
        #expect(empty.heldBackFor.map { abs($0 - 0.1) < 1e-9 } == true, "back when one token is there: \(String(describing: empty.heldBackFor))")

        store.claimer.claimTime = t0 + 0.1
        let one = try store.claimer.claimBatch(queues: [], limit: 5, leaseSeconds: 60)
        #expect(one.jobs.count == 1, "a tenth of a second later the bucket holds one token")
        #expect(one.heldBackFor != nil)
        #expect(try store.claimer.claimBatch(queues: [], limit: 5, leaseSeconds: 60).jobs.isEmpty, "and it was spent")

        // An hour later the bucket holds its burst, one token, not 36,000.
        store.claimer.claimTime = t0 + 3600
        #expect(try store.claimer.claimBatch(queues: [], limit: 5, leaseSeconds: 60).jobs.count == 1)
        // The leases run from the claim's time.
        let lease = try c.query("SELECT max(extract(epoch FROM locked_until))::float8 FROM herald.jobs").double(0, 0) ?? 0
        #expect(abs(lease - (t0 + 3660)) < 0.001)
    }

    @Test func workersOfThePreviousReleaseStillClaimInTheirShape() throws {
        let database = try TestDatabase.fresh()
        defer { database.drop() }
        let c = try database.connect()
        try enqueue(c, 3)
        try c.query("SELECT herald.set_queue_limits('default', 10, NULL)")
        try c.query("UPDATE herald.queues SET tokens = 1, refilled_at = now()")
        let rows = try c.query("SELECT id, wait_seconds FROM herald.claim_jobs(NULL, 3, 60, 'previous-release')")
        // One job (the bucket held one token), then the row without a job that says when to come back.
        #expect(rows.rowCount == 2)
        #expect(rows.int(0, 0) != nil && rows.double(0, 1) == nil)
        #expect(rows.int(1, 0) == nil && (rows.double(1, 1) ?? 0) > 0)
        #expect(try c.query("SELECT count(*) FROM herald.jobs WHERE state = 'running' AND locked_by = 'previous-release'").int(0, 0) == 1)
    }
}
