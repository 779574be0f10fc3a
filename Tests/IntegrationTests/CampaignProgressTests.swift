import Foundation
import JSON
import Postgres
import Queue
@testable import Worker
import Testing
import TestSupport

/// herald.campaign_progress against a real PostgreSQL: every job counted once, whatever became
/// of it, and cheap to read on a campaign of a million jobs.
@Suite struct CampaignProgressTests {
    struct Counts: Equatable, CustomStringConvertible {
        var total = 0, pending = 0, running = 0, completed = 0, dead = 0, discarded = 0, cancelled = 0
        var description: String {
            "total \(total): pending \(pending), running \(running), completed \(completed), dead \(dead), discarded \(discarded), cancelled \(cancelled)"
        }
    }

    static func progress(_ c: PGConnection, _ id: Int) throws -> (counts: Counts, state: String, sentLastMinute: Int, eta: String?) {
        let p = try #require(try Campaigns.get(c, id: id))
        return (Counts(total: p.total, pending: p.pending, running: p.running, completed: p.completed, dead: p.dead,
                       discarded: p.discarded, cancelled: p.cancelled), p.state, p.sentLastMinute, p.eta)
    }

    @Test func accountsForEveryJobOfAMixedCampaignOnce() throws {
        let database = try TestDatabase.fresh()
        defer { database.drop() }
        let c = try database.connect()
        let id = try #require(try c.query("SELECT herald.create_campaign('mixed')").int(0, 0))
        try c.query("""
            INSERT INTO herald.jobs (message, queue, campaign_id)
            SELECT jsonb_build_object('token', 'mixed-' || g, 'notification', jsonb_build_object('title', 'hi')), 'campaigns', $1::bigint
            FROM generate_series(1, 20) AS g
            """, [.int(id)])
        try c.query("""
            INSERT INTO herald.jobs (message, run_at, queue, campaign_id)
            SELECT jsonb_build_object('token', 'later-' || g), now() + interval '1 hour', 'campaigns', $1::bigint FROM generate_series(1, 3) AS g
            """, [.int(id)])
        // Jobs of no campaign, in the same queue and another: never counted.
        try c.query("INSERT INTO herald.jobs (message, queue) SELECT jsonb_build_object('token', 'other-' || g), 'campaigns' FROM generate_series(1, 4) AS g")
        try c.query("INSERT INTO herald.jobs (message) SELECT jsonb_build_object('token', 'plain-' || g) FROM generate_series(1, 3) AS g")
        var expected = Counts(total: 23, pending: 23)
        #expect(try Self.progress(c, id).counts == expected)
        #expect(try Self.progress(c, id).state == "scheduled")

        // One worker; a second store under the same lease holder records with retention 0, so
        // those jobs leave herald.jobs the moment they finish.
        let kept = JobStore(connection: c, workerID: "progress-test", retention: 3600)
        let deleting = JobStore(connection: c, workerID: "progress-test", retention: 0)
        let claimed = try kept.claimer.claim(queues: ["campaigns"], limit: 100, leaseSeconds: 60).filter { $0.campaignID == id }
        try #require(claimed.count == 20, "every due job of the campaign is claimed")
        let jobs = claimed.sorted { $0.id < $1.id }
        func outcomes(_ range: Range<Int>, _ action: OutcomeAction) -> [JobOutcome] { jobs[range].map { $0.outcome(action) } }
        try kept.recorder.record(outcomes(0..<5, .completed(messageName: "projects/p/messages/1")))
        try deleting.recorder.record(outcomes(5..<8, .completed(messageName: "projects/p/messages/2")))
        try kept.recorder.record(outcomes(8..<11, .dead(reason: "SENDER_ID_MISMATCH: wrong project")))
        try kept.recorder.record(jobs[11..<13].map { $0.outcome(.pruned(token: "mixed-\($0.id)", reason: "UNREGISTERED")) })
        try deleting.recorder.record(outcomes(13..<14, .discarded(reason: "token pruned before")))
        try kept.recorder.record(outcomes(14..<16, .retry(error: "UNAVAILABLE", delay: 0)))
        try kept.recorder.record(outcomes(16..<18, .released()))
        // jobs 18 and 19 stay in flight.
        expected = Counts(total: 23, pending: 4 + 3, running: 2, completed: 8, dead: 3, discarded: 3, cancelled: 0)
        var now = try Self.progress(c, id)
        #expect(now.counts == expected, "\(now.counts)")
        #expect(now.state == "running")
        #expect(try c.query("SELECT count(*) FROM herald.dead_letters WHERE campaign_id = $1", [.int(id)]).int(0, 0) == 3)
        // The rate is what finished in the last minute and is still in herald.jobs.
        #expect(now.sentLastMinute == 5)
        #expect(now.eta != nil, "a running campaign with a rate has an ETA")

        // Retention deletes finished jobs: the counts stay.
        #expect(try Retention(retention: 0).runOnce(MaintenanceRun(connection: c))["purged"] == 5 + 2, "the five completed and the two pruned that were kept")
        now = try Self.progress(c, id)
        #expect(now.counts == expected, "\(now.counts)")

        // Cancel: the pending ones (due, retried, released and scheduled for later) are cancelled;
        // the two in flight finish and are counted as what they became.
        let cancel = try Campaigns.cancel(c, id: id, source: "test")
        #expect(cancel.cancelledJobs == 7 && cancel.changed)
        expected.pending = 0
        expected.cancelled = 7
        now = try Self.progress(c, id)
        #expect(now.counts == expected, "\(now.counts)")
        try kept.recorder.record([jobs[18].outcome(.completed(messageName: "projects/p/messages/3")),
                         jobs[19].outcome(.dead(reason: "INVALID_ARGUMENT: bad"))])
        expected.running = 0
        expected.completed = 9
        expected.dead = 4
        now = try Self.progress(c, id)
        #expect(now.counts == expected, "\(now.counts)")
        #expect(now.state == "cancelled")
        let sum = expected.pending + expected.running + expected.completed + expected.dead + expected.discarded + expected.cancelled
        #expect(sum == expected.total, "every job exactly once")
        #expect(try c.query("SELECT count(*) FROM herald.jobs WHERE campaign_id IS NULL AND state IN ('available', 'running')").int(0, 0) == 7,
                "jobs of no campaign were untouched by the cancel")

