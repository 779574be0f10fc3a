import Foundation
import JSON
import Postgres
import Queue
import Testing
import TestSupport

/// `herald campaigns` and `herald queues` as a user runs them: the real binary against a real
/// PostgreSQL.
@Suite struct CampaignCommandTests {
    struct Fixture {
        let database: FreshDatabase
        let connection: PGConnection
        init() throws {
            database = try TestDatabase.fresh()
            connection = try database.connect()
        }
        func close() { database.drop() }

        func herald(_ arguments: [String]) throws -> (status: Int32?, output: String) {
            try HeraldProcess.run(arguments, environment: ["DATABASE_URL": database.url], timeout: 60)
        }

        func count(_ sql: String, _ parameters: [PGValue?] = []) throws -> Int {
            try connection.query(sql, parameters).int(0, 0) ?? -1
        }

        func state(_ id: Int) throws -> String? {
            try connection.query("SELECT state FROM herald.campaigns WHERE id = $1", [.int(id)])[0, 0]
        }

        /// A campaign of `jobs` due jobs in queue `campaigns`.
        func campaign(_ name: String, jobs: Int, maxPerSecond: Double? = nil) throws -> Int {
            let id = try connection.query("SELECT herald.create_campaign($1, max_per_second => $2::float8, analytics_label => $3)",
                                          [.text(name), maxPerSecond.map { .double($0) }, .text(name)]).int(0, 0)!
            try connection.query("""
                INSERT INTO herald.jobs (message, queue, campaign_id)
                SELECT jsonb_build_object('token', $1 || '-' || g, 'notification', jsonb_build_object('title', 'hi')), 'campaigns', $2::bigint
                FROM generate_series(1, $3::int) AS g
                """, [.text(name), .int(id), .int(jobs)])
            return id
        }

        /// Claims up to `count` of the campaign's jobs and records them completed.
        func complete(_ count: Int, of id: Int) throws {
            let store = JobStore(connection: connection, workerID: "command-test")
            let jobs = try store.claimer.claim(queues: ["campaigns"], limit: count, leaseSeconds: 60)
            #expect(jobs.allSatisfy { $0.campaignID == id })
            try store.recorder.record(jobs.map { $0.outcome(.completed(messageName: "projects/p/messages/\($0.id)")) })
        }
    }

    /// What PostgreSQL adds around a RAISE: none of it reaches the user.
    static func expectNoDatabaseNoise(_ output: String, _ comment: Comment) {
        for noise in ["CONTEXT", "SQLSTATE", "ERROR:", "PL/pgSQL"] {
            #expect(!output.contains(noise), "\(comment): \(output)")
        }
    }

    @Test func listShowPauseResumeAndCancelACampaign() throws {
        let f = try Fixture()
        defer { f.close() }
        let id = try f.campaign("winter-sale", jobs: 10, maxPerSecond: 500)

        var run = try f.herald(["campaigns", "list"])
        #expect(run.status == 0, "\(run.output)")
        let row = run.output.split(separator: "\n").first { $0.contains("winter-sale") }.map(String.init) ?? ""
        #expect(row.hasPrefix("\(id)") || row.hasPrefix(" \(id)"), "\(run.output)")
        #expect(row.contains("scheduled") && row.contains("0.0%") && row.contains("10"), "\(run.output)")

        try f.complete(4, of: id)
        run = try f.herald(["campaigns", "show", String(id)])
        #expect(run.status == 0, "\(run.output)")
        #expect(run.output.contains("[################........................]  40.0%  4 of 10 done"), "\(run.output)")
        #expect(run.output.contains("pending 6  running 0  completed 4"), "\(run.output)")
        // The campaign's first claim was a moment ago: its rate is over that moment, not a minute.
        #expect(run.output.contains("rate: 4 sent in the ") && run.output.contains(" s since it started") && run.output.contains("ETA 20"),
                "\(run.output)")
        #expect(run.output.contains("at most 500/s") && run.output.contains("label winter-sale"), "\(run.output)")

