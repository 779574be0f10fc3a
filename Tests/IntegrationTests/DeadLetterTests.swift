import Foundation
import JSON
import Postgres
import Queue
import Testing
import TestSupport

/// Dead letters held in a fresh database: three queues, reasons with SQL's wildcard characters in
/// them, one letter whose dedupe key is held by a pending job.
struct DeadLetterFixture {
    let database: FreshDatabase
    let connection: PGConnection

    init() throws {
        database = try TestDatabase.fresh()
        connection = try database.connect()
    }

    func close() { database.drop() }

    /// Adds a dead letter and returns its id.
    @discardableResult
    func add(queue: String = "default", reason: String, token: String = "device-1", dedupeKey: String? = nil,
             deadMinutesAgo: Int = 0) throws -> Int {
        try connection.query("""
            INSERT INTO herald.dead_letters (job_id, queue, message, attempts, max_attempts, dedupe_key, reason, errors, created_at, dead_at)
            VALUES (1000 + (SELECT count(*) FROM herald.dead_letters), $1, jsonb_build_object('token', $2::text, 'notification', jsonb_build_object('title', 'hello')),
                    3, 25, $3, $4, jsonb_build_array(jsonb_build_object('attempt', 1, 'error', $4::text)), now() - interval '1 day',
                    now() - make_interval(mins => $5::int))
            RETURNING id
            """, [.text(queue), .text(token), dedupeKey.map { .text($0) }, .text(reason), .int(deadMinutesAgo)]).int(0, 0)!
    }

    func count(_ sql: String, _ parameters: [PGValue?] = []) throws -> Int {
        try connection.query(sql, parameters).int(0, 0) ?? -1
    }

    var deadLetterIDs: [Int] {
        get throws {
            let rows = try connection.query("SELECT id FROM herald.dead_letters ORDER BY id")
            return (0..<rows.rowCount).map { rows.int($0, 0)! }
        }
    }
}

@Suite struct DeadLetterSQLTests {
    @Test func retryDeadLettersReplaysOneClassAndKeepsAPendingDedupeKey() throws {
        let f = try DeadLetterFixture()
        defer { f.close() }
        let c = f.connection
        let auth1 = try f.add(reason: "THIRD_PARTY_AUTH_ERROR: APNs certificate expired", token: "a1")
        let auth2 = try f.add(queue: "marketing", reason: "THIRD_PARTY_AUTH_ERROR: APNs certificate expired", token: "a2")
        let invalid = try f.add(reason: "INVALID_ARGUMENT: bad token", token: "i1")
        let keyed = try f.add(reason: "THIRD_PARTY_AUTH_ERROR: again", token: "k1", dedupeKey: "order-9")
        let pending = try c.query("SELECT herald.enqueue('{\"token\":\"other\"}', dedupe_key => 'order-9')").int(0, 0)!

        let retried = try c.query("SELECT herald.retry_dead_letters(reason_like => 'THIRD_PARTY_AUTH_ERROR%')").int(0, 0)
        #expect(retried == 2, "the two auth errors without a pending key")
        #expect(try f.deadLetterIDs == [invalid, keyed], "the other class and the letter whose key is pending stay")
        #expect(try f.count("SELECT count(*) FROM herald.jobs WHERE state = 'available' AND attempts = 0 AND message->>'token' IN ('a1', 'a2')") == 2)
        #expect(try f.count("SELECT count(*) FROM herald.jobs WHERE queue = 'marketing' AND message->>'token' = 'a2'") == 1,
                "a replayed job keeps its queue")
        _ = (auth1, auth2)

        // By queue: only that queue's letters.
        try f.add(queue: "marketing", reason: "INTERNAL: x", token: "m1")
        #expect(try c.query("SELECT herald.retry_dead_letters('marketing')").int(0, 0) == 1)
        #expect(try f.deadLetterIDs == [invalid, keyed])

