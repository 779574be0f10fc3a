import Dashboard
import Foundation
import JSON
import Postgres
import Queue
import Testing
import TestSupport

/// A dashboard on a free loopback port over a fixture database, stopped by `close()`.
struct DashboardStack {
    static let token = "test-token-4f8a1c2e9b7d6a5f3e0c"
    let fixture: DeadLetterFixture
    let dashboard: Dashboard

    init(token: String? = DashboardStack.token, configure: (inout DashboardConfiguration) -> Void = { _ in }) throws {
        fixture = try DeadLetterFixture()
        var configuration = DashboardConfiguration(databaseURL: fixture.database.url, host: "127.0.0.1", port: 0, token: token)
        configure(&configuration)
        dashboard = Dashboard(configuration: configuration)
        try dashboard.start()
    }

    func close() {
        dashboard.stop()
        fixture.close()
    }

    var url: String { dashboard.baseURL }

    func get(_ path: String, headers: [String: String] = [:]) throws -> CurlResult {
        try curl(url + path, headers: headers, over: .http1)
    }

    func post(_ path: String, headers: [String: String] = [:], body: String = "") throws -> CurlResult {
        try curl(url + path, method: "POST", headers: headers, body: body, over: .http1)
    }

    var bearer: [String: String] { ["Authorization": "Bearer \(Self.token)"] }

    /// Logs in through the form and returns the session cookie (`herald_session=...`).
    func login() throws -> String {
        let answer = try post("/login", headers: ["Content-Type": "application/x-www-form-urlencoded"],
                              body: "token=\(Self.token)&next=%2Fdead-letters")
        #expect(answer.status == 303 && answer.headers["location"] == "/dead-letters")
        let cookie = try #require(answer.headers["set-cookie"])
        return String(try #require(cookie.split(separator: ";").first))
    }

    /// The CSRF token the pages' forms carry for this session.
    func csrf(_ cookie: String) throws -> String {
        let page = try get("/dead-letters", headers: ["Cookie": cookie])
        let marker = "name=\"csrf\" value=\""
        let start = try #require(page.body.range(of: marker), "\(page.body)")
        return String(page.body[start.upperBound...].prefix { $0 != "\"" })
    }

    /// Rows of herald.dead_letters and herald.admin_log, to show that a refused request changed nothing.
    func state() throws -> [Int] {
        [try fixture.count("SELECT count(*) FROM herald.dead_letters"), try fixture.count("SELECT count(*) FROM herald.jobs"),
         try fixture.count("SELECT count(*) FROM herald.admin_log")]
    }
}

/// Pipes `text` into `promtool check metrics` and returns (status, output).
func promtoolCheckMetrics(_ text: String) throws -> (status: Int32, output: String) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = ["promtool", "check", "metrics"]
    let input = Pipe(), output = Pipe()
    process.standardInput = input
    process.standardOutput = output
    process.standardError = output
    do { try process.run() } catch {
        throw TestFailure("promtool is not installed (Debian package prometheus; see .ci/install-deps): \(error)")
    }
    input.fileHandleForWriting.write(Data(text.utf8))
    try input.fileHandleForWriting.close()
    let data = output.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return (process.terminationStatus, String(decoding: data, as: UTF8.self))
}

@Suite struct DashboardAccessTests {
    @Test func withoutATokenEverythingIsReadableAndNothingChanges() throws {
        let stack = try DashboardStack(token: nil)
        defer { stack.close() }
        let id = try stack.fixture.add(queue: "alerts", reason: "THIRD_PARTY_AUTH_ERROR: expired")
        let before = try stack.state()

        let overview = try stack.get("/")
        #expect(overview.status == 200 && overview.body.contains("alerts") && overview.body.contains("Read-only"))
        #expect(try stack.get("/dead-letters").body.contains("THIRD_PARTY_AUTH_ERROR: expired"))
        let api = try stack.get("/api/dead-letters")
        #expect(api.status == 200 && api.json?["dead_letters"]?.arrayValue?.first?["id"]?.intValue == id)

        for path in ["/api/dead-letters/\(id)/retry", "/api/dead-letters/\(id)/discard", "/dead-letters/\(id)/retry", "/dead-letters/retry"] {
            let answer = try stack.post(path, body: "{\"all\": true}")
            #expect(answer.status == 403, "\(path): \(answer.status)")
            #expect(answer.body.contains("HERALD_DASHBOARD_TOKEN"), "\(path) says how to enable actions")
        }
        #expect(try stack.state() == before)
        // A GET never changes anything, whatever its path says.
        #expect(try stack.get("/api/dead-letters/\(id)/retry").status == 405)
        #expect(try stack.state() == before)
    }

