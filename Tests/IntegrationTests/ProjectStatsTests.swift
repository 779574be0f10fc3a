import Foundation
import JSON
import Postgres
import Queue
import Testing
import TestSupport

/// The per-project view of `herald stats` (tables and --json) and of the dashboard (overview and
/// /api/projects): each registry project's pending jobs, dead letters, pause and rate, beside
/// the jobs of no project.
@Suite struct ProjectStatsTests {
    /// Two registered projects (beta paused by an operator, with a max rate), and jobs and dead
    /// letters of each and of no project.
    static func fill(_ f: DeadLetterFixture) throws {
        try f.connection.query("SELECT herald.add_project('alpha', 'alpha-fcm', '/secrets/alpha.json')")
        try f.connection.query("SELECT herald.add_project('beta', 'beta-fcm', 'env:BETA_KEY', max_rate => 50)")
        try f.connection.query("SELECT herald.pause_project_sending('beta', 'key rotation')")
        func jobs(_ n: Int, project: String?, runIn seconds: Int = 0) throws {
            try f.connection.query("""
                SELECT herald.enqueue(jsonb_build_object('token', 't' || g), run_at => now() + make_interval(secs => $3::int), project => $2)
                FROM generate_series(1, $1::int) AS g
                """, [.int(n), project.map { .text($0) }, .int(seconds)])
        }
        try jobs(5, project: "alpha")
        try jobs(2, project: "alpha", runIn: 3600)
        try jobs(3, project: "beta")
        try jobs(4, project: nil)
        try jobs(1, project: nil, runIn: 3600)
        // Running: claimed by a worker of alpha (a lease held).
        try f.connection.query("SELECT count(*) FROM herald.claim_batch(ARRAY['default'], 2, 60, 'test-worker', p_project => 'alpha')")
        for _ in 0..<2 { try f.add(reason: "INVALID_ARGUMENT: bad") }
        let beta = try f.add(reason: "INVALID_ARGUMENT: bad")
        try f.connection.query("UPDATE herald.dead_letters SET project = 'beta' WHERE id = $1", [.int(beta)])
        // alpha's FCM project sends at 120/s and is held back by a quota answer for a minute.
        try f.connection.query("INSERT INTO herald.project_rates (project_id, max_per_second, tokens, refilled_at) VALUES ('alpha-fcm', 120, 0, now())")
        try f.connection.query("INSERT INTO herald.project_pauses (project_id, paused_until, reason) VALUES ('alpha-fcm', now() + interval '1 hour', 'QUOTA_EXCEEDED')")
    }

    static func project(_ list: [JSONValue], _ name: String?) throws -> JSONValue {
        try #require(list.first { $0["project"]?.stringValue == name && (name != nil || $0["project"] == .null) }, "\(name ?? "null") in \(list)")
    }

    @Test func statsShowEachProjectsPendingJobsDeadLettersAndPause() throws {
        let f = try DeadLetterFixture()
        defer { f.close() }
        try Self.fill(f)
        let environment = ["DATABASE_URL": f.database.url]

        let plain = try HeraldProcess.run(["stats"], environment: environment, timeout: 60)
        #expect(plain.status == 0, "\(plain.output)")
        let lines = plain.output.split(separator: "\n").map(String.init)
        func row(_ first: String) -> [String]? {
            lines.map { $0.split(separator: " ", omittingEmptySubsequences: true).map(String.init) }.first { $0.first == first }
        }
        #expect(lines.contains { $0.hasPrefix("PROJECT") && $0.contains("AVAILABLE") && $0.contains("DEAD") }, "\(plain.output)")
        // PROJECT FCM-PROJECT STATE AVAILABLE SCHEDULED RUNNING DEAD MAX-RATE RATE-NOW
        let alphaRow = row("alpha") ?? []
        #expect(alphaRow.prefix(3) == ["alpha", "alpha-fcm", "enabled"] && alphaRow.suffix(6) == ["3", "2", "2", "0", "-", "120/s"], "\(plain.output)")
        #expect(alphaRow.count == 11 && alphaRow[3] == "(quota," && alphaRow[4].hasSuffix("s)"), "the quota pause beside the state: \(plain.output)")
        #expect(row("beta") == ["beta", "beta-fcm", "paused", "(operator)", "3", "0", "0", "1", "50/s", "-"], "the pause's cause beside it: \(plain.output)")
        #expect(row("-")?.suffix(7) == ["enabled", "4", "1", "0", "2", "-", "-"], "the jobs of no project: \(plain.output)")
        #expect(plain.output.contains("beta paused (operator): key rotation"))

        let json = try HeraldProcess.run(["stats", "--json"], environment: environment, timeout: 60)
        #expect(json.status == 0, "\(json.output)")
        let document = try JSONValue.parse(Array(json.output.utf8))
        let projects = try #require(document["projects"]?.arrayValue)
        #expect(projects.count == 3)
        let alpha = try Self.project(projects, "alpha"), beta = try Self.project(projects, "beta"), none = try Self.project(projects, nil)
        #expect(alpha["available"]?.intValue == 3 && alpha["scheduled"]?.intValue == 2 && alpha["running"]?.intValue == 2 && alpha["dead"]?.intValue == 0)
        #expect(alpha["state"]?.stringValue == "enabled" && alpha["fcm_project_id"]?.stringValue == "alpha-fcm")
        #expect(alpha["rate"]?.intValue == 120 && (alpha["quota_paused_seconds"]?.doubleValue ?? 0) > 3000, "\(alpha)")
        #expect(beta["rate"] == .null && beta["quota_paused_seconds"] == .null)
        #expect(beta["state"]?.stringValue == "paused" && beta["paused_reason"]?.stringValue == "key rotation" && beta["max_rate"]?.intValue == 50)
        #expect(beta["available"]?.intValue == 3 && beta["dead"]?.intValue == 1)
        #expect(none["available"]?.intValue == 4 && none["scheduled"]?.intValue == 1 && none["dead"]?.intValue == 2 && none["fcm_project_id"] == .null)
        // The queues' totals are the projects' sums.
        let queue = try #require(document["queues"]?.arrayValue?.first)
        #expect(queue["states"]?["available"]?.intValue == 10 && queue["dead"]?.intValue == 3, "\(queue)")
        #expect(try HeraldProcess.run(["stats", "--json", "--watch"], environment: environment, timeout: 60).status == 2)
    }