        // Once the pending job holding the key finishes, the kept letter goes back too.
        try c.query("UPDATE herald.jobs SET state = 'completed', finished_at = now() WHERE id = $1", [.int(pending)])
        #expect(try c.query("SELECT herald.retry_dead_letters(reason_like => 'THIRD_PARTY%')").int(0, 0) == 1)
        #expect(try f.deadLetterIDs == [invalid])
    }

    @Test func discardDeadLettersByQueueReasonAndAge() throws {
        let f = try DeadLetterFixture()
        defer { f.close() }
        let c = f.connection
        let old = try f.add(reason: "INVALID_ARGUMENT: old", deadMinutesAgo: 60 * 24 * 8)
        let recent = try f.add(reason: "INVALID_ARGUMENT: recent", deadMinutesAgo: 5)
        let otherQueue = try f.add(queue: "marketing", reason: "INVALID_ARGUMENT: old", deadMinutesAgo: 60 * 24 * 8)
        #expect(try c.query("SELECT herald.discard_dead_letters('default', 'INVALID%', interval '7 days')").int(0, 0) == 1)
        #expect(try f.deadLetterIDs == [recent, otherQueue])
        _ = old
        #expect(try c.query("SELECT herald.discard_dead_letters()").int(0, 0) == 2, "no arguments: every dead letter")
        #expect(try f.deadLetterIDs.isEmpty)
        #expect(try f.count("SELECT count(*) FROM herald.jobs") == 0, "discarding creates no job")
    }

    @Test func filtersAreLiteralAndBadOnesAreRefusedNamingTheField() throws {
        let f = try DeadLetterFixture()
        defer { f.close() }
        let c = f.connection
        let percent = try f.add(reason: "quota 100% used")
        let plain = try f.add(reason: "quota 1000 used")
        let quote = try f.add(reason: "it's broken; DROP TABLE herald.jobs; --")
        func ids(_ reason: String) throws -> [Int] {
            try DeadLetters.list(c, filter: DeadLetterFilter(reason: reason), limit: 10).map(\.id).sorted()
        }
        #expect(try ids("100%") == [percent], "% is not a wildcard")
        #expect(try ids("quota 1_0") == [], "_ is not a wildcard")
        #expect(try ids("'s broken; DROP TABLE herald.jobs; --") == [quote])
        #expect(try ids("' OR '1'='1") == [])
        #expect(try f.count("SELECT count(*) FROM herald.dead_letters") == 3)
        _ = plain

        #expect(throws: AdminError.self) { try DeadLetters.list(c, filter: DeadLetterFilter(reason: "a\u{0}b"), limit: 10) }
        do {
            _ = try DeadLetters.retry(c, matching: DeadLetterFilter(queue: "x'; DELETE FROM herald.dead_letters; --"), source: "test")
            Issue.record("an unknown queue was accepted")
        } catch let error as AdminError {
            #expect(error.kind == .notFound)
            #expect(error.description.contains("no dead letters in queue") && error.description.contains("default"))
        }
        do {
            _ = try DeadLetters.retry(c, ids: [percent, 987_654], source: "test")
            Issue.record("a missing id was accepted")
        } catch let error as AdminError {
            #expect(error.kind == .notFound && error.description == "no dead letter with id 987654")
        }
        #expect(try f.count("SELECT count(*) FROM herald.dead_letters") == 3, "nothing changed")
        #expect(try f.count("SELECT count(*) FROM herald.jobs") == 0)
        #expect(try f.count("SELECT count(*) FROM herald.admin_log") == 0, "a refused action is not logged as done")
    }
}

/// `herald dead` and `herald stats` as a user runs them.
@Suite struct DeadCommandTests {
    func herald(_ arguments: [String], _ f: DeadLetterFixture) throws -> (status: Int32?, output: String) {
        try HeraldProcess.run(arguments, environment: ["DATABASE_URL": f.database.url], timeout: 60)
    }

