import Emulator
import Foundation
import JSON
import Postgres
import Queue
import Testing
import TestSupport

/// Durable topic subscriptions: herald.subscribe / herald.unsubscribe record the wish, the pool
/// carries it out with Instance ID batchAdd / batchRemove, checked at the emulator's side.
@Suite(.serialized) struct TopicSubscriptionTests {
    @Test func fiveThousandTokensSurviveASIGKILLAndATopicSendReachesExactlyTheSubscribers() throws {
        let stack = try WorkerStack(latencyMilliseconds: 700)
        defer { stack.close() }
        let c = stack.connection
        var tokens: [String] = []
        for i in 0..<5000 {
            if i % 100 == 3 { tokens.append("fail-unregistered-sub\(i)") }        // NOT_FOUND
            else if i % 137 == 5 { tokens.append("fail-invalid-sub\(i)") }        // INVALID_ARGUMENT
            else if i % 250 == 7 { tokens.append("fail-internal-1-sub\(i)") }     // INTERNAL once, then added
            else { tokens.append("sub-token-\(i)") }
        }
        let refused = Set(tokens.filter { $0.hasPrefix("fail-unregistered") || $0.hasPrefix("fail-invalid") })
        let expected = Set(tokens).subtracting(refused)

        // Recorded in the caller's transaction: a rollback leaves nothing behind.
        try c.execute("BEGIN")
        _ = try c.query("SELECT herald.subscribe('breaking', $1::text[])", [.text(PGArray.text(Array(tokens.prefix(10))))])
        try c.execute("ROLLBACK")
        #expect(try stack.count("SELECT count(*) FROM herald.topic_subscriptions") == 0)
        try c.execute("BEGIN")
        for start in stride(from: 0, to: tokens.count, by: 1000) {
            _ = try c.query("SELECT herald.subscribe('breaking', $1::text[])", [.text(PGArray.text(Array(tokens[start..<start + 1000])))])
        }
        try c.execute("COMMIT")
        #expect(try stack.count("SELECT count(*) FROM herald.topic_subscriptions WHERE state = 'pending'") == 5000)

        var environment = stack.environment
        environment["HERALD_IID_URL"] = stack.emulator.baseURL
        let pool = try HeraldProcess(["work", "--processes", "1", "--lease", "2", "--poll-interval", "0.2"], environment: environment)
        try pool.start()
        defer { pool.signal(SIGKILL); pool.wait(timeout: 10) }

        // Mid-way: some requests answered, others not yet made; kill the worker holding the lease.
        var victim: Int32? = nil
        #expect(waitUntil(timeout: 60) {
            guard stack.emulator.topics.requests.count >= 2 else { return false }
            let holder = try? c.query("SELECT locked_by FROM herald.topic_subscriptions WHERE locked_until > now() AND locked_by IS NOT NULL LIMIT 1")
            victim = holder?[0, 0].flatMap { Int32($0.split(separator: ":").dropLast().last!) }
            return victim != nil
        }, "\(pool.output)")
        let killed = try #require(victim)
        #expect(killed != pool.pid)
        let pendingAtKill = try stack.count("SELECT count(*) FROM herald.topic_subscriptions WHERE state = 'pending'")
        kill(killed, SIGKILL)
        #expect(pendingAtKill > 0, "the kill came before the end")

        #expect(waitUntil(timeout: 120) {
            (try? stack.count("SELECT count(*) FROM herald.topic_subscriptions WHERE state IN ('pending', 'removing')")) == 0
        }, "\(pool.output)")
        #expect(pool.output.contains("was killed by signal 9"))

        // At FCM's side: exactly the tokens that could be subscribed are, each at least once.
        let registry = stack.emulator.topics
        let subscribers = registry.subscribers(project: "e2e-project", topic: "breaking")
        #expect(subscribers == expected, "\(subscribers.symmetricDifference(expected).sorted().prefix(10))")
        #expect(registry.requests.allSatisfy { $0.tokens <= 1000 && $0.add })
        let addedTwice = expected.filter { registry.addCount(project: "e2e-project", topic: "breaking", token: $0) > 1 }.count
        print("topic subscriptions: \(registry.requests.count) batchAdd requests (largest \(registry.requests.map(\.tokens).max() ?? 0) tokens) for 5000 tokens; \(addedTwice) tokens asked again after the SIGKILL; \(refused.count) refused")

        // In the database: each token's outcome, FCM's per-token errors recorded.
        #expect(try stack.count("SELECT count(*) FROM herald.topic_subscriptions WHERE state = 'subscribed'") == expected.count)
        let failures = try c.query("SELECT token, error FROM herald.topic_subscriptions WHERE state = 'failed' ORDER BY token")
        #expect(failures.rowCount == refused.count)
        for row in 0..<failures.rowCount {
            let token = failures[row, 0]!
            #expect(failures[row, 1] == (token.hasPrefix("fail-unregistered") ? "NOT_FOUND" : "INVALID_ARGUMENT"), "\(token)")
        }

        // A message to the topic reaches exactly the subscribed tokens, once each.
        _ = try c.query("SELECT herald.enqueue($1::jsonb)", [.text(#"{"topic": "breaking", "data": {"story": "42"}}"#)])
        #expect(waitUntil(timeout: 30) { stack.emulator.deliveredMessages().contains { $0.target == "topic:breaking" } })
        let fanned = stack.emulator.deliveredMessages().filter { $0.viaTopic == "breaking" }.compactMap(\.token)
        #expect(fanned.count == expected.count && Set(fanned) == expected)

        // A token the worker prunes (FCM answered a send UNREGISTERED) leaves every topic.
        let gone = try #require(refused.first { $0.hasPrefix("fail-unregistered") })
        _ = try c.query("SELECT herald.enqueue(jsonb_build_object('token', $1::text, 'data', '{\"k\": \"v\"}'::jsonb))", [.text(gone)])
        #expect(waitUntil(timeout: 30) {
            (try? stack.count("SELECT count(*) FROM herald.topic_subscriptions WHERE token = $1", [.text(gone)])) == 0
        }, "\(pool.output)")
        #expect(try stack.count("SELECT count(*) FROM herald.pruned_tokens WHERE token = $1", [.text(gone)]) == 1)

        // Unsubscribing 1,000 of them; a pruned token leaves every topic without a request.
        let leaving = Array(expected.sorted().prefix(1000))
        _ = try c.query("SELECT herald.unsubscribe('breaking', $1::text[])", [.text(PGArray.text(leaving))])
        #expect(waitUntil(timeout: 60) {
            (try? stack.count("SELECT count(*) FROM herald.topic_subscriptions WHERE state = 'removing'")) == 0
        }, "\(pool.output)")
        #expect(stack.emulator.topics.subscribers(project: "e2e-project", topic: "breaking") == expected.subtracting(leaving))
        let pruned = expected.subtracting(leaving).sorted()[0]
        _ = try c.query("INSERT INTO herald.pruned_tokens (token, reason) VALUES ($1, 'UNREGISTERED')", [.text(pruned)])
        #expect(try stack.count("SELECT count(*) FROM herald.topic_subscriptions WHERE token = $1", [.text(pruned)]) == 0)
        #expect(try stack.count("SELECT count(*) FROM herald.topic_subscriptions WHERE state = 'subscribed'") == expected.count - 1001)

        // The operator's view.
        let list = try HeraldProcess.run(["topics", "list"], environment: environment, timeout: 30)
        #expect(list.status == 0 && list.output.contains("breaking") && list.output.contains(String(expected.count - 1001)), "\(list.output)")
        let show = try HeraldProcess.run(["topics", "show", "breaking", "--json"], environment: environment, timeout: 30)
        let shown = try JSONValue.parse(show.output.trimmingCharacters(in: .whitespacesAndNewlines))
        #expect(shown["projects"]?.arrayValue?.first?["subscribed"]?.intValue == expected.count - 1001)
        #expect(shown["projects"]?.arrayValue?.first?["failed"]?.intValue == refused.count - 1)
        #expect(shown["failed_tokens"]?.arrayValue?.count == 20)
        pool.signal(SIGTERM)
        #expect(pool.wait(timeout: 60) == 0, "\(pool.output)")
    }

    /// A whole request refused with 503 and Retry-After comes back no sooner, measured at the
    /// emulator's side, and then subscribes every token.
    @Test func aRefusedRequestComesBackAfterItsRetryAfter() throws {
        let stack = try WorkerStack()
        defer { stack.close() }
        let tokens = ["weather-1", "fail-unavailable-2-weather", "weather-3"]
        _ = try stack.connection.query("SELECT herald.subscribe('weather', $1::text[])", [.text(PGArray.text(tokens))])
        var environment = stack.environment
        environment["HERALD_IID_URL"] = stack.emulator.baseURL
        let pool = try HeraldProcess(["work", "--processes", "1", "--poll-interval", "0.2"], environment: environment)
        try pool.start()
        defer { pool.signal(SIGKILL); pool.wait(timeout: 10) }
        #expect(waitUntil(timeout: 60) {
            (try? stack.count("SELECT count(*) FROM herald.topic_subscriptions WHERE state = 'subscribed'")) == 3
        }, "\(pool.output)")
        let requests = stack.emulator.topics.requests
        #expect(requests.map(\.status) == [503, 200])
        if requests.count == 2 {
            let gap = requests[1].atMilliseconds - requests[0].atMilliseconds
            #expect(gap >= 2000, "came back after \(gap) ms, Retry-After was 2 s")
            print("topic subscriptions: a batchAdd refused with Retry-After: 2 came back after \(gap) ms")
        }
        #expect(stack.emulator.topics.subscribers(project: "e2e-project", topic: "weather") == Set(tokens))
        #expect(try stack.count("SELECT count(*) FROM herald.topic_subscriptions WHERE attempts = 2") == 3)
        pool.signal(SIGTERM)
        #expect(pool.wait(timeout: 60) == 0)
    }

    /// One call with 100,000 tokens (an application's table, not an SDK's batch): every token is
    /// subscribed, in requests of at most 1,000 as Instance ID allows, counted at the emulator.
    @Test func aHundredThousandTokensInOneCallGoOutAThousandARequest() throws {
        let stack = try WorkerStack()
        defer { stack.close() }
        let c = stack.connection
        try c.execute("CREATE TABLE public.app_users (token text NOT NULL)")
        try c.execute("INSERT INTO public.app_users SELECT 'user-token-' || g FROM generate_series(1, 100000) AS g")
        let started = Date()
        let waiting = try c.query("SELECT herald.subscribe('everyone', ARRAY(SELECT token FROM public.app_users))").int(0, 0)
        let callSeconds = Date().timeIntervalSince(started)
        #expect(waiting == 100_000)
        #expect(try stack.count("SELECT count(*) FROM herald.topic_subscriptions WHERE state = 'pending'") == 100_000)

        var environment = stack.environment
        environment["HERALD_IID_URL"] = stack.emulator.baseURL
        let pool = try HeraldProcess(["work", "--processes", "1", "--poll-interval", "0.2"], environment: environment)
        try pool.start()
        defer { pool.signal(SIGKILL); pool.wait(timeout: 10) }
        let sending = Date()
        #expect(waitUntil(timeout: 300) {
            (try? stack.count("SELECT count(*) FROM herald.topic_subscriptions WHERE state = 'subscribed'")) == 100_000
        }, "\(pool.output)")
        let sendSeconds = Date().timeIntervalSince(sending)
        let requests = stack.emulator.topics.requests
        let expected = Set((1...100_000).map { "user-token-\($0)" })
        #expect(stack.emulator.topics.subscribers(project: "e2e-project", topic: "everyone") == expected)
        #expect(requests.allSatisfy { $0.add && $0.tokens <= 1000 && $0.tokens > 0 }, "largest: \(requests.map(\.tokens).max() ?? 0)")
        #expect(requests.count >= 100, "100,000 tokens need at least 100 requests of 1,000")
        #expect(requests.map(\.tokens).reduce(0, +) >= 100_000)
        print("topic subscriptions: herald.subscribe of 100000 tokens in one call took \(String(format: "%.2f", callSeconds)) s; "
              + "\(requests.count) batchAdd requests (largest \(requests.map(\.tokens).max() ?? 0) tokens) in \(String(format: "%.1f", sendSeconds)) s")
        pool.signal(SIGTERM)
        #expect(pool.wait(timeout: 60) == 0, "\(pool.output)")
    }

    /// A claim of many one-token topics, slower than its lease, hands the rest back instead of
    /// letting the other process ask the same again.
    @Test func aClaimNeverOutlivesItsLease() throws {
        let stack = try WorkerStack(latencyMilliseconds: 400)
        defer { stack.close() }
        try stack.connection.execute("BEGIN")
        for n in 1...12 { _ = try stack.connection.query("SELECT herald.subscribe($1, ARRAY['lease-token'])", [.text("lease-\(n)")]) }
        try stack.connection.execute("COMMIT")
        var environment = stack.environment
        environment["HERALD_IID_URL"] = stack.emulator.baseURL
        let pool = try HeraldProcess(["work", "--processes", "2", "--lease", "1", "--poll-interval", "0.1"], environment: environment)
        try pool.start()
        defer { pool.signal(SIGKILL); pool.wait(timeout: 10) }
        #expect(waitUntil(timeout: 60) {
            (try? stack.count("SELECT count(*) FROM herald.topic_subscriptions WHERE state = 'subscribed'")) == 12
        }, "\(pool.output)")
        let requests = stack.emulator.topics.requests
        #expect(requests.count == 12, "\(requests.map(\.topic))")
        #expect(Set(requests.map(\.topic)).count == 12, "no topic was asked twice")
        pool.signal(SIGTERM)
        #expect(pool.wait(timeout: 60) == 0)
    }

    /// The claim of a worker carrying many projects (herald.claim_carried_topic_work): the rows
    /// of the registry projects it carries, each with the entry whose key it goes out with; those
    /// of no project and of its own FCM project with none (its own key); never a skipped
    /// project's, an operator-paused one's, or an FCM project the registry does not hold.
    @Test func aCarryingWorkersClaimTakesTheRowsOfItsProjectsEachWithItsEntry() throws {
        let database = try TestDatabase.fresh()
        defer { database.drop() }
        let c = try database.connect()
        try c.query("""
            INSERT INTO herald.projects (name, fcm_project_id, credentials, paused_reason, paused_at)
            VALUES ('p1', 'f1', '/keys/f1.json', NULL, NULL), ('p2', 'f2', '/keys/f2.json', NULL, NULL),
                   ('p3', 'f3', '/keys/f3.json', 'key rotation', now()), ('p4', 'f4', '/keys/f4.json', 'credentials: the file does not exist', now())
            """)
        for project in ["", "own", "f1", "f2", "f3", "f4", "elsewhere"] {
            _ = try c.query("SELECT herald.subscribe('news', ARRAY[$1::text], project => nullif($2, ''))",
                            [.text("t-" + (project.isEmpty ? "none" : project)), .text(project)])
        }
        func claim(own: String?, names: [String]?, skip: [String]) throws -> [String] {
            let rows = try TopicSubscriptions.claimCarriedWork(c, ownFCMProject: own, names: names, skip: skip, worker: "w", limit: 100, leaseSeconds: 60)
            let claimed = (0..<rows.rowCount).map { "\(rows[$0, 0] ?? "-"):\(rows[$0, 1] ?? "")" }.sorted()
            try c.execute("UPDATE herald.topic_subscriptions SET locked_until = NULL, locked_by = NULL")
            return claimed
        }
        // p3 is paused by an operator; p4 for its key (tried: it may work again).
        #expect(try claim(own: "own", names: nil, skip: ["p2"]) == ["-:", "-:own", "p1:f1", "p4:f4"])
        #expect(try claim(own: nil, names: nil, skip: []) == ["p1:f1", "p2:f2", "p4:f4"])
        #expect(try claim(own: nil, names: ["p2"], skip: []) == ["p2:f2"])
        // The pool's own key is p2's FCM project's, and p2 is skipped: its rows stay too.
        #expect(try claim(own: "f2", names: nil, skip: ["p2"]) == ["-:", "p1:f1", "p4:f4"])
        #expect(try claim(own: "f2", names: nil, skip: []) == ["-:", "-:f2", "p1:f1", "p4:f4"])
    }

    @Test func theDashboardShowsSubscriberCounts() throws {
        let stack = try DashboardStack(token: nil)
        defer { stack.close() }
        let c = stack.fixture.connection
        _ = try c.query("SELECT herald.subscribe('scores', $1::text[])", [.text(PGArray.text((1...7).map { "score-\($0)" }))])
        try c.execute("UPDATE herald.topic_subscriptions SET state = 'subscribed' WHERE token IN ('score-1', 'score-2', 'score-3')")
        let api = try JSONValue.parse(try stack.get("/api/topics").body)
        let scores = api["topics"]?.arrayValue?.first { $0["topic"]?.stringValue == "scores" }
        #expect(scores?["subscribed"]?.intValue == 3 && scores?["pending"]?.intValue == 4, "\(api.serialized)")
        let page = try stack.get("/")
        #expect(page.status == 200)
        #expect(page.body.contains("<h2>Topics</h2>") && page.body.contains("<td>scores</td>"), "\(page.body)")
        #expect(page.body.contains("<td class=\"n\">3</td><td class=\"n\">4</td>"))
    }

    @Test func aBadIIDURLStopsStartUpNamingTheSetting() throws {
        let run = try HeraldProcess.run(["work", "--emulator", "--iid-url", "ftp://iid.example"], environment: [:], timeout: 60)
        #expect(run.status == 2, "\(run.output)")
        #expect(run.output.contains(#"--iid-url "ftp://iid.example" has scheme ftp, not http or https"#), "\(run.output)")
    }

    @Test func badTopicsAndTokenListsAreRefusedNamingTheValue() throws {
        let database = try TestDatabase.fresh()
        defer { database.drop() }
        let c = try database.connect()
        func refusal(_ function: String, _ topic: String, _ tokens: [String]) -> String {
            do {
                let sql = function == "subscribe" ? "SELECT herald.subscribe($1, $2::text[])" : "SELECT herald.unsubscribe($1, $2::text[])"
                _ = try c.query(sql, [.text(topic), .text(PGArray.text(tokens))])
                return "accepted"
            } catch {
                return "\(error)"
            }
        }
        #expect(refusal("subscribe", "/topics/news", ["a"]).contains(#"topic "/topics/news" starts with "/topics/"; give the topic name alone"#))
        #expect(refusal("subscribe", "news flash", ["a"]).contains(#"topic "news flash" has a character outside [a-zA-Z0-9-_.~%]"#))
        #expect(refusal("unsubscribe", "", ["a"]).contains("topic is empty"))
        #expect(refusal("subscribe", "news", []).contains("herald.subscribe: tokens is empty; give one or more registration tokens"))
        #expect(refusal("subscribe", "news", ["a", ""]).contains("tokens[2] is empty"))
        #expect(try c.query("SELECT count(*) FROM herald.topic_subscriptions").int(0, 0) == 0)
        func refusalOf(_ sql: String) -> String {
            do { _ = try c.query(sql); return "accepted" } catch { return "\(error)" }
        }
        #expect(refusalOf("SELECT herald.subscribe('news', NULL)").contains("herald.subscribe: tokens is NULL; give an array of registration tokens"))
        #expect(refusalOf("SELECT herald.unsubscribe('news', ARRAY['a', 'b', NULL])").contains("herald.unsubscribe: tokens[3] is NULL"))
        #expect(try c.query("SELECT count(*) FROM herald.topic_subscriptions").int(0, 0) == 0)
        // No upper limit on a call: 1,001 tokens are taken (the pool splits them into requests).
        #expect(refusal("unsubscribe", "news", (0...1000).map { "t\($0)" }) == "accepted")
        #expect(try c.query("SELECT count(*) FROM herald.topic_subscriptions WHERE state = 'removing'").int(0, 0) == 1001)
        try c.execute("DELETE FROM herald.topic_subscriptions")
        #expect(refusal("subscribe", "news~2026_%41.x-y", ["a"]) == "accepted")
    }
}