        run = try f.herald(["campaigns", "show", String(id), "--json"])
        let shown = try JSONValue.parse(run.output.trimmingCharacters(in: .whitespacesAndNewlines))
        #expect(shown["id"]?.intValue == id && shown["state"]?.stringValue == "running" && shown["completed"]?.intValue == 4
                && shown["pending"]?.intValue == 6 && shown["max_per_second"]?.intValue == 500, "\(run.output)")
        run = try f.herald(["campaigns", "list", "--json"])
        #expect(try JSONValue.parse(run.output.trimmingCharacters(in: .whitespacesAndNewlines)).arrayValue?.compactMap { $0["name"]?.stringValue } == ["winter-sale"])

        run = try f.herald(["campaigns", "pause", String(id)])
        #expect(run.status == 0 && run.output.contains("paused campaign \(id) (winter-sale)"), "\(run.output)")
        #expect(try f.state(id) == "paused")
        #expect(try JobStore(connection: f.connection).claimer.claim(queues: [], limit: 10, leaseSeconds: 60).isEmpty, "a paused campaign's jobs wait")
        run = try f.herald(["campaigns", "pause", String(id)])
        #expect(run.status == 0 && run.output.contains("was paused already"), "\(run.output)")
        run = try f.herald(["campaigns", "show", String(id)])
        #expect(run.output.contains("paused: paused with herald.pause_campaign") && run.output.contains("ETA: none while paused"), "\(run.output)")

        run = try f.herald(["campaigns", "resume", String(id)])
        #expect(run.status == 0 && run.output.contains("resumed campaign \(id) (winter-sale); it is running"), "\(run.output)")
        #expect(try f.state(id) == "running")

        run = try f.herald(["campaigns", "cancel", String(id)])
        #expect(run.status == 0 && run.output.contains("cancelled campaign \(id) (winter-sale): 6 jobs cancelled"), "\(run.output)")
        #expect(try f.count("SELECT count(*) FROM herald.jobs WHERE campaign_id = $1 AND state = 'cancelled'", [.int(id)]) == 6)

        let log = try AdminLog.recent(f.connection, limit: 10)
        #expect(log.map(\.action) == ["cancel_campaign", "resume_campaign", "pause_campaign"], "the repeated pause changed nothing and is not logged")
        #expect(log.allSatisfy { $0.ids == [id] && $0.source.hasPrefix("shell ") })
        #expect(log[0].details["cancelled_jobs"]?.intValue == 6 && log[0].details["campaign"]?.stringValue == "winter-sale")

        // A cancelled campaign cannot be resumed: the SQL's own words, nothing changed.
        run = try f.herald(["campaigns", "resume", String(id)])
        #expect(run.status == 2, "\(run.output)")
        #expect(run.output.contains("herald campaigns resume: campaign \(id) (winter-sale) was cancelled and cannot be resumed; create a new one"), "\(run.output)")
        Self.expectNoDatabaseNoise(run.output, "resume of a cancelled campaign")
        #expect(try f.state(id) == "cancelled")
        #expect(try f.count("SELECT count(*) FROM herald.admin_log") == 3)
    }

    @Test func badIdsAreNamedAndChangeNothing() throws {
        let f = try Fixture()
        defer { f.close() }
        let id = try f.campaign("spring", jobs: 3)
        for action in ["show", "pause", "resume", "cancel"] {
            let run = try f.herald(["campaigns", action, "424242"])
            #expect(run.status == 2, "\(action): \(run.output)")
            #expect(run.output.contains("herald campaigns \(action): no campaign with id 424242"), "\(action): \(run.output)")
            #expect(run.output.contains("herald campaigns list shows the ids"), "\(action): \(run.output)")
            Self.expectNoDatabaseNoise(run.output, "\(action) of an unknown id")
        }
        for (arguments, words) in [(["campaigns", "pause", "abc"], "\"abc\" is not a campaign id"),
                                   (["campaigns", "cancel", "-3"], "\"-3\" is not a campaign id"),
                                   (["campaigns", "cancel", "0"], "\"0\" is not a campaign id"),
                                   (["campaigns", "pause"], "give one campaign id"),
                                   (["campaigns", "pause", "1", "2"], "give one campaign id"),
                                   (["campaigns"], "give an action"),
                                   (["campaigns", "stop", "1"], "give an action"),
                                   (["campaigns", "pause", String(id), "--watch"], "--watch applies to show only"),
                                   (["campaigns", "show", String(id), "--watch", "--interval", "0"], "--interval must be at least 0.1")] {
            let run = try f.herald(arguments)
            #expect(run.status == 2 && run.output.contains(words), "\(arguments): \(run.output)")
        }
        let run = try HeraldProcess.run(["campaigns", "list"], environment: [:], timeout: 30)
        #expect(run.status == 2 && run.output.contains("set DATABASE_URL"), "\(run.output)")
        #expect(try f.state(id) == "scheduled")
        #expect(try f.count("SELECT count(*) FROM herald.jobs WHERE campaign_id = $1 AND state = 'available'", [.int(id)]) == 3)
        #expect(try f.count("SELECT count(*) FROM herald.admin_log") == 0)
    }

    @Test func showWatchRedrawsInPlaceUntilTheCampaignIsFinished() throws {
        let f = try Fixture()
        defer { f.close() }
        let id = try f.campaign("watched", jobs: 3)
        let watch = try HeraldProcess(["campaigns", "show", String(id), "--watch", "--interval", "0.2"], environment: ["DATABASE_URL": f.database.url])
        try watch.start()
        #expect(waitUntil(timeout: 30) { watch.output.contains("0 of 3 done") }, "\(watch.output)")
        try f.complete(3, of: id)
        let status = watch.wait(timeout: 30)
        #expect(status == 0, "it stops by itself once the campaign is finished: \(watch.output)")
        let output = watch.output
        #expect(output.components(separatedBy: "\u{1B}[H").count >= 3, "at least two frames drawn from the top: \(output)")
        #expect(output.contains("\u{1B}[K") && output.contains("\u{1B}[J"))
        #expect(output.contains("[########################################] 100.0%  3 of 3 done"), "\(output)")
        #expect(output.contains("watched  finished"), "\(output)")
        // For scripts: one JSON object per line, no terminal codes; a finished campaign ends it at once.
        let json = try f.herald(["campaigns", "show", String(id), "--watch", "--json"])
        #expect(json.status == 0 && !json.output.contains("\u{1B}"), "\(json.output)")
        #expect(try JSONValue.parse(json.output.trimmingCharacters(in: .whitespacesAndNewlines))["state"]?.stringValue == "finished")
    }

    @Test func queuesPauseResumeAndLimits() throws {
        let f = try Fixture()
        defer { f.close() }
        let c = f.connection
        try c.query("INSERT INTO herald.jobs (message, queue) SELECT jsonb_build_object('token', 'q-' || g), 'marketing' FROM generate_series(1, 5) AS g")
        try c.query("INSERT INTO herald.jobs (message) VALUES ('{\"token\": \"d\"}')")

        var run = try f.herald(["queues", "pause", "marketing"])
        #expect(run.status == 0 && run.output.contains("paused queue marketing"), "\(run.output)")
        let claimed = try JobStore(connection: c).claimer.claim(queues: [], limit: 100, leaseSeconds: 60)
        #expect(claimed.map(\.queue) == ["default"], "nothing of a paused queue is claimed")
        run = try f.herald(["queues", "list"])
        let line = run.output.split(separator: "\n").first { $0.hasPrefix("marketing") }.map(String.init) ?? ""
        #expect(line.contains("yes") && line.contains("5"), "\(run.output)")
        run = try f.herald(["queues", "pause", "marketing"])
        #expect(run.status == 0 && run.output.contains("was paused already"))
        run = try f.herald(["queues", "resume", "marketing"])
        #expect(run.status == 0 && run.output.contains("resumed queue marketing"), "\(run.output)")
        #expect(try JobStore(connection: c).claimer.claim(queues: [], limit: 100, leaseSeconds: 60).count == 5)

        run = try f.herald(["queues", "limits", "marketing", "--max-per-second", "500"])
        #expect(run.status == 0 && run.output.contains("queue marketing: max_per_second 500, max_in_flight none"), "\(run.output)")
        run = try f.herald(["queues", "limits", "marketing", "--max-in-flight", "20"])
        #expect(run.output.contains("max_per_second 500, max_in_flight 20"), "a limit not named is kept: \(run.output)")
        run = try f.herald(["queues", "limits", "marketing", "--max-per-second", "none", "--max-in-flight", "7"])
        #expect(run.output.contains("max_per_second none, max_in_flight 7"), "\(run.output)")
        #expect(try f.count("SELECT count(*) FROM herald.queues WHERE name = 'marketing' AND max_per_second IS NULL AND max_in_flight = 7 AND NOT paused") == 1)
        run = try f.herald(["queues", "list", "--json"])
        let queues = try JSONValue.parse(run.output.trimmingCharacters(in: .whitespacesAndNewlines)).arrayValue ?? []
        let marketing = queues.first { $0["queue"]?.stringValue == "marketing" }
        #expect(marketing?["max_in_flight"]?.intValue == 7 && marketing?["running"]?.intValue == 5 && marketing?["paused"]?.boolValue == false, "\(run.output)")

        run = try f.herald(["queues", "limits", "newsletters", "--max-per-second", "50"])
        #expect(run.status == 0 && run.output.contains("no job or dead letter has used queue newsletters yet"), "a new name is pointed out: \(run.output)")

        let log = try AdminLog.recent(c, limit: 10)
        #expect(log.map(\.action) == ["set_queue_limits", "set_queue_limits", "set_queue_limits", "set_queue_limits", "resume_queue", "pause_queue"])
        #expect(log[1].details["before"]?["max_per_second"]?.intValue == 500 && log[1].details["max_in_flight"]?.intValue == 7)

        // Bad input: named, refused, nothing changed.
        let before = try f.count("SELECT count(*) FROM herald.admin_log")
        for (arguments, words) in [
            (["queues", "limits", "marketing", "--max-per-second", "0"], "--max-per-second \"0\" is not a number of messages per second more than 0"),
            (["queues", "limits", "marketing", "--max-per-second=-5"], "--max-per-second \"-5\""),
            (["queues", "limits", "marketing", "--max-per-second", "fast"], "--max-per-second \"fast\""),
            (["queues", "limits", "marketing", "--max-in-flight", "0"], "--max-in-flight \"0\" is not a whole number of at least 1"),
            (["queues", "limits", "marketing", "--max-in-flight", "2.5"], "--max-in-flight \"2.5\""),
            (["queues", "limits", "marketing"], "give --max-per-second N and/or --max-in-flight N"),
            (["queues", "pause", "marketing", "--max-in-flight", "3"], "apply to limits only"),
            (["queues", "pause"], "give one queue name"),
            (["queues", "pause", ""], "the queue name is empty"),
        ] {
            let run = try f.herald(arguments)
            #expect(run.status == 2 && run.output.contains(words), "\(arguments): \(run.output)")
        }
        for action in ["pause", "resume"] {
            let run = try f.herald(["queues", action, "nope"])
            #expect(run.status == 2 && run.output.contains("herald queues \(action): no queue named \"nope\""), "\(run.output)")
            Self.expectNoDatabaseNoise(run.output, "\(action) of an unknown queue")
        }
        #expect(try f.count("SELECT count(*) FROM herald.admin_log") == before)
        #expect(try f.count("SELECT count(*) FROM herald.queues WHERE name = 'marketing' AND max_per_second IS NULL AND max_in_flight = 7 AND NOT paused") == 1)
        #expect(try f.count("SELECT count(*) FROM herald.queues WHERE name = 'nope'") == 0)
    }
}