        // A cancelled campaign takes no new jobs, and a job cannot name a campaign that does not exist.
        do {
            try c.query("SELECT herald.enqueue('{\"token\": \"late\"}', campaign_id => $1)", [.int(id)])
            Issue.record("a job joined a cancelled campaign")
        } catch {
            #expect(error.serverMessage?.contains("campaign mixed is cancelled") == true, "\(error)")
        }
        do {
            try c.query("SELECT herald.enqueue('{\"token\": \"nowhere\"}', campaign_id => 424242)")
            Issue.record("a job named a campaign that does not exist")
        } catch {
            #expect(error.serverMessage?.contains("no campaign with id 424242") == true, "\(error)")
        }
        #expect(try Self.progress(c, id).counts == expected, "refused jobs changed nothing")
    }

    /// A campaign of 1,000,000 jobs at a steady ~100 messages a second: 700,000 completed over
    /// the last two hours, 1,000 in flight, the rest due. Its progress is read in under 100 ms.
    @Test func progressOfAMillionJobCampaignAnswersInUnder100Milliseconds() throws {
        let database = try TestDatabase.fresh()
        defer { database.drop() }
        let c = try database.connect()
        let id = try #require(try c.query("SELECT herald.create_campaign('million', max_per_second => 100)").int(0, 0))
        try c.query("""
            INSERT INTO herald.jobs (message, queue, campaign_id, state, run_at, finished_at, locked_until, locked_by, attempts)
            SELECT jsonb_build_object('token', 'device-' || g, 'notification', jsonb_build_object('title', 'Sale')), 'campaigns', $1::bigint,
                   CASE WHEN g <= 700000 THEN 'completed' WHEN g <= 701000 THEN 'running' ELSE 'available' END,
                   now() - interval '2 hours',
                   CASE WHEN g <= 700000 THEN now() - make_interval(secs => (g % 7200)) END,
                   CASE WHEN g > 700000 AND g <= 701000 THEN now() + interval '1 minute' END,
                   CASE WHEN g > 700000 AND g <= 701000 THEN 'a-worker' END,
                   CASE WHEN g <= 701000 THEN 1 ELSE 0 END
            FROM generate_series(1, 1000000) AS g
            """, [.int(id)])
        // The rows went in directly: give the campaign the counts its jobs would have given it.
        try c.query("UPDATE herald.campaigns SET completed = 700000, state = 'running', started_at = now() - interval '2 hours' WHERE id = $1", [.int(id)])
        try c.execute("ANALYZE herald.jobs")

        let progress = try #require(try Campaigns.get(c, id: id))
        #expect(progress.total == 1_000_000 && progress.completed == 700_000 && progress.running == 1000 && progress.pending == 299_000)
        // About 97 a second finished in the minute before the INSERT's now(); the insert itself
        // takes a while, so by now part of that minute has passed out of the window.
        #expect(progress.sentLastMinute > 0 && progress.sentLastMinute <= 5900, "\(progress.sentLastMinute)")
        #expect(progress.eta != nil)

        var times: [Double] = []
        for _ in 0..<3 {
            let plan = try c.query("EXPLAIN (ANALYZE, FORMAT JSON) SELECT * FROM herald.campaign_progress WHERE campaign_id = $1", [.int(id)])
            let json = try JSONValue.parse(try #require(plan[0, 0]))
            times.append(try #require(json.arrayValue?.first?["Execution Time"]?.doubleValue))
        }
        let median = times.sorted()[1]
        print("herald.campaign_progress of a campaign of 1,000,000 jobs: execution time \(times.map { String(format: "%.2f", $0) }.joined(separator: ", ")) ms (median \(String(format: "%.2f", median)) ms)")
        #expect(median < 100, "campaign_progress took \(median) ms")
    }
}
