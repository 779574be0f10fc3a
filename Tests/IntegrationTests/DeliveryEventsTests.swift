import Foundation
import Testing
import Postgres
import Queue
@testable import Worker
import TestSupport

/// Delivery events: herald.events written with the change, read with herald.events_since.
@Suite struct DeliveryEventsTests {
    struct Event: Equatable {
        var id: Int, kind: String, jobID: Int?, token: String?, detail: String
    }

    /// One answer of herald.events_since.
    static func read(_ c: PGConnection, after: Int = 0, max: Int = 10_000) throws -> [Event] {
        let rows = try c.query("SELECT id, kind, job_id, token, detail::text FROM herald.events_since($1, $2)", [.int(after), .int(max)])
        return (0..<rows.rowCount).map { Event(id: rows.int($0, 0)!, kind: rows[$0, 1]!, jobID: rows.int($0, 2), token: rows[$0, 3], detail: rows[$0, 4]!) }
    }

    /// The events after `after`, for a test that wrote some: events_since answers nothing while an
    /// older transaction anywhere in the cluster is open (the tests share one), so an empty
    /// answer is asked again, for up to a minute, as a consumer would.
    static func events(_ c: PGConnection, after: Int = 0, max: Int = 10_000) throws -> [Event] {
        var answer = try read(c, after: after, max: max)
        let deadline = Date().addingTimeInterval(60)
        while answer.isEmpty && Date() < deadline {
            Thread.sleep(forTimeInterval: 0.1)  // a consumer's pause before asking again
            answer = try read(c, after: after, max: max)
        }
        return answer
    }

    func refusal(_ body: () throws(PostgresError) -> Void) -> PostgresError? {
        do { try body(); return nil } catch { return error }
    }

    @Test func eachOutcomeOfAQueueWithEventsOnIsWrittenWithTheChange() throws {
        let database = try TestDatabase.fresh()
        defer { database.drop() }
        let c = try database.connect()
        try c.query("SELECT herald.set_queue_events('alerts', true)")
        var ids: [String: Int] = [:]
        for token in ["ok-1", "bad-1", "gone-1", "ok-2"] {
            ids[token] = try c.query("SELECT herald.enqueue(jsonb_build_object('token', $1::text), queue => 'alerts')", [.text(token)]).int(0, 0)!
        }
        let quiet = try c.query("SELECT herald.enqueue('{\"token\":\"ok-3\"}'::jsonb, queue => 'default')").int(0, 0)!
        let store = JobStore(connection: c, retention: 3600)
        let claimed = try store.claimer.claim(queues: [], limit: 10, leaseSeconds: 60)
        #expect(claimed.count == 5)
        let attempt = Dictionary(uniqueKeysWithValues: claimed.map { ($0.id, $0.attempt) })
        try store.recorder.record([
            JobOutcome(id: ids["ok-1"]!, attempt: attempt[ids["ok-1"]!]!, .completed(messageName: "projects/p/messages/1")),
            JobOutcome(id: ids["bad-1"]!, attempt: attempt[ids["bad-1"]!]!, .dead(reason: "INVALID_ARGUMENT: bad token")),
            JobOutcome(id: ids["gone-1"]!, attempt: attempt[ids["gone-1"]!]!, .pruned(token: "gone-1", reason: "UNREGISTERED")),
            JobOutcome(id: quiet, attempt: attempt[quiet]!, .completed(messageName: "projects/p/messages/3")),
        ])
        let events = try Self.events(c)
        #expect(events.map(\.kind) == ["completed", "dead", "pruned"], "\(events)")
        guard events.count == 3 else { return }
        #expect(events.map(\.jobID) == [ids["ok-1"], ids["bad-1"], ids["gone-1"]])
        #expect(events.map(\.token) == ["ok-1", "bad-1", "gone-1"])
        #expect(events[0].detail.contains("projects/p/messages/1"))
        #expect(events[1].detail.contains("INVALID_ARGUMENT: bad token"))
        #expect(events[2].detail.contains("UNREGISTERED"))
        #expect(events.map(\.id) == events.map(\.id).sorted())
        // A consumer that remembers the last id gets only what came after.
        #expect(try Self.events(c, after: events[1].id) == [events[2]])
        #expect(try Self.events(c, after: 0, max: 1) == [events[0]])
        // Off again: nothing more is written; a rolled-back outcome writes nothing either.
        try c.query("SELECT herald.set_queue_events('alerts', false)")
        try store.recorder.record([JobOutcome(id: ids["ok-2"]!, attempt: attempt[ids["ok-2"]!]!, .completed(messageName: "projects/p/messages/2"))])
        #expect(try Self.events(c).count == 3)
    }