    @Test func theOverviewShowsAProjectsLoweredRateAndPause() throws {
        let stack = try DashboardStack(token: nil)
        defer { stack.close() }
        #expect(!(try stack.get("/").body.contains("FCM projects")), "nothing while FCM never refused")
        try stack.fixture.connection.query("""
            INSERT INTO herald.project_rates (project_id, max_per_second, tokens, refilled_at, adapted_per_second, adapted_at,
                                              regain_per_second)
            VALUES ('shop-prod', 310, 0, now(), 280, now() - interval '12 seconds', 1450)
            """)
        try stack.fixture.connection.query("""
            INSERT INTO herald.project_pauses (project_id, paused_until, reason) VALUES ('shop-prod', now() + interval '10 minutes', 'QUOTA_EXCEEDED answered to w1')
            """)
        let page = try stack.get("/").body
        #expect(page.contains("FCM projects") && page.contains("shop-prod") && page.contains("310/s") && page.contains("280/s")
                && page.contains("1450/s"), "\(page)")
        #expect(page.contains("QUOTA_EXCEEDED answered to w1"))
        let stats = try HeraldProcess.run(["stats"], environment: ["DATABASE_URL": stack.fixture.database.url], timeout: 60)
        let line = stats.output.split(separator: "\n").first { $0.hasPrefix("shop-prod") }.map(String.init) ?? ""
        #expect(line.contains("310/s") && line.contains("280/s") && line.contains("ago") && line.contains("for "), "herald stats: \(stats.output)")
        #expect(stats.output.contains("REGAINS") && line.contains("1450/s"), "herald stats: \(stats.output)")
    }

    @Test func theAPIWantsTheBearerToken() throws {
        let stack = try DashboardStack()
        defer { stack.close() }
        let id = try stack.fixture.add(reason: "INTERNAL: x")
        let before = try stack.state()
        for path in ["/api/queues", "/api/dead-letters", "/metrics", "/api/jobs/1"] {
            let missing = try stack.get(path)
            #expect(missing.status == 401 && missing.headers["www-authenticate"]?.hasPrefix("Bearer") == true, "\(path)")
            #expect(missing.json?["error"]?.stringValue?.contains("Authorization: Bearer") == true, "\(path): \(missing.body)")
            let wrong = try stack.get(path, headers: ["Authorization": "Bearer \(DashboardStack.token)x"])
            #expect(wrong.status == 401, "\(path)")
        }
        #expect(try stack.post("/api/dead-letters/\(id)/retry", headers: ["Authorization": "Bearer nope"]).status == 401)
        // A session cookie is for pages, not for the API.
        let cookie = try stack.login()
        #expect(try stack.post("/api/dead-letters/\(id)/retry", headers: ["Cookie": cookie]).status == 401)
        #expect(try stack.state() == before)
        #expect(try stack.get("/api/queues", headers: stack.bearer).status == 200)
    }

    @Test func pagesWantALoginAndFormsACSRFTokenFromThisSite() throws {
        let stack = try DashboardStack()
        defer { stack.close() }
        let id = try stack.fixture.add(reason: "THIRD_PARTY_AUTH_ERROR: expired")
        let before = try stack.state()

        let anonymous = try stack.get("/dead-letters?queue=default")
        #expect(anonymous.status == 303 && anonymous.headers["location"] == "/login?next=/dead-letters%3Fqueue%3Ddefault")
        let forged = try stack.get("/", headers: ["Cookie": "herald_session=9999999999.AAAA.forged"])
        #expect(forged.status == 303, "a forged cookie is no session")
        let tokenAsCookie = try stack.get("/", headers: ["Cookie": "herald_session=\(DashboardStack.token)"])
        #expect(tokenAsCookie.status == 303, "the token itself is not a session either")
        let wrongLogin = try stack.post("/login", headers: ["Content-Type": "application/x-www-form-urlencoded"], body: "token=wrong-token-value")
        #expect(wrongLogin.status == 401 && wrongLogin.headers["set-cookie"] == nil && wrongLogin.body.contains("not this dashboard"))
        let emptyLogin = try stack.post("/login", headers: ["Content-Type": "application/x-www-form-urlencoded"], body: "token=")
        #expect(emptyLogin.status == 400)

        let loginAnswer = try stack.post("/login", headers: ["Content-Type": "application/x-www-form-urlencoded"],
                                         body: "token=\(DashboardStack.token)&next=https%3A%2F%2Fevil.example%2F")
        #expect(loginAnswer.status == 303 && loginAnswer.headers["location"] == "/", "never redirects off the site")
        let setCookie = try #require(loginAnswer.headers["set-cookie"])
        #expect(setCookie.contains("HttpOnly") && setCookie.contains("SameSite=Strict"))
        #expect(!setCookie.contains(DashboardStack.token), "the cookie is not the token")
        let cookie = try stack.login()
        let page = try stack.get("/dead-letters", headers: ["Cookie": cookie])
        #expect(page.status == 200 && page.body.contains("THIRD_PARTY_AUTH_ERROR: expired"))
        #expect(!page.body.contains(DashboardStack.token), "the token never reaches a page")
        let csrf = try stack.csrf(cookie)

        let form = ["Cookie": cookie, "Content-Type": "application/x-www-form-urlencoded"]
        var refused = try stack.post("/dead-letters/\(id)/retry", headers: form, body: "queue=")
        #expect(refused.status == 403 && refused.body.contains("CSRF"), "missing CSRF")
        refused = try stack.post("/dead-letters/\(id)/retry", headers: form, body: "csrf=\(csrf)x")
        #expect(refused.status == 403, "wrong CSRF")
        refused = try stack.post("/dead-letters/\(id)/retry", headers: form.merging(["Origin": "https://evil.example"]) { $1 },
                                 body: "csrf=\(csrf)")
        #expect(refused.status == 403 && refused.body.contains("another site"), "foreign Origin")
        refused = try stack.post("/dead-letters/\(id)/retry", headers: ["Content-Type": "application/x-www-form-urlencoded"], body: "csrf=\(csrf)")
        #expect(refused.status == 303 && refused.headers["location"]?.hasPrefix("/login") == true, "no session")
        refused = try stack.post("/dead-letters/\(id)/retry", headers: form.merging(["Sec-Fetch-Site": "cross-site"]) { $1 }, body: "csrf=\(csrf)")
        #expect(refused.status == 403, "a browser saying cross-site")
        #expect(try stack.state() == before, "nothing changed")

        let origin = stack.url.replacingOccurrences(of: "http://", with: "https://")  // as behind a TLS proxy
        refused = try stack.post("/dead-letters/\(id)/retry", headers: form.merging(["Origin": "null"]) { $1 }, body: "csrf=\(csrf)")
        #expect(refused.status == 403, "an opaque origin")
        #expect(try stack.state() == before, "nothing changed")
        let retried = try stack.post("/dead-letters/\(id)/retry", headers: form.merging(["Origin": origin]) { $1 }, body: "csrf=\(csrf)&queue=default")
        #expect(retried.status == 303 && retried.headers["location"]?.contains("done=retried") == true, "\(retried.status) \(retried.body)")
        let after = try stack.get(try #require(retried.headers["location"]), headers: ["Cookie": cookie])
        #expect(after.body.contains("Retried 1 dead letter"))
        #expect(try stack.fixture.count("SELECT count(*) FROM herald.dead_letters") == 0)
        let log = try AdminLog.recent(stack.fixture.connection, limit: 5)
        #expect(log.count == 1 && log[0].action == "retry" && log[0].ids == [id] && log[0].source.hasPrefix("dashboard 127.0.0.1:"))
        #expect(try stack.fixture.count("SELECT count(*) FROM herald.admin_log WHERE details::text LIKE '%' || $1 || '%' OR source LIKE '%' || $1 || '%'",
                                        [.text(DashboardStack.token)]) == 0, "the token never reaches the database")

        let logout = try stack.post("/logout", headers: form.merging(["Origin": origin]) { $1 }, body: "csrf=\(csrf)")
        #expect(logout.status == 303 && logout.headers["set-cookie"]?.contains("Max-Age=0") == true)
    }
}

