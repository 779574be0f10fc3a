import Dashboard
import Foundation
import JSON
import Postgres
import Queue
import Testing
import TestSupport

/// The dashboard's campaigns: the page with its buttons, the API, and the gauges on /metrics.
@Suite struct CampaignDashboardTests {
    static func campaign(_ c: PGConnection, _ name: String, jobs: Int) throws -> Int {
        let id = try c.query("SELECT herald.create_campaign($1)", [.text(name)]).int(0, 0)!
        try c.query("""
            INSERT INTO herald.jobs (message, queue, campaign_id)
            SELECT jsonb_build_object('token', 'd-' || g, 'notification', jsonb_build_object('title', 'hi')), 'campaigns', $1::bigint
            FROM generate_series(1, $2::int) AS g
            """, [.int(id), .int(jobs)])
        return id
    }

    static func complete(_ c: PGConnection, _ count: Int) throws {
        let store = JobStore(connection: c, workerID: "dashboard-test")
        let jobs = try store.claimer.claim(queues: ["campaigns"], limit: count, leaseSeconds: 60)
        try store.recorder.record(jobs.map { $0.outcome(.completed(messageName: nil)) })
    }

    static func state(_ c: PGConnection, _ id: Int) throws -> String? {
        try c.query("SELECT state FROM herald.campaigns WHERE id = $1", [.int(id)])[0, 0]
    }

    @Test func theAPIListsPausesResumesAndCancelsAndRefusesWhatItMust() throws {
        let stack = try DashboardStack()
        defer { stack.close() }
        let c = stack.fixture.connection
        let first = try Self.campaign(c, "winter", jobs: 10)
        let second = try Self.campaign(c, "spring", jobs: 5)

        #expect(try stack.get("/api/campaigns").status == 401)
        #expect(try stack.post("/api/campaigns/\(first)/pause").status == 401)
        #expect(try stack.post("/api/campaigns/\(first)/pause", headers: ["Authorization": "Bearer wrong-token-0000000"]).status == 401)
        #expect(try Self.state(c, first) == "scheduled")

        let list = try stack.get("/api/campaigns", headers: stack.bearer)
        #expect(list.status == 200)
        let campaigns = list.json?["campaigns"]?.arrayValue ?? []
        #expect(campaigns.compactMap { $0["id"]?.intValue } == [second, first], "newest first: \(list.body)")
        #expect(campaigns.last?["total"]?.intValue == 10 && campaigns.last?["pending"]?.intValue == 10
                && campaigns.last?["state"]?.stringValue == "scheduled" && campaigns.last?["sent_last_minute"]?.intValue == 0)
        #expect(try stack.get("/api/campaigns?limit=1", headers: stack.bearer).json?["campaigns"]?.arrayValue?.count == 1)
        #expect(try stack.get("/api/campaigns/\(first)", headers: stack.bearer).json?["name"]?.stringValue == "winter")