    @Test func campaignsAndSubscriptionsWriteTheirEvents() throws {
        let database = try TestDatabase.fresh()
        defer { database.drop() }
        let c = try database.connect()
        try c.query("SELECT herald.set_queue_events('default', true)")
        let campaign = try c.query("SELECT herald.create_campaign('spring')").int(0, 0)!
        _ = try c.query("SELECT herald.enqueue('{\"token\":\"a\"}'::jsonb, campaign_id => $1)", [.int(campaign)])
        try c.query("SELECT herald.pause_campaign($1)", [.int(campaign)])
        _ = try c.query("SELECT herald.subscribe('news', ARRAY['t1'])")
        try c.query("SELECT herald.record_topic_results($1::jsonb)", [.text(#"[{"project": "", "topic": "news", "token": "t1", "generation": 1, "outcome": "failed", "error": "INVALID_ARGUMENT"}]"#)])
        let events = try Self.events(c)
        #expect(events.map(\.kind) == ["campaign_paused", "subscription_failed"], "\(events)")
        guard events.count == 2 else { return }
        #expect(events[0].detail.contains("paused with herald.pause_campaign"))
        #expect(events[1].token == "t1")
        #expect(events[1].detail.contains("INVALID_ARGUMENT"))
    }

    /// Ids that commit out of order are never skipped: a writer that took id N and has not
    /// committed holds back every id above N until it ends.
    @Test func anIdCommittedLateIsNotSkipped() throws {
        let database = try TestDatabase.fresh()
        defer { database.drop() }
        let early = try database.connect(), late = try database.connect(), reader = try database.connect()
        try early.execute("BEGIN")
        try early.query("INSERT INTO herald.events (kind, token) VALUES ('pruned', 'first')")
        try late.query("INSERT INTO herald.events (kind, token) VALUES ('pruned', 'second')")
        // The second id is committed, the first is not: nothing may be returned yet.
        #expect(try Self.read(reader).isEmpty)
        try early.execute("COMMIT")
        let events = try Self.events(reader)
        #expect(events.map(\.token) == ["first", "second"])
        guard events.count == 2 else { return }
        #expect(events[0].id < events[1].id)
        // A rolled-back id leaves a gap that holds nothing back.
        try early.execute("BEGIN")
        try early.query("INSERT INTO herald.events (kind, token) VALUES ('pruned', 'never')")
        try early.execute("ROLLBACK")
        try late.query("INSERT INTO herald.events (kind, token) VALUES ('pruned', 'third')")
        #expect(try Self.events(reader, after: events[1].id).map(\.token) == ["third"])
    }

    @Test func eventsHaveARetentionOfTheirOwn() throws {
        let database = try TestDatabase.fresh()
        defer { database.drop() }
        let c = try database.connect()
        try c.query("INSERT INTO herald.events (kind, token, at) VALUES ('pruned', 'old', now() - interval '8 days'), ('pruned', 'recent', now() - interval '6 days')")
        #expect(try AudienceRetention().runOnce(MaintenanceRun(connection: c))["events_deleted"] == 1)
        #expect(try Self.events(c).map(\.token) == ["recent"])
    }

    @Test func badInputIsRefusedNamingIt() throws {
        let database = try TestDatabase.fresh()
        defer { database.drop() }
        let c = try database.connect()
        for (sql, named) in [("SELECT herald.set_queue_events('', true)", "queue name"),
                             ("SELECT herald.set_queue_events('q', NULL)", "enabled"),
                             ("SELECT * FROM herald.events_since(-1, 10)", "after_id"),
                             ("SELECT * FROM herald.events_since(0, 0)", "max"),
                             ("SELECT * FROM herald.events_since(0, 1000000)", "1000000")] {
            let error = refusal { () throws(PostgresError) in _ = try c.query(sql) }
            #expect(error?.serverMessage?.contains(named) == true, "\(sql): \(String(describing: error))")
        }
        // A transaction that wrote first would not wait for writers younger than itself.
        try c.execute("BEGIN")
        try c.query("SELECT herald.set_queue_events('q', true)")
        let wrote = refusal { () throws(PostgresError) in _ = try c.query("SELECT * FROM herald.events_since(0, 10)") }
        #expect(wrote?.serverMessage?.contains("before this transaction writes") == true, "\(String(describing: wrote))")
        try c.execute("ROLLBACK")
        try c.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        let error = refusal { () throws(PostgresError) in _ = try c.query("SELECT * FROM herald.events_since(0, 10)") }
        #expect(error?.serverMessage?.contains("READ COMMITTED") == true)
        try c.execute("ROLLBACK")
        let left = try c.query("SELECT count(*) FROM herald.queues").int(0, 0)
        #expect(left == 0)
    }
}