    @Test func aDeploymentWithoutProjectsShowsNoProjectTable() throws {
        let f = try DeadLetterFixture()
        defer { f.close() }
        try f.connection.query("SELECT herald.enqueue('{\"token\": \"t\"}')")
        let plain = try HeraldProcess.run(["stats"], environment: ["DATABASE_URL": f.database.url], timeout: 60)
        #expect(plain.status == 0 && !plain.output.contains("PROJECT"), "\(plain.output)")
        let json = try JSONValue.parse(Array(try HeraldProcess.run(["stats", "--json"], environment: ["DATABASE_URL": f.database.url], timeout: 60).output.utf8))
        #expect(json["projects"]?.arrayValue?.count == 1 && json["projects"]?.arrayValue?.first?["available"]?.intValue == 1)
    }

    @Test func theDashboardShowsEachProjectOnItsOverviewAndInItsAPI() throws {
        let stack = try DashboardStack()
        defer { stack.close() }
        try Self.fill(stack.fixture)
        let api = try stack.get("/api/projects", headers: stack.bearer)
        #expect(api.status == 200, "\(api.body)")
        let projects = try #require(try JSONValue.parse(Array(api.body.utf8))["projects"]?.arrayValue)
        let alpha = try Self.project(projects, "alpha"), beta = try Self.project(projects, "beta"), none = try Self.project(projects, nil)
        #expect(alpha["available"]?.intValue == 3 && alpha["running"]?.intValue == 2 && alpha["scheduled"]?.intValue == 2)
        #expect(beta["paused_reason"]?.stringValue == "key rotation" && beta["dead"]?.intValue == 1)
        #expect(none["available"]?.intValue == 4 && none["dead"]?.intValue == 2)
        #expect(try stack.get("/api/projects").status == 401, "the API needs the token")

        // The dashboard's /metrics: the same counts as gauges, the jobs of no project without a project label.
        let metrics = try stack.get("/metrics", headers: stack.bearer)
        #expect(metrics.status == 200)
        for line in ["herald_project_jobs{project=\"alpha\",state=\"available\"} 3", "herald_project_jobs{project=\"alpha\",state=\"running\"} 2",
                     "herald_project_jobs{project=\"alpha\",state=\"scheduled\"} 2", "herald_project_jobs{state=\"available\"} 4",
                     "herald_project_dead_letters{project=\"beta\"} 1", "herald_project_dead_letters 2",
                     "herald_project_paused{project=\"beta\"} 1", "herald_project_paused{project=\"alpha\"} 0"] {
            #expect(metrics.body.contains("\n" + line + "\n"), "\(line) in\n\(metrics.body)")
        }
        let lint = try promtoolCheckMetrics(metrics.body)
        #expect(lint.status == 0, "promtool check metrics: \(lint.output)")

        let page = try stack.get("/", headers: ["Cookie": try stack.login()])
        let table = try #require(page.body.range(of: "<table id=\"registry\">.*?</table>", options: .regularExpression).map { String(page.body[$0]) },
                                 "\(page.body)")
        let rows = table.components(separatedBy: "</tr>").map { $0.replacingOccurrences(of: "<[^>]+>", with: "|", options: .regularExpression) }
        func cells(_ row: String) -> [String] { row.split(separator: "|").map(String.init) }
        #expect(rows.map(cells).contains { $0.count == 9 && $0[0] == "alpha" && $0[2].hasPrefix("enabled (quota, ") && Array($0[3...]) == ["3", "2", "2", "0", "-", "120/s"] },
                "\(rows)")
        #expect(rows.map(cells).contains { $0.count == 9 && $0[0] == "beta" && $0[2].hasPrefix("paused (operator): key rotation; holds 3 due back, the oldest ")
                                           && Array($0[3...]) == ["3", "0", "0", "1", "50/s", "-"] }, "\(rows)")
        #expect(rows.map(cells).contains(["(none)", "the pools' key", "enabled", "4", "1", "0", "2", "-", "-"]), "\(rows)")
    }

    /// A job of a paused project waits for its project, not for the pools: the queue's age
    /// (/metrics, herald.queue_stats, herald stats) leaves it out, so HeraldBacklogAging does not
    /// blame queue default, and the project's pause gauges carry it with the cause, which
    /// HeraldProjectPausedJobsWaiting names. Once the project resumes, its jobs are the queue's again.
    @Test func jobsAPausedProjectHoldsBackAreMeasuredAsTheProjectsNotTheQueues() throws {
        let stack = try DashboardStack()
        defer { stack.close() }
        let c = stack.fixture.connection
        try c.query("SELECT herald.add_project('shop', 'shop-fcm', 'env:SHOP_KEY')")
        try c.query("SELECT herald.add_project('news', 'news-fcm', 'env:NEWS_KEY')")
        try c.query("SELECT herald.add_project('blog', 'blog-fcm', 'env:BLOG_KEY')")
        func jobs(_ n: Int, project: String?, minutesAgo: Int) throws {
            try c.query("""
                INSERT INTO herald.jobs (message, run_at, project)
                SELECT jsonb_build_object('token', 't' || g), now() - make_interval(mins => $3::int), $2
                FROM generate_series(1, $1::int) AS g
                """, [.int(n), project.map { .text($0) }, .int(minutesAgo)])
        }
        try jobs(3, project: "shop", minutesAgo: 20)   // its key refused, as a pool's worker records it
        try jobs(2, project: "news", minutesAgo: 30)   // held back by FCM's quota answer
        try jobs(1, project: "blog", minutesAgo: 2)    // enabled: the queue's own
        try jobs(1, project: nil, minutesAgo: 1)
        try Project.credentialsRefused(c, name: "shop", why: "environment variable SHOP_KEY is not set")
        try c.query("INSERT INTO herald.project_pauses (project_id, paused_until, reason) VALUES ('news-fcm', now() + interval '1 hour', 'QUOTA_EXCEEDED answered to w1')")

        let metrics = try stack.get("/metrics", headers: stack.bearer)
        #expect(metrics.status == 200)
        func value(_ series: String) -> Double? {
            metrics.body.split(separator: "\n").first { $0.hasPrefix(series + " ") }.flatMap { Double($0.split(separator: " ").last!) }
        }
        let queueAge = try #require(value("herald_oldest_available_age_seconds{queue=\"default\"}"), "\(metrics.body)")
        #expect(queueAge >= 110 && queueAge < 600, "the queue's age is blog's job's, 2 minutes, not shop's 20: \(queueAge)")
        #expect(metrics.body.contains("\nherald_jobs{queue=\"default\",state=\"available\"} 7\n"), "held jobs are still available ones")
        #expect(value("herald_project_paused_jobs{project=\"shop\",cause=\"credentials\"}") == 3, "\(metrics.body)")
        #expect(value("herald_project_paused_jobs{project=\"news\",cause=\"quota\"}") == 2, "\(metrics.body)")
        #expect(value("herald_project_paused_jobs{project=\"blog\"}") == 0, "\(metrics.body)")
        let shopAge = try #require(value("herald_project_paused_oldest_age_seconds{project=\"shop\",cause=\"credentials\"}"), "\(metrics.body)")
        #expect(shopAge >= 1190 && shopAge < 1500, "\(shopAge)")
        #expect((value("herald_project_paused_oldest_age_seconds{project=\"news\",cause=\"quota\"}") ?? 0) >= 1790)
        #expect(value("herald_project_paused_oldest_age_seconds{project=\"blog\"}") == 0)
        #expect(value("herald_project_paused{project=\"shop\"}") == 1)
        let lint = try promtoolCheckMetrics(metrics.body)
        #expect(lint.status == 0, "promtool check metrics: \(lint.output)")

        // The SQL view reads the same.
        let view = try c.query("SELECT extract(epoch FROM oldest_available_age)::float8 FROM herald.queue_stats WHERE queue = 'default' AND state = 'available'")
        let viewAge = try #require(view.double(0, 0))
        #expect(viewAge >= 110 && viewAge < 600, "herald.queue_stats: \(viewAge)")

        // herald stats: the queue's OLDEST AVAILABLE is the pools', the held jobs are named under their project.
        let environment = ["DATABASE_URL": stack.fixture.database.url]
        let plain = try HeraldProcess.run(["stats"], environment: environment, timeout: 60)
        #expect(plain.status == 0, "\(plain.output)")
        #expect(plain.output.contains("shop holds 3 due jobs back (credentials pause), the oldest waiting 20m"), "\(plain.output)")
        #expect(plain.output.contains("news holds 2 due jobs back (quota pause), the oldest waiting 30m"), "\(plain.output)")
        let json = try JSONValue.parse(Array(try HeraldProcess.run(["stats", "--json"], environment: environment, timeout: 60).output.utf8))
        let queue = try #require(json["queues"]?.arrayValue?.first)
        #expect((queue["oldest_available_age_seconds"]?.doubleValue ?? 0) < 600, "\(queue)")
        let shop = try Self.project(try #require(json["projects"]?.arrayValue), "shop")
        #expect(shop["pause_cause"]?.stringValue == "credentials" && shop["paused_jobs"]?.intValue == 3
                && (shop["paused_oldest_age_seconds"]?.doubleValue ?? 0) >= 1190, "\(shop)")

        // The key works again (a worker read it): shop's jobs are the queue's, and its age is theirs.
        #expect(try Project.credentialsRestored(c, name: "shop"))
        let after = try JSONValue.parse(Array(try HeraldProcess.run(["stats", "--json"], environment: environment, timeout: 60).output.utf8))
        #expect((after["queues"]?.arrayValue?.first?["oldest_available_age_seconds"]?.doubleValue ?? 0) >= 1190, "\(after)")
        let resumed = try Self.project(try #require(after["projects"]?.arrayValue), "shop")
        #expect(resumed["pause_cause"] == .null && resumed["paused_jobs"]?.intValue == 0, "\(resumed)")
    }

    /// An operator follows a project's dead letters from the overview: the count links to the
    /// dead-letters page filtered by the project, the page and the API list only that project's
    /// letters, and a retry of all matching ones replays those and no other project's.
    @Test func aProjectsDeadLettersAreListedAndRetriedByItself() throws {
        let stack = try DashboardStack()
        defer { stack.close() }
        try Self.fill(stack.fixture)
        let betaLetters = try stack.fixture.connection.query("SELECT id FROM herald.dead_letters WHERE project = 'beta'")
        let betaID = try #require(betaLetters.int(0, 0))
        let cookie = try stack.login()

        let overview = try stack.get("/", headers: ["Cookie": cookie])
        #expect(overview.body.contains("<a href=\"/dead-letters?project=beta\">1</a>"), "\(overview.body)")
        let page = try stack.get("/dead-letters?project=beta", headers: ["Cookie": cookie])
        #expect(page.status == 200)
        #expect(page.body.contains("id=\"dead-letter-\(betaID)\"") && page.body.components(separatedBy: "class=\"letter\"").count == 2, "\(page.body)")
        #expect(page.body.contains("<strong>1</strong> dead letter match"), "\(page.body)")

        let listed = try stack.get("/api/dead-letters?project=beta", headers: stack.bearer)
        #expect(listed.json?["dead_letters"]?.arrayValue?.compactMap { $0["id"]?.intValue } == [betaID], "\(listed.body)")

        var json = stack.bearer
        json["Content-Type"] = "application/json"
        let retried = try stack.post("/api/dead-letters/retry", headers: json, body: #"{"project": "beta"}"#)
        #expect(retried.status == 200 && retried.json?["retried"]?.intValue == 1, "\(retried.body)")
        let left = try stack.fixture.connection.query("SELECT count(*) FILTER (WHERE project = 'beta'), count(*) FROM herald.dead_letters")
        #expect(left.int(0, 0) == 0 && left.int(0, 1) == 2, "beta's letter replayed, the two of no project kept")
        let replayed = try stack.fixture.connection.query("SELECT project FROM herald.jobs WHERE id = (SELECT max(id) FROM herald.jobs)")
        #expect(replayed[0, 0] == "beta", "the replayed job keeps its project")
    }
}