        var answer = try stack.post("/api/campaigns/\(first)/pause", headers: stack.bearer)
        #expect(answer.status == 200 && answer.json?["changed"]?.boolValue == true
                && answer.json?["campaign"]?["state"]?.stringValue == "paused", "\(answer.body)")
        #expect(try Self.state(c, first) == "paused")
        answer = try stack.post("/api/campaigns/\(first)/pause", headers: stack.bearer)
        #expect(answer.status == 200 && answer.json?["changed"]?.boolValue == false, "paused already: \(answer.body)")
        answer = try stack.post("/api/campaigns/\(first)/resume", headers: stack.bearer)
        #expect(answer.status == 200 && answer.json?["campaign"]?["state"]?.stringValue == "scheduled", "\(answer.body)")
        answer = try stack.post("/api/campaigns/\(first)/cancel", headers: stack.bearer)
        #expect(answer.status == 200 && answer.json?["cancelled_jobs"]?.intValue == 10
                && answer.json?["campaign"]?["cancelled"]?.intValue == 10, "\(answer.body)")
        #expect(try stack.fixture.count("SELECT count(*) FROM herald.jobs WHERE campaign_id = $1 AND state = 'cancelled'", [.int(first)]) == 10)

        let log = try AdminLog.recent(c, limit: 10)
        #expect(log.map(\.action) == ["cancel_campaign", "resume_campaign", "pause_campaign"], "the repeated pause is not an action done")
        #expect(log.allSatisfy { $0.ids == [first] && $0.source.hasPrefix("dashboard 127.0.0.1:") })

        // Refusals: named, with the status they deserve, and nothing changed.
        let before = [try stack.fixture.count("SELECT count(*) FROM herald.admin_log"),
                      try stack.fixture.count("SELECT count(*) FROM herald.jobs WHERE state = 'cancelled'")]
        func expect(_ answer: CurlResult, _ status: Int, _ words: String, _ comment: Comment) {
            #expect(answer.status == status, "\(comment): \(answer.status) \(answer.body)")
            #expect(answer.json?["error"]?.stringValue?.contains(words) == true, "\(comment): \(answer.body)")
            #expect(!answer.body.contains("CONTEXT") && !answer.body.contains("SQLSTATE"), "\(comment): no PostgreSQL noise")
        }
        expect(try stack.post("/api/campaigns/\(first)/resume", headers: stack.bearer), 409,
               "campaign \(first) (winter) was cancelled and cannot be resumed", "resuming a cancelled campaign")
        expect(try stack.post("/api/campaigns/\(first)/pause", headers: stack.bearer), 409, "there is nothing left to pause", "pausing a cancelled campaign")
        for action in ["pause", "resume", "cancel"] {
            expect(try stack.post("/api/campaigns/424242/\(action)", headers: stack.bearer), 404, "no campaign with id 424242", "unknown id")
        }
        expect(try stack.get("/api/campaigns/424242", headers: stack.bearer), 404, "no campaign with id 424242", "unknown id")
        expect(try stack.get("/api/campaigns?limit=abc", headers: stack.bearer), 400, "limit must be a whole number", "limit")
        #expect(try stack.post("/api/campaigns/abc/pause", headers: stack.bearer).status == 404, "not an id")
        #expect(try stack.get("/api/campaigns/\(second)/pause", headers: stack.bearer).status == 405, "a GET changes nothing")
        #expect([try stack.fixture.count("SELECT count(*) FROM herald.admin_log"),
                 try stack.fixture.count("SELECT count(*) FROM herald.jobs WHERE state = 'cancelled'")] == before)
        #expect(try Self.state(c, second) == "scheduled")
    }

    @Test func thePageShowsProgressAndItsButtonsWantASessionAndTheCSRFToken() throws {
        let stack = try DashboardStack()
        defer { stack.close() }
        let c = stack.fixture.connection
        let id = try Self.campaign(c, "autumn <sale>", jobs: 10)
        try Self.complete(c, 5)

        #expect(try stack.get("/campaigns").status == 303, "a browser without a session logs in first")
        let cookie = try stack.login()
        var page = try stack.get("/campaigns", headers: ["Cookie": cookie])
        #expect(page.status == 200 && page.body.contains("id=\"campaign-\(id)\""), "\(page.body)")
        #expect(page.body.contains("autumn &lt;sale&gt;") && !page.body.contains("autumn <sale>"), "names are escaped")
        #expect(page.body.contains("style=\"width:50.000%;background:#3b6fd8\""), "half the bar is completed: \(page.body)")
        #expect(page.body.contains("50.0 %") && page.body.contains("5 of 10 done") && page.body.contains("5 sent in the ") && page.body.contains(" s since it started"))
        #expect(page.body.contains("action=\"/campaigns/\(id)/pause\"") && page.body.contains("action=\"/campaigns/\(id)/cancel\""))
        #expect(!page.body.contains("action=\"/campaigns/\(id)/resume\""), "a running campaign has nothing to resume")

        let csrf = try stack.csrf(cookie)
        let form = ["Cookie": cookie, "Content-Type": "application/x-www-form-urlencoded"]
        var refused = try stack.post("/campaigns/\(id)/pause", headers: form, body: "")
        #expect(refused.status == 403 && refused.body.contains("CSRF"), "missing CSRF")
        refused = try stack.post("/campaigns/\(id)/pause", headers: form, body: "csrf=\(csrf)x")
        #expect(refused.status == 403, "wrong CSRF")
        refused = try stack.post("/campaigns/\(id)/cancel", headers: form.merging(["Origin": "https://evil.example"]) { $1 }, body: "csrf=\(csrf)")
        #expect(refused.status == 403 && refused.body.contains("another site"), "foreign Origin")
        refused = try stack.post("/campaigns/\(id)/cancel", headers: ["Content-Type": "application/x-www-form-urlencoded"], body: "csrf=\(csrf)")
        #expect(refused.status == 303 && refused.headers["location"]?.hasPrefix("/login") == true, "no session")
        #expect(try Self.state(c, id) == "running")
        #expect(try stack.fixture.count("SELECT count(*) FROM herald.admin_log") == 0)

        let paused = try stack.post("/campaigns/\(id)/pause", headers: form, body: "csrf=\(csrf)")
        let location = try #require(paused.headers["location"])
        #expect(paused.status == 303 && location == "/campaigns?done=paused&id=\(id)#campaign-\(id)", "\(location)")
        #expect(try Self.state(c, id) == "paused")
        page = try stack.get("/campaigns?done=paused&id=\(id)", headers: ["Cookie": cookie])
        #expect(page.body.contains("Paused campaign \(id).") && page.body.contains("paused with herald.pause_campaign"))
        #expect(page.body.contains("action=\"/campaigns/\(id)/resume\"") && !page.body.contains("action=\"/campaigns/\(id)/pause\""))

        let cancelled = try stack.post("/campaigns/\(id)/cancel", headers: form, body: "csrf=\(csrf)")
        let after = try #require(cancelled.headers["location"])
        #expect(after.contains("done=cancelled") && after.contains("count=5"), "\(after)")
        page = try stack.get(after, headers: ["Cookie": cookie])
        #expect(page.body.contains("Cancelled campaign \(id): 5 jobs cancelled."))
        #expect(!page.body.contains("action=\"/campaigns/\(id)/"), "a cancelled campaign has no buttons")

        let resume = try stack.post("/campaigns/\(id)/resume", headers: form, body: "csrf=\(csrf)")
        #expect(resume.status == 409 && resume.body.contains("was cancelled and cannot be resumed"), "\(resume.body)")
        let unknown = try stack.post("/campaigns/424242/pause", headers: form, body: "csrf=\(csrf)")
        #expect(unknown.status == 404 && unknown.body.contains("no campaign with id 424242"))
        #expect(try AdminLog.recent(c, limit: 10).map(\.action) == ["cancel_campaign", "pause_campaign"])
    }

    @Test func withoutATokenThePageIsReadOnly() throws {
        let stack = try DashboardStack(token: nil)
        defer { stack.close() }
        let c = stack.fixture.connection
        let id = try Self.campaign(c, "read-only", jobs: 3)
        let page = try stack.get("/campaigns")
        #expect(page.status == 200 && page.body.contains("campaign-\(id)") && page.body.contains("Read-only"))
        #expect(page.body.contains("disabled title=\"read-only"), "the buttons are shown disabled")
        for path in ["/campaigns/\(id)/pause", "/campaigns/\(id)/cancel", "/api/campaigns/\(id)/pause", "/api/campaigns/\(id)/cancel"] {
            let answer = try stack.post(path)
            #expect(answer.status == 403 && answer.body.contains("HERALD_DASHBOARD_TOKEN"), "\(path): \(answer.status)")
        }
        #expect(try stack.get("/api/campaigns").json?["campaigns"]?.arrayValue?.count == 1)
        #expect(try Self.state(c, id) == "scheduled")
        #expect(try stack.fixture.count("SELECT count(*) FROM herald.jobs WHERE state = 'cancelled'") == 0)
    }

    @Test func metricsLabelAtMostFiftyCampaignsThatAreNotLongOver() throws {
        let stack = try DashboardStack()
        defer { stack.close() }
        let c = stack.fixture.connection
        try c.query("SELECT herald.create_campaign('bulk-' || g) FROM generate_series(1, 55) AS g")
        let quoted = try Self.campaign(c, #"with "jobs""#, jobs: 3)
        try Self.complete(c, 1)
        let old = try c.query("SELECT herald.create_campaign('long-over')").int(0, 0)!
        try c.query("UPDATE herald.campaigns SET state = 'finished', finished_at = now() - interval '2 days' WHERE id = $1", [.int(old)])
        let recent = try c.query("SELECT herald.create_campaign('cancelled-lately')").int(0, 0)!
        try c.query("SELECT herald.cancel_campaign($1)", [.int(recent)])

        let answer = try stack.get("/metrics", headers: stack.bearer)
        #expect(answer.status == 200)
        let text = answer.body
        let lines = text.split(separator: "\n").map(String.init)
        let labelled = Set(lines.filter { $0.hasPrefix("herald_campaign_jobs{") }.compactMap { line -> String? in
            guard let start = line.range(of: "campaign=\""), let end = line.range(of: "\",state=") else { return nil }
            return String(line[start.upperBound..<end.lowerBound])
        })
        #expect(labelled.count == 50, "at most 50 campaigns labelled: \(labelled.count)")
        #expect(!labelled.contains("long-over"), "finished more than a day ago")
        #expect(!labelled.contains("cancelled-lately") && !labelled.contains("bulk-1"), "unfinished ones first, then the newest")
        #expect(labelled.contains("bulk-55") && labelled.contains("bulk-7") && !labelled.contains("bulk-6"))
        #expect(text.contains("herald_campaigns_unlabelled 7"), "55 + 1 + the lately cancelled one qualify, 50 are shown")
        #expect(text.contains(#"herald_campaign_jobs{campaign="with \"jobs\"",state="pending"} 2"#), "\(text)")
        #expect(text.contains(#"herald_campaign_jobs{campaign="with \"jobs\"",state="completed"} 1"#))
        #expect(text.contains(#"herald_campaign_state{campaign="with \"jobs\"",state="running"} 1"#))
        #expect(text.contains(#"herald_campaign_sent_last_minute{campaign="with \"jobs\""} 1"#))
        #expect(lines.filter { $0.hasPrefix("herald_campaign") }.count == 50 * (6 + 1 + 5) + 1, "a bounded number of series")
        let check = try promtoolCheckMetrics(text)
        #expect(check.status == 0, "promtool check metrics: \(check.output)")
        _ = quoted
    }
}