@Suite struct DashboardAPITests {
    @Test func retryAndDiscardByIdAndByReason() throws {
        let stack = try DashboardStack()
        defer { stack.close() }
        let f = stack.fixture
        let auth1 = try f.add(reason: "THIRD_PARTY_AUTH_ERROR: expired", token: "api-1")
        let auth2 = try f.add(queue: "marketing", reason: "THIRD_PARTY_AUTH_ERROR: expired", token: "api-2")
        let invalid = try f.add(reason: "INVALID_ARGUMENT: bad", token: "api-3")
        let keyed = try f.add(reason: "INTERNAL: gave up", token: "api-4", dedupeKey: "order-1")
        let pending = try f.connection.query("SELECT herald.enqueue('{\"token\":\"p\"}', dedupe_key => 'order-1')").int(0, 0)!
        let json = stack.bearer.merging(["Content-Type": "application/json"]) { $1 }

        let listed = try stack.get("/api/dead-letters?reason=THIRD_PARTY&limit=1", headers: stack.bearer)
        #expect(listed.status == 200)
        #expect(listed.json?["dead_letters"]?.arrayValue?.compactMap { $0["id"]?.intValue } == [auth2])
        #expect(listed.json?["next_before"]?.intValue == auth2)
        let next = try stack.get("/api/dead-letters?reason=THIRD_PARTY&limit=1&before=\(auth2)", headers: stack.bearer)
        #expect(next.json?["dead_letters"]?.arrayValue?.compactMap { $0["id"]?.intValue } == [auth1])
        let one = try stack.get("/api/dead-letters/\(invalid)", headers: stack.bearer)
        #expect(one.json?["message"]?["token"]?.stringValue == "api-3" && one.json?["errors"]?.arrayValue?.count == 1)

        let byReason = try stack.post("/api/dead-letters/retry", headers: json, body: #"{"reason": "THIRD_PARTY_AUTH_ERROR"}"#)
        #expect(byReason.status == 200 && byReason.json?["retried"]?.intValue == 2, "\(byReason.body)")
        #expect(try f.deadLetterIDs == [invalid, keyed])

        let kept = try stack.post("/api/dead-letters/\(keyed)/retry", headers: stack.bearer)
        #expect(kept.status == 409 && kept.json?["error"]?.stringValue?.contains("pending job \(pending)") == true, "\(kept.body)")
        let discarded = try stack.post("/api/dead-letters/\(invalid)/discard", headers: stack.bearer)
        #expect(discarded.status == 200 && discarded.json?["discarded"]?.intValue == 1)
        #expect(try f.deadLetterIDs == [keyed])

        let queues = try stack.get("/api/queues", headers: stack.bearer)
        let byName = Dictionary(uniqueKeysWithValues: (queues.json?["queues"]?.arrayValue ?? []).compactMap { q in q["queue"]?.stringValue.map { ($0, q) } })
        #expect(byName["default"]?["available"]?.intValue == 2, "the retried auth error and the pending job")
        #expect(byName["marketing"]?["available"]?.intValue == 1)
        #expect(byName["default"]?["dead"]?.intValue == 1)

        let job = try stack.get("/api/jobs/\(pending)", headers: stack.bearer)
        #expect(job.status == 200 && job.json?["job"]?["state"]?.stringValue == "available")
        let actions = try AdminLog.recent(f.connection, limit: 10).map(\.action)
        #expect(actions == ["discard", "retry_matching"], "a kept retry changed nothing and is not an action done")
    }

    @Test func theDeadLettersPageRetriesAndDiscardsAllThatMatchItsFilter() throws {
        let stack = try DashboardStack()
        defer { stack.close() }
        let f = stack.fixture
        let auth = try f.add(reason: "THIRD_PARTY_AUTH_ERROR: expired", token: "page-1")
        try f.add(queue: "marketing", reason: "THIRD_PARTY_AUTH_ERROR: expired", token: "page-2")
        let invalidOld = try f.add(queue: "marketing", reason: "INVALID_ARGUMENT: bad", token: "page-3")
        let invalid = try f.add(reason: "INVALID_ARGUMENT: bad", token: "page-4")
        let cookie = try stack.login()
        let csrf = try stack.csrf(cookie)
        let form = ["Cookie": cookie, "Content-Type": "application/x-www-form-urlencoded"]

        let filtered = try stack.get("/dead-letters?queue=default&reason=THIRD_PARTY", headers: ["Cookie": cookie])
        #expect(filtered.body.contains("Retry all 1 matching") && filtered.body.contains("dead-letter-\(auth)"))
        #expect(!filtered.body.contains("page-2") && !filtered.body.contains("page-4"), "only what the filter shows")

        let retried = try stack.post("/dead-letters/retry", headers: form, body: "csrf=\(csrf)&queue=default&reason=THIRD_PARTY")
        let location = try #require(retried.headers["location"])
        #expect(retried.status == 303 && location.contains("done=retried") && location.contains("count=1") && location.contains("queue=default"))
        #expect(try f.count("SELECT count(*) FROM herald.jobs WHERE message->>'token' = 'page-1'") == 1)
        #expect(try f.count("SELECT count(*) FROM herald.jobs WHERE message->>'token' = 'page-2'") == 0, "the other queue's letter stays")

        let discarded = try stack.post("/dead-letters/discard", headers: form, body: "csrf=\(csrf)&reason=INVALID_ARGUMENT")
        #expect(discarded.status == 303 && discarded.headers["location"]?.contains("count=2") == true)
        #expect(try f.deadLetterIDs.count == 1, "the marketing auth error is all that is left")
        let log = try AdminLog.recent(f.connection, limit: 5)
        #expect(log.map(\.action) == ["discard_matching", "retry_matching"])
        #expect(log[0].ids == [invalidOld, invalid] && log[1].ids == [auth])
    }

    @Test func badInputGetsAClear4xxAndChangesNothing() throws {
        let stack = try DashboardStack()
        defer { stack.close() }
        let f = stack.fixture
        let id = try f.add(reason: "quota 100% used; it's fine")
        let json = stack.bearer.merging(["Content-Type": "application/json"]) { $1 }
        let before = try stack.state()

        func expect(_ answer: CurlResult, _ status: Int, _ words: String, _ comment: Comment) {
            #expect(answer.status == status, comment)
            #expect(answer.json?["error"]?.stringValue?.contains(words) == true, "\(comment): \(answer.body)")
        }
        expect(try stack.post("/api/dead-letters/424242/retry", headers: stack.bearer), 404, "no dead letter with id 424242", "unknown id")
        expect(try stack.post("/api/dead-letters/424242/discard", headers: stack.bearer), 404, "424242", "unknown id")
        expect(try stack.get("/api/dead-letters/424242", headers: stack.bearer), 404, "424242", "unknown id")
        expect(try stack.get("/api/jobs/424242", headers: stack.bearer), 404, "no job with id 424242", "unknown job")
        #expect(try stack.post("/api/dead-letters/abc/retry", headers: stack.bearer).status == 404, "not an id")
        expect(try stack.post("/api/dead-letters/retry", headers: json, body: "{}"), 400, "\"all\": true", "an empty filter")
        expect(try stack.post("/api/dead-letters/retry", headers: json, body: "not json"), 400, "not JSON", "a body that is not JSON")
        expect(try stack.post("/api/dead-letters/retry", headers: json, body: #"{"reason": 5}"#), 400, "reason must be a string", "a number")
        expect(try stack.post("/api/dead-letters/retry", headers: json, body: #"{"reasn": "x"}"#), 400, "unknown field \"reasn\"", "a typo")
        expect(try stack.post("/api/dead-letters/retry", headers: json, body: #"{"queue": "x'; DELETE FROM herald.dead_letters; --"}"#),
               404, "no dead letters in queue", "SQL in the queue")
        expect(try stack.post("/api/dead-letters/discard", headers: json, body: #"{"queue": "default' OR '1'='1"}"#),
               404, "queues with dead letters: default", "SQL in the queue")
        expect(try stack.get("/api/dead-letters?queue=default%27%20OR%201%3D1--", headers: stack.bearer), 404, "no dead letters in queue", "SQL in a query")
        expect(try stack.get("/api/dead-letters?limit=abc", headers: stack.bearer), 400, "limit must be a whole number", "limit")
        expect(try stack.get("/api/dead-letters?limit=100000", headers: stack.bearer), 400, "limit", "limit")
        expect(try stack.get("/api/dead-letters?reason=a%00b", headers: stack.bearer), 400, "reason contains a control character", "NUL")
        expect(try stack.get("/api/dead-letters?reason=" + String(repeating: "x", count: 300), headers: stack.bearer), 400, "at most 200", "long")

        // Metacharacters in a reason are literal text: they match only what they say.
        let noMatch = try stack.post("/api/dead-letters/retry", headers: json, body: #"{"reason": "' OR '1'='1"}"#)
        #expect(noMatch.status == 200 && noMatch.json?["retried"]?.intValue == 0)
        let wildcard = try stack.get("/api/dead-letters?reason=%25", headers: stack.bearer)
        #expect(wildcard.json?["dead_letters"]?.arrayValue?.count == 1, "% matches the % in the reason, as text")
        let everything = try stack.get("/api/dead-letters?reason=%25%25", headers: stack.bearer)
        #expect(everything.json?["dead_letters"]?.arrayValue?.count == 0, "%% is not a wildcard")
        #expect(try stack.get("/api/dead-letters?reason=it%27s%20fine", headers: stack.bearer).json?["dead_letters"]?.arrayValue?.count == 1)

        // The pages answer bad ids and filters in HTML, with the same status.
        let cookie = try stack.login()
        let csrf = try stack.csrf(cookie)
        let form = ["Cookie": cookie, "Content-Type": "application/x-www-form-urlencoded"]
        let missing = try stack.post("/dead-letters/424242/retry", headers: form, body: "csrf=\(csrf)")
        #expect(missing.status == 404 && missing.body.contains("no dead letter with id 424242"))
        let noJob = try stack.get("/jobs/424242", headers: ["Cookie": cookie])
        #expect(noJob.status == 404)
        let sqlFilter = try stack.get("/dead-letters?queue=%27%3B%20DROP%20TABLE%20herald.jobs%3B--", headers: ["Cookie": cookie])
        #expect(sqlFilter.status == 200 && sqlFilter.body.contains("no dead letters in queue"), "shown as a warning on the page")
        #expect(!sqlFilter.body.contains("'; DROP"), "the filter is escaped in the page")
        #expect(try stack.state() == before, "nothing changed")
        _ = id
    }

    @Test func metricsArePrometheusTextWithTheDatabaseGauges() throws {
        let stack = try DashboardStack()
        defer { stack.close() }
        let c = stack.fixture.connection
        try c.query("""
            INSERT INTO herald.jobs (queue, message, run_at) SELECT 'alerts', '{"token":"t"}', now() - interval '45 seconds' FROM generate_series(1, 3)
            """)
        try c.query("INSERT INTO herald.jobs (queue, message, run_at) VALUES ('alerts', '{\"token\":\"t\"}', now() + interval '1 day')")
        try c.query(#"INSERT INTO herald.jobs (queue, message, state, finished_at) VALUES ('we"ird\queue', '{}', 'completed', now())"#)
        try stack.fixture.add(queue: "alerts", reason: "INTERNAL: x")
        try stack.fixture.add(queue: "alerts", reason: "INTERNAL: y")
        let answer = try stack.get("/metrics", headers: stack.bearer)
        #expect(answer.status == 200 && answer.headers["content-type"]?.hasPrefix("text/plain; version=0.0.4") == true)
        let text = answer.body
        #expect(text.contains(#"herald_jobs{queue="alerts",state="available"} 3"#))
        #expect(text.contains(#"herald_jobs{queue="alerts",state="scheduled"} 1"#))
        #expect(text.contains(#"herald_jobs{queue="we\"ird\\queue",state="completed"} 1"#), "label values escaped")
        #expect(text.contains(#"herald_dead_letters{queue="alerts"} 2"#))
        let age = text.split(separator: "\n").first { $0.hasPrefix(#"herald_oldest_available_age_seconds{queue="alerts"}"#) }
        let seconds = try #require(age.flatMap { Double($0.split(separator: " ").last ?? "") })
        #expect(seconds >= 45 && seconds < 600, "\(seconds)")
        let check = try promtoolCheckMetrics(text)
        #expect(check.status == 0, "promtool check metrics: \(check.output)\n\(text)")
    }
}

@Suite struct QueueStatisticsTests {
    @Test func throughputCountsTheHourOnceThenOnlyItsLastMinutes() throws {
        let f = try DeadLetterFixture()
        defer { f.close() }
        let c = f.connection
        func finish(_ count: Int, minutesAgo: Int, state: String = "completed") throws {
            try c.query("""
                INSERT INTO herald.jobs (message, state, finished_at) SELECT '{}', $1, now() - make_interval(mins => $2::int)
                FROM generate_series(1, $3::int)
                """, [.text(state), .int(minutesAgo), .int(count)])
        }
        try finish(5, minutesAgo: 30)
        try finish(2, minutesAgo: 30, state: "discarded")
        try finish(3, minutesAgo: 0)
        try finish(9, minutesAgo: 90)
        try f.add(reason: "INTERNAL: x", deadMinutesAgo: 10)
        var configuration = QueueStatistics.Configuration()
        configuration.throughputInterval = 0
        let statistics = QueueStatistics(configuration: configuration)
        var hour = try statistics.throughput(c)
        #expect(hour.minutes.count == 60)
        #expect(hour.total.completed == 8 && hour.total.discarded == 2 && hour.total.dead == 1, "nothing older than the hour")
        // (Sums over neighbouring minutes: a minute may turn between the inserts and the count.)
        func completed(_ range: ClosedRange<Int>) -> Int { hour.minutes[range].map(\.completed).reduce(0, +) }
        #expect(completed(58...59) == 3, "this minute last")
        #expect(completed(28...30) == 5, "30 minutes ago, in its minute")

        // Later refreshes recount only the last minutes: new work shows, the past is kept as counted.
        try finish(4, minutesAgo: 0)
        try c.query("DELETE FROM herald.jobs WHERE finished_at < now() - interval '20 minutes'")
        hour = try statistics.throughput(c)
        #expect(hour.total.completed == 12 && completed(58...59) == 7)
        #expect(completed(27...30) == 5, "retention deleting rows does not erase the chart's past")
    }

    @Test func pendingStatesStayExactWhileFinishedOnesAreEstimatedOnALargeTable() throws {
        let f = try DeadLetterFixture()
        defer { f.close() }
        let c = f.connection
        try c.query("""
            INSERT INTO herald.jobs (queue, message, state, finished_at)
            SELECT 'bulk', '{"token":"t"}', CASE WHEN g % 4 = 0 THEN 'discarded' ELSE 'completed' END, now() - interval '2 hours'
            FROM generate_series(1, 40000) AS g
            """)
        try c.query("INSERT INTO herald.jobs (queue, message) SELECT 'bulk', '{\"token\":\"t\"}' FROM generate_series(1, 37)")
        try c.execute("ANALYZE herald.jobs")
        var configuration = QueueStatistics.Configuration()
        configuration.exactRowLimit = 1000
        configuration.sampleRows = 8000
        let snapshot = try QueueStatistics(configuration: configuration).snapshot(c)
        let bulk = try #require(snapshot.queues.first { $0.name == "bulk" })
        #expect(bulk.count("available") == 37, "pending counts are exact, from their partial index")
        #expect(snapshot.estimatedStates.contains("completed") && !snapshot.estimatedStates.contains("available"))
        // A block sample of about a fifth, scaled to the table: near 30,000 and 10,000, nowhere near a fifth of them.
        #expect(abs(bulk.count("completed") - 30_000) < 6_000, "\(bulk.count("completed"))")
        #expect(abs(bulk.count("discarded") - 10_000) < 3_000, "\(bulk.count("discarded"))")

        let exact = try QueueStatistics().snapshot(c)
        #expect(exact.estimatedStates.isEmpty)
        #expect(exact.queues.first { $0.name == "bulk" }?.count("completed") == 30_000)
    }
}

/// `herald dashboard` refuses what it must not do, before it listens, saying what to set.
@Suite struct DashboardCommandTests {
    /// `herald dashboard` on the fixture's database, and the address it says it serves.
    static func startDashboard(_ f: DeadLetterFixture) throws -> (HeraldProcess, String) {
        let dashboard = try HeraldProcess(["dashboard", "--address", "127.0.0.1:0"], environment: ["DATABASE_URL": f.database.url])
        try dashboard.start()
        var base = ""
        #expect(waitUntil(timeout: 30) {
            guard let range = dashboard.output.range(of: #"serving http://127\.0\.0\.1:\d+"#, options: .regularExpression) else { return false }
            base = String(dashboard.output[range].dropFirst("serving ".count))
            return true
        }, "\(dashboard.output)")
        return (dashboard, base)
    }

    @Test func itsHelpNamesTheCampaignsTabAndWhatItCanDo() throws {
        let help = try HeraldProcess.run(["dashboard", "--help"], environment: [:], timeout: 30)
        #expect(help.status == 0)
        for words in ["/campaigns (each campaign's progress", "Pause holds a campaign back", "Cancel turns its pending jobs into cancelled ones",
                      "GET /api/campaigns", "POST /api/campaigns/ID/pause", "herald_campaign_jobs"] {
            #expect(help.output.contains(words), "herald dashboard --help: \(words)")
        }
        // What it names is served: the Campaigns tab and its API answer (read-only, no token).
        let f = try DeadLetterFixture()
        defer { f.close() }
        let campaign = try f.connection.query("SELECT herald.create_campaign('first-day-tab')").int(0, 0)!
        let (dashboard, base) = try Self.startDashboard(f)
        defer { dashboard.signal(SIGTERM); dashboard.wait(timeout: 30) }
        let page = try curl(base + "/campaigns", over: .http1)
        #expect(page.status == 200 && page.body.contains("first-day-tab"), "\(page.body)")
        let api = try curl(base + "/api/campaigns/\(campaign)", over: .http1)
        #expect(api.status == 200, "\(api.body)")
    }

    @Test func cancelledJobsAreCountedAsCancelledByStatsTheHourChartAndTheAPI() throws {
        let f = try DeadLetterFixture()
        defer { f.close() }
        func finish(_ count: Int, state: String) throws {
            try f.connection.query("""
                INSERT INTO herald.jobs (message, state, finished_at, last_error)
                SELECT jsonb_build_object('token', 'hour-' || g), $1, now(), CASE WHEN $1 = 'cancelled' THEN 'campaign cancelled' END
                FROM generate_series(1, $2::int) AS g
                """, [.text(state), .int(count)])
        }
        try finish(7, state: "cancelled")
        try finish(2, state: "discarded")
        try finish(4, state: "completed")

        let stats = try HeraldProcess.run(["stats"], environment: ["DATABASE_URL": f.database.url], timeout: 60)
        #expect(stats.status == 0, "\(stats.output)")
        // The hour's line (the minute's may already be the next one on a loaded machine).
        let hourLine = stats.output.split(separator: "\n").first { $0.hasPrefix("last hour:") } ?? ""
        #expect(hourLine.contains("4 completed (") && hourLine.hasSuffix(", 2 discarded, 7 cancelled, 0 dead"), "the last hour: \(stats.output)")

        let (dashboard, base) = try Self.startDashboard(f)
        defer { dashboard.signal(SIGTERM); dashboard.wait(timeout: 30) }
        let page = try curl(base + "/", over: .http1)
        #expect(page.status == 200)
        #expect(page.body.contains("errors: discarded 2, dead 0"), "cancelled jobs are not errors: \(page.body)")
        #expect(page.body.contains("cancelled 7</p>"), "the chart's legend counts them as cancelled")
        #expect(page.body.contains("<title>7 cancelled</title>"), "and draws them as such")
        let table = try #require(page.body.range(of: "<table id=\"queues\">.*?</table>", options: .regularExpression).map { String(page.body[$0]) })
        let header = table.components(separatedBy: "</tr>")[0]
        let row = table.components(separatedBy: "</tr>")[1]
        let columns = header.components(separatedBy: "<th").dropFirst().map { $0.replacingOccurrences(of: #"^[^>]*>|</th>$"#, with: "", options: .regularExpression) }
        let cells = row.components(separatedBy: "<td").dropFirst().map { $0.replacingOccurrences(of: #"<[^>]*>"#, with: "", options: .regularExpression)
            .replacingOccurrences(of: #"^[^>]*>"#, with: "", options: .regularExpression) }
        let byColumn = Dictionary(uniqueKeysWithValues: zip(columns, cells))
        #expect(byColumn["cancelled"] == "7" && byColumn["discarded"] == "2", "the queue table has a cancelled column: \(table)")
        let api = try curl(base + "/api/queues", over: .http1)
        #expect(api.status == 200, "\(api.body)")
        let hour = api.json?["last_hour"]
        #expect(hour?["cancelled"]?.intValue == 7 && hour?["discarded"]?.intValue == 2 && hour?["completed"]?.intValue == 4, "\(api.body)")
        let queue = api.json?["queues"]?.arrayValue?.first
        #expect(queue?["cancelled"]?.intValue == 7 && queue?["discarded"]?.intValue == 2, "\(api.body)")
    }

    @Test func refusesUnsafeOrIncompleteSettings() throws {
        let database = try TestDatabase.fresh()
        defer { database.drop() }
        var run = try HeraldProcess.run(["dashboard", "--address", "0.0.0.0:0"], environment: ["DATABASE_URL": database.url], timeout: 30)
        #expect(run.status == 2 && run.output.contains("refusing to serve on 0.0.0.0 without HERALD_DASHBOARD_TOKEN"), "\(run.output)")
        run = try HeraldProcess.run(["dashboard"], environment: ["DATABASE_URL": database.url, "HERALD_DASHBOARD_TOKEN": "short"], timeout: 30)
        #expect(run.status == 2 && run.output.contains("HERALD_DASHBOARD_TOKEN is 5 characters; use at least 16"), "\(run.output)")
        #expect(!run.output.contains("short"), "the token itself is not repeated")
        run = try HeraldProcess.run(["dashboard", "--address", "localhost"], environment: ["DATABASE_URL": database.url], timeout: 30)
        #expect(run.status == 2 && run.output.contains("is not HOST:PORT"), "\(run.output)")
        run = try HeraldProcess.run(["dashboard"], environment: [:], timeout: 30)
        #expect(run.status == 2 && run.output.contains("set DATABASE_URL"), "\(run.output)")
        let empty = try TestDatabase.fresh(migrated: false)
        defer { empty.drop() }
        run = try HeraldProcess.run(["dashboard", "--address", "127.0.0.1:0"], environment: ["DATABASE_URL": empty.url], timeout: 30)
        #expect(run.status == 2 && run.output.contains("run `herald migrate` first"), "\(run.output)")
    }
}
