import Foundation
import Testing
import Postgres
import Queue
@testable import Worker
import TestSupport

/// Idempotency by period: herald.enqueue(..., dedupe_key, dedupe_for) against a real PostgreSQL.
@Suite struct DedupePeriodTests {
    func withDatabase(_ body: (PGConnection, FreshDatabase) throws -> Void) throws {
        let database = try TestDatabase.fresh()
        defer { database.drop() }
        try body(try database.connect(), database)
    }

    /// The error a statement was refused with (nil: it was accepted).
    func refusal(_ body: () throws(PostgresError) -> Void) -> PostgresError? {
        do { try body(); return nil } catch { return error }
    }

    static let enqueue = "SELECT herald.enqueue('{\"token\":\"a\"}'::jsonb, dedupe_key => $1, dedupe_for => $2::interval)"

    func deliver(_ c: PGConnection, retention: Double) throws -> [Int] {
        let store = JobStore(connection: c, retention: retention)
        let claimed = try store.claimer.claim(queues: [], limit: 10, leaseSeconds: 60)
        try store.recorder.record(claimed.map { JobOutcome(id: $0.id, attempt: $0.attempt, .completed(messageName: "projects/p/messages/\($0.id)")) })
        return claimed.map(\.id)
    }

    /// Moves the key's period back, as if `hours` had passed since it was taken (the test's clock).
    func age(_ c: PGConnection, _ key: String, hours: Int) throws {
        try c.query("UPDATE herald.dedupe_keys SET created_at = created_at - make_interval(hours => $2::int), expires_at = expires_at - make_interval(hours => $2::int) WHERE key = $1",
                    [.text(key), .int(hours)])
    }

    @Test func aKeyIsRefusedForItsPeriodAfterDeliveryAndAcceptedAfterIt() throws {
        try withDatabase { c, _ in
            let first = try c.query(Self.enqueue, [.text("order-42-shipped"), .text("1 day")]).int(0, 0)!
            #expect(try c.query(Self.enqueue, [.text("order-42-shipped"), .text("1 day")]).int(0, 0) == first)
            #expect(try deliver(c, retention: 3600) == [first])
            #expect(try c.query("SELECT state FROM herald.jobs WHERE id = $1", [.int(first)])[0, 0] == "completed")
            // Delivered, and still refused: the same id comes back and no job is added.
            #expect(try c.query(Self.enqueue, [.text("order-42-shipped"), .text("1 day")]).int(0, 0) == first)
            // A call without dedupe_for also gets the job holding the key for a period.
            #expect(try c.query("SELECT herald.enqueue('{\"token\":\"a\"}'::jsonb, dedupe_key => 'order-42-shipped')").int(0, 0) == first)
            #expect(try c.query("SELECT count(*) FROM herald.jobs").int(0, 0) == 1)
            // The period is the caller's: 2 hours later, a call with a 1-hour period is accepted...
            try age(c, "order-42-shipped", hours: 2)
            #expect(try c.query(Self.enqueue, [.text("order-42-shipped"), .text("1 day")]).int(0, 0) == first,
                    "2 hours into a 1-day period")
            let second = try c.query(Self.enqueue, [.text("order-42-shipped"), .text("1 hour")]).int(0, 0)!
            #expect(second != first)
            #expect(try c.query("SELECT count(*) FROM herald.jobs WHERE dedupe_key = 'order-42-shipped'").int(0, 0) == 2)
            // ...and holds the key for its own period from now.
            #expect(try c.query(Self.enqueue, [.text("order-42-shipped"), .text("1 hour")]).int(0, 0) == second)
        }
    }

    @Test func aKeyOutlivesTheRetentionOfItsJob() throws {
        try withDatabase { c, _ in
            let first = try c.query(Self.enqueue, [.text("welcome-7"), .text("30 days")]).int(0, 0)!
            // Retention 0: the finished job is deleted at once.
            #expect(try deliver(c, retention: 0) == [first])
            #expect(try c.query("SELECT count(*) FROM herald.jobs").int(0, 0) == 0)
            #expect(try c.query(Self.enqueue, [.text("welcome-7"), .text("30 days")]).int(0, 0) == first)
            #expect(try c.query("SELECT count(*) FROM herald.jobs").int(0, 0) == 0, "nothing sent twice")
            // The leader deletes keys past their period, and only those.
            _ = try c.query(Self.enqueue, [.text("other"), .text("1 hour")])
            try age(c, "welcome-7", hours: 24 * 31)
            #expect(try AudienceRetention().runOnce(MaintenanceRun(connection: c))["dedupe_keys_deleted"] == 1)
            #expect(try c.query("SELECT key FROM herald.dedupe_keys")[0, 0] == "other")
            #expect(try c.query(Self.enqueue, [.text("welcome-7"), .text("30 days")]).int(0, 0) != first)
        }
    }

    @Test func concurrentCallsWithOneKeyMakeOneJob() throws {
        try withDatabase { _, database in
            let ids = UnsafeSendableBox<[Int]>([])
            let group = DispatchGroup()
            for _ in 0..<6 {
                DispatchQueue.global().async(group: group) {
                    guard let c = try? database.connect() else { return }
                    for round in 0..<20 {
                        if let id = try? c.query(Self.enqueue, [.text("k-\(round)"), .text("1 day")]).int(0, 0) {
                            ids.mutate { $0.append(id) }
                        }
                    }
                }
            }
            #expect(group.wait(timeout: .now() + 60) == .success)
            #expect(ids.value.count == 6 * 20)
            #expect(Set(ids.value).count == 20, "one job per key")
            let c = try database.connect()
            #expect(try c.query("SELECT count(*) FROM herald.jobs").int(0, 0) == 20)
            #expect(try c.query("SELECT count(*) FROM herald.dedupe_keys d JOIN herald.jobs j ON j.id = d.job_id").int(0, 0) == 20)
        }
    }

    @Test(arguments: [("0", "0"), ("-1 day", "-1 days"), ("11 years", "11 years"), ("00:00:00", "00:00:00")])
    func aBadPeriodIsRefusedNamingItAndAddsNothing(period: String, shown: String) throws {
        try withDatabase { c, _ in
            let error = refusal { () throws(PostgresError) in _ = try c.query(Self.enqueue, [.text("k"), .text(period)]) }
            let message = error?.serverMessage ?? error?.message ?? "accepted"
            #expect(message.contains("dedupe_for"), "\(message)")
            #expect(message.contains(shown), "\(message)")
            #expect(error?.sqlState == "22023")
            let left = try c.query("SELECT (SELECT count(*) FROM herald.jobs) + (SELECT count(*) FROM herald.dedupe_keys)").int(0, 0)
            #expect(left == 0)
        }
    }

    @Test func dedupeForWithoutAKeyIsRefused() throws {
        try withDatabase { c, _ in
            let error = refusal { () throws(PostgresError) in _ = try c.query("SELECT herald.enqueue('{\"token\":\"a\"}'::jsonb, dedupe_for => '1 day')") }
            #expect(error?.serverMessage?.contains("needs a dedupe_key") == true)
            let left = try c.query("SELECT count(*) FROM herald.jobs").int(0, 0)
            #expect(left == 0)
        }
    }
}