    @Test func listShowsWhomEachDeadLetterWasForAndJSONCarriesItWhole() throws {
        let f = try DeadLetterFixture()
        defer { f.close() }
        let token = "dXk2" + String(repeating: "Qm9v", count: 38) + "END9"
        let condition = "'sports' in topics && ('scores' in topics || 'news' in topics)"
        func add(_ kind: String, _ message: String) throws {
            try f.connection.query("""
                INSERT INTO herald.dead_letters (job_id, queue, kind, message, attempts, max_attempts, reason, errors, created_at)
                VALUES (2000 + (SELECT count(*) FROM herald.dead_letters), 'default', $1, $2::jsonb, 1, 25, 'INVALID_ARGUMENT: test', '[]', now())
                """, [.text(kind), .text(message)])
        }
        let tokenMessage: JSONValue = ["token": .string(token), "data": ["k": "v"]]
        let conditionMessage: JSONValue = ["condition": .string(condition)]
        // An APNs job's letter: its provider and device token, as an FCM job's show its token.
        let apnsToken = "ab" + String(repeating: "0", count: 60) + "cd"
        try add("send", #"{"apns_token": "\#(apnsToken)", "apns": {"payload": {"aps": {"alert": "Hi"}}}}"#)
        try add("send", tokenMessage.serialized)
        try add("send", #"{"topic": "breaking-news", "notification": {"title": "t"}}"#)
        try add("send", conditionMessage.serialized)
        try add("group", #"{"operation": "add", "notification_key_name": "family-42", "registration_ids": ["a"]}"#)

        let table = try herald(["dead", "list"], f)
        #expect(table.status == 0, "\(table.output)")
        let lines = table.output.split(separator: "\n").map(String.init)
        #expect(lines.first?.contains("TARGET") == true && lines.first?.contains("PROVIDER") == true, "TARGET and PROVIDER columns: \(table.output)")
        let apnsLine = try #require(lines.first { $0.contains("apns_token:ab00") }, "the APNs letter's row names its device token: \(table.output)")
        #expect(apnsLine.contains(" apns ") && apnsLine.hasSuffix("INVALID_ARGUMENT: test"), "\(apnsLine)")
        #expect(lines.first { $0.contains("topic:breaking-news") }?.contains(" fcm ") == true, "\(table.output)")
        let tokenLine = try #require(lines.first { $0.contains("token:dXk2") }, "the token's row: \(table.output)")
        #expect(tokenLine.contains("END9") && !tokenLine.contains(token), "a long token is shortened, its start and end kept: \(tokenLine)")
        #expect(table.output.contains("topic:breaking-news"), "\(table.output)")
        #expect(table.output.contains("condition:'sports' in topics"), "\(table.output)")
        #expect(table.output.contains("group:family-42"), "\(table.output)")

        let json = try herald(["dead", "list", "--json"], f)
        #expect(json.status == 0, "\(json.output)")
        let listed = try JSONValue.parse(json.output).arrayValue ?? []
        let targets = listed.map { "\($0["target_type"]?.stringValue ?? "nil")=\($0["target"]?.stringValue ?? "nil")" }
        #expect(targets == ["group=family-42", "condition=\(condition)", "topic=breaking-news", "token=\(token)", "apns_token=\(apnsToken)"],
                "newest first, each target in full: \(targets)")
        #expect(listed.map { $0["provider"]?.stringValue ?? "nil" } == ["fcm", "fcm", "fcm", "fcm", "apns"])

        let shown = try herald(["dead", "show", String(listed[3]["id"]?.intValue ?? 0)], f)
        #expect(shown.status == 0 && shown.output.contains("target:     token \(token)") && shown.output.contains("provider:   FCM"), "\(shown.output)")
        let apns = try herald(["dead", "show", String(listed.last?["id"]?.intValue ?? 0)], f)
        #expect(apns.status == 0 && apns.output.contains("target:     apns_token \(apnsToken)") && apns.output.contains("provider:   APNs"), "\(apns.output)")
    }

    @Test func listShowRetryDiscardFromTheShell() throws {
        let f = try DeadLetterFixture()
        defer { f.close() }
        let auth = try f.add(reason: "THIRD_PARTY_AUTH_ERROR: expired", token: "shell-a")
        let invalid = try f.add(queue: "marketing", reason: "INVALID_ARGUMENT: bad", token: "shell-b")
        let keyed = try f.add(reason: "THIRD_PARTY_AUTH_ERROR: keyed", token: "shell-c", dedupeKey: "k-1")
        let pendingJob = try f.connection.query("SELECT herald.enqueue('{\"token\":\"p\"}', dedupe_key => 'k-1')").int(0, 0)!

        var run = try herald(["dead", "list", "--json", "--queue", "marketing"], f)
        #expect(run.status == 0, "\(run.output)")
        let listed = try JSONValue.parse(run.output).arrayValue ?? []
        #expect(listed.compactMap { $0["id"]?.intValue } == [invalid])
        #expect(listed.first?["message"]?["token"]?.stringValue == "shell-b")
        for field in ["id", "job_id", "queue", "reason", "attempts", "dead_at", "message"] {
            #expect(listed.first?[field] != nil, "field \(field)")
        }

        run = try herald(["dead", "list"], f)
        #expect(run.status == 0 && run.output.contains("THIRD_PARTY_AUTH_ERROR: expired"), "\(run.output)")
        run = try herald(["dead", "show", String(invalid)], f)
        #expect(run.status == 0 && run.output.contains("INVALID_ARGUMENT: bad") && run.output.contains("shell-b"), "\(run.output)")

        run = try herald(["dead", "show", "424242"], f)
        #expect(run.status == 2 && run.output.contains("no dead letter with id 424242"), "\(run.output)")
        run = try herald(["dead", "retry", String(auth), "424242"], f)
        #expect(run.status == 2 && run.output.contains("no dead letter with id 424242"), "\(run.output)")
        #expect(try f.deadLetterIDs == [auth, invalid, keyed], "a missing id changes nothing")
        run = try herald(["dead", "retry"], f)
        #expect(run.status == 2 && run.output.contains("give dead-letter ids or --all"), "\(run.output)")
        run = try herald(["dead", "retry", "--all", "--queue", "nope"], f)
        #expect(run.status == 2 && run.output.contains("no dead letters in queue \"nope\""), "\(run.output)")
        // Retry by reason: the auth error goes back; the one whose key is pending stays, named, status 1.
        run = try herald(["dead", "retry", "--all", "--reason", "THIRD_PARTY_AUTH_ERROR"], f)
        #expect(run.status == 1, "\(run.output)")
        #expect(run.output.contains("retried 1 dead letter"))
        #expect(run.output.contains("dead letter \(keyed) is kept") && run.output.contains("pending job \(pendingJob)"), "\(run.output)")
        #expect(try f.deadLetterIDs == [invalid, keyed])
        #expect(try f.count("SELECT count(*) FROM herald.jobs WHERE message->>'token' = 'shell-a' AND state = 'available'") == 1)

        run = try herald(["dead", "discard", String(invalid)], f)
        #expect(run.status == 0 && run.output.contains("discarded 1 dead letter: \(invalid)"), "\(run.output)")
        #expect(try f.deadLetterIDs == [keyed])

        // Both actions are in the audit log: what, which ids, from where.
        let log = try AdminLog.recent(f.connection, limit: 10)
        #expect(log.map(\.action) == ["discard", "retry_matching"])
        #expect(log[0].ids == [invalid] && log[1].ids == [auth])
        #expect(log.allSatisfy { $0.source.hasPrefix("shell ") })
        #expect(log[1].details["filter"]?["reason"]?.stringValue == "THIRD_PARTY_AUTH_ERROR")

        // A queue that exists but holds no dead letter: nothing to do is not a failure (cron).
        try f.connection.execute("INSERT INTO herald.jobs (message, queue) VALUES ('{\"token\": \"m\"}', 'newsletter')")
        run = try herald(["dead", "discard", "--all", "--queue", "newsletter", "--older-than", "30d"], f)
        #expect(run.status == 0 && run.output.contains("discarded 0 dead letters"), "\(run.output)")
        run = try herald(["dead", "retry", "--all", "--queue", "newsletter"], f)
        #expect(run.status == 0 && run.output.contains("retried 0 dead letters"), "\(run.output)")
        #expect(try f.deadLetterIDs == [keyed], "nothing changed")
    }

    @Test func statsShowsQueuesStatesAgeAndDeadLetters() throws {
        let f = try DeadLetterFixture()
        defer { f.close() }
        let inserted = Date()
        try f.connection.query("""
            INSERT INTO herald.jobs (queue, message, run_at) SELECT 'alerts', '{"token":"t"}', now() - interval '90 seconds'
            FROM generate_series(1, 7)
            """)
        try f.connection.query("INSERT INTO herald.jobs (queue, message, run_at) VALUES ('alerts', '{\"token\":\"t\"}', now() + interval '1 hour')")
        try f.connection.query("""
            INSERT INTO herald.jobs (queue, message, state, finished_at) SELECT 'alerts', '{"token":"t"}', 'completed', now()
            FROM generate_series(1, 4)
            """)
        try f.add(queue: "alerts", reason: "INTERNAL: x")
        let run = try herald(["stats"], f)
        #expect(run.status == 0, "\(run.output)")
        let header = try #require(run.output.split(separator: "\n").first { $0.hasPrefix("QUEUE") })
        let row = try #require(run.output.split(separator: "\n").first { $0.hasPrefix("alerts") })
        let columns = header.split(separator: " ").map(String.init)
        let cells = row.split(separator: " ").map(String.init)
        func cell(_ name: String) -> String? {
            guard let index = columns.firstIndex(of: name) else { return nil }
            return cells.indices.contains(index) ? cells[index] : nil
        }
        #expect(cell("AVAILABLE") == "7" && cell("SCHEDULED") == "1" && cell("COMPLETED") == "4" && cell("DEAD") == "1", "\(run.output)")
        // 90 s when it was inserted, and older by however long the test took to get the answer
        // (on a loaded machine that can be a minute).
        let waited = Date().timeIntervalSince(inserted)
        let shown = cells.last.flatMap { age -> Int? in
            let parts = age.split(separator: "m")
            guard parts.count == 2, let minutes = Int(parts[0]), let seconds = Int(parts[1].dropLast()), parts[1].hasSuffix("s") else { return nil }
            return minutes * 60 + seconds
        }
        #expect(shown.map { $0 >= 90 && Double($0) <= 91 + waited } == true,
                "the oldest available job waited 90 s and \(Int(waited)) s more at most: \(run.output)")
        #expect(run.output.contains("4 completed"), "\(run.output)")
    }

    @Test func statsWatchRedrawsInPlace() throws {
        let f = try DeadLetterFixture()
        defer { f.close() }
        let watch = try HeraldProcess(["stats", "--watch", "--interval", "0.2"], environment: ["DATABASE_URL": f.database.url])
        try watch.start()
        defer { watch.signal(SIGKILL); watch.wait(timeout: 10) }
        #expect(waitUntil(timeout: 30) { watch.output.components(separatedBy: "herald stats").count >= 3 }, "\(watch.output)")
        try f.add(queue: "late", reason: "INTERNAL: y")
        #expect(waitUntil(timeout: 30) { watch.output.contains("late") }, "a new queue shows on the next frame")
        // Each frame starts at the top left instead of scrolling.
        #expect(watch.output.components(separatedBy: "\u{1B}[H").count >= 3)
    }
}
