import Emulator
import FCM
import Foundation
import JSON
import Postgres
import Testing
import TestSupport

/// Legacy payloads through the real worker binary to the emulator: every Table 1 and Table 2
/// field (docs/legacy.md 1) lands where docs/legacy.md section 4 puts it, a 50-token multicast answers per index in the
/// legacy shape, rows written straight into herald.jobs (by a trigger) are delivered, and a dry
/// run delivers nothing.
@Suite(.serialized) struct LegacyEndToEndTests {
    func drain(_ stack: WorkerStack) throws {
        let run = try stack.work(["--drain", "--processes", "1", "--poll-interval", "0.2"])
        #expect(run.status == 0, "\(run.output)")
    }

    func received(_ stack: WorkerStack, token: String) throws -> JSONValue {
        let messages = stack.emulator.deliveredMessages(token: token)
        try #require(messages.count == 1, "\(token): \(messages.count) deliveries")
        return try #require(try JSONValue.parse(messages[0].body)["message"])
    }

    @Test func everyTable1AndTable2FieldReachesFCMWhereSection4PutsIt() throws {
        let stack = try WorkerStack()
        defer { stack.close() }
        let c = stack.connection
        let legacy = #"""
            {"to": "legacy-all-fields", "collapse_key": "score-update", "priority": "high", "content_available": true,
             "mutable_content": true, "time_to_live": 3600, "restricted_package_name": "com.example.scores",
             "data": {"score": "3x1", "minute": 87, "final": false},
             "notification": {"title": "Goal", "body": "3-1 in the 87th", "image": "https://example.com/goal.png",
                              "android_channel_id": "goals", "icon": "ic_goal", "sound": "whistle.caf", "tag": "match-7",
                              "color": "#ff0000", "click_action": "https://example.com/match/7", "subtitle": "Premier League",
                              "badge": "2", "body_loc_key": "GOAL_BODY", "body_loc_args": "[\"Arsenal\",3,1]",
                              "title_loc_key": "GOAL_TITLE", "title_loc_args": ["Arsenal"]}}
            """#
        let before = Int(Date().timeIntervalSince1970)
        let ids = try c.query("SELECT herald.enqueue_legacy($1::jsonb)", [.text(legacy)])[0, 0]
        #expect(ids?.hasPrefix("{") == true)
        _ = try c.query(#"SELECT herald.enqueue_legacy('{"to": "/topics/scores", "time_to_live": 0, "notification": {"title": "Full time"}}')"#)
        _ = try c.query(#"SELECT herald.enqueue_legacy($1::jsonb)"#, [.text(#"{"condition": "\"scores\" IN topics || 'news' in Topics", "priority": "normal", "data": {"k": "v"}}"#)])
        _ = try c.query("SELECT herald.enqueue_legacy_form($1)", [.text("registration_id=legacy-form&collapse_key=c&time_to_live=60&restricted_package_name=com.x&data.score=3x1")])
        _ = try c.query(#"SELECT herald.enqueue_legacy('{"notification_key": "group-key-7", "data": {"k": "v"}}')"#)
        try drain(stack)
        let after = Int(Date().timeIntervalSince1970)

        let message = try received(stack, token: "legacy-all-fields")
        #expect(message["notification"] == ["title": "Goal", "body": "3-1 in the 87th", "image": "https://example.com/goal.png"])
        #expect(message["data"] == ["score": "3x1", "minute": "87", "final": "false"])
        #expect(message["android"] == [
            "collapse_key": "score-update", "priority": "HIGH", "ttl": "3600s", "restricted_package_name": "com.example.scores",
            "notification": ["channel_id": "goals", "icon": "ic_goal", "sound": "whistle.caf", "tag": "match-7", "color": "#ff0000",
                             "click_action": "https://example.com/match/7", "body_loc_key": "GOAL_BODY",
                             "body_loc_args": ["Arsenal", "3", "1"], "title_loc_key": "GOAL_TITLE", "title_loc_args": ["Arsenal"]],
        ])
        let headers = try #require(message["apns"]?["headers"]?.objectValue)
        #expect(headers["apns-collapse-id"] == "score-update" && headers["apns-priority"] == "10")
        // apns-expiration counts from when the worker built the request.
        let expiration = try #require(headers["apns-expiration"]?.stringValue.flatMap { Int($0) })
        #expect(expiration >= before + 3600 && expiration <= after + 3600)
        #expect(message["apns"]?["payload"] == ["aps": [
            "alert": ["title": "Goal", "body": "3-1 in the 87th", "subtitle": "Premier League", "loc-key": "GOAL_BODY",
                      "loc-args": ["Arsenal", "3", "1"], "title-loc-key": "GOAL_TITLE", "title-loc-args": ["Arsenal"]],
            "badge": 2, "sound": "whistle.caf", "category": "https://example.com/match/7", "content-available": 1, "mutable-content": 1,
        ]])
        #expect(message["webpush"] == ["headers": ["TTL": "3600"], "notification": ["icon": "ic_goal"],
                                       "fcm_options": ["link": "https://example.com/match/7"]])

        let topic = try #require(stack.emulator.deliveredMessages().first { $0.target == "topic:scores" })
        let topicMessage = try JSONValue.parse(topic.body)["message"]
        #expect(topicMessage?["apns"]?["headers"] == ["apns-expiration": "0"])
        #expect(topicMessage?["android"] == ["ttl": "0s"])
        let condition = try #require(stack.emulator.deliveredMessages().first { $0.target.hasPrefix("condition:") })
        #expect(try JSONValue.parse(condition.body)["message"]?["condition"] == "'scores' in topics || 'news' in topics")
        let form = try received(stack, token: "legacy-form")
        #expect(form["android"] == ["collapse_key": "c", "ttl": "60s", "restricted_package_name": "com.x"])
        #expect(form["data"] == ["score": "3x1"])
        #expect(try received(stack, token: "group-key-7")["data"] == ["k": "v"])
        #expect(try stack.count("SELECT count(*) FROM herald.jobs WHERE state <> 'completed'") == 0)
    }

    @Test func aFiftyTokenMulticastAnswersPerIndexInTheLegacyShape() throws {
        let stack = try WorkerStack()
        defer { stack.close() }
        var tokens = (0..<50).map { "multicast-\($0)" }
        var expected: [Int: JSONValue] = [:]
        for index in [3, 17, 41] { tokens[index] = "fail-unregistered-\(index)"; expected[index] = ["error": "NotRegistered"] }
        for index in [8, 29] { tokens[index] = "fail-invalid-\(index)"; expected[index] = ["error": "InvalidRegistration"] }
        tokens[33] = "fail-mismatch-33"; expected[33] = ["error": "MismatchSenderId"]
        tokens[44] = "fail-auth-44"; expected[44] = ["error": "InvalidApnsCredential"]
        tokens[12] = "fail-unavailable-1-12"   // one 503, then delivered on the retry
        tokens[49] = tokens[0]                  // a duplicate keeps its own index and delivery
        let payload: JSONValue = ["registration_ids": .array(tokens.map { .string($0) }), "priority": "high",
                                  "notification": ["title": "Kick-off", "body": "Arsenal v Chelsea"]]
        let ids = try stack.connection.query("SELECT array_to_json(herald.enqueue_legacy($1::jsonb))::text", [.text(payload.serialized)])
        let jobIDs = try #require(try JSONValue.parse(ids[0, 0]!).arrayValue).compactMap(\.intValue)
        #expect(jobIDs.count == 50)
        #expect(jobIDs == jobIDs.sorted() && Set(jobIDs).count == 50, "one job per token, in order")

        // Before the worker runs every result is pending and counted nowhere.
        let pending = try JSONValue.parse(try stack.connection.query("SELECT herald.legacy_result($1::bigint[])::text",
                                                                     [.text("{" + jobIDs.map(String.init).joined(separator: ",") + "}")])[0, 0]!)
        #expect(pending["success"] == 0 && pending["failure"] == 0)
        #expect(pending["results"]?.arrayValue?.allSatisfy { $0 == ["pending": true] } == true)

        try drain(stack)
        let result = try JSONValue.parse(try stack.connection.query("SELECT herald.legacy_result($1::bigint[])::text",
                                                                    [.text("{" + jobIDs.map(String.init).joined(separator: ",") + "}")])[0, 0]!)
        let results = try #require(result["results"]?.arrayValue)
        try #require(results.count == 50)
        #expect(result["multicast_id"]?.intValue == jobIDs[0])
        #expect(result["canonical_ids"] == 0)
        #expect(result["failure"]?.intValue == expected.count)
        #expect(result["success"]?.intValue == 50 - expected.count)
        let names = Set(stack.emulator.deliveredMessages().map { String($0.name.split(separator: "/").last!) })
        for (index, item) in results.enumerated() {
            if let error = expected[index] {
                #expect(item == error, "results[\(index)] for \(tokens[index]): \(item)")
            } else {
                let id = try #require(item["message_id"]?.stringValue, "results[\(index)]: \(item)")
                #expect(names.contains(id), "results[\(index)]: \(id) is a message the emulator received")
            }
        }
        #expect(stack.emulator.deliveredMessages(token: "multicast-0").count == 2, "the duplicate token is sent once per index")
        #expect(stack.emulator.deliveredMessages(token: "fail-unavailable-1-12").count == 1)
        // The unregistered tokens were pruned the usual way.
        #expect(try stack.count("SELECT count(*) FROM herald.pruned_tokens WHERE token LIKE 'fail-unregistered-%'") == 3)
        // herald.legacy_multicast finds the whole request from any of its jobs.
        let siblings = try stack.connection.query("SELECT array_to_json(herald.legacy_multicast($1))::text", [.int(jobIDs[17])])
        #expect(try JSONValue.parse(siblings[0, 0]!).arrayValue?.compactMap(\.intValue) == jobIDs)
        // It is a multicast like a v1 one: herald.multicast_result reads the same outcomes,
        // index by index, in the Admin SDKs' shape.
        let v1 = try JSONValue.parse(try stack.connection.query("""
            SELECT herald.multicast_result(m.id)::text FROM herald.multicasts m WHERE m.job_ids @> ARRAY[$1::bigint]
            """, [.int(jobIDs[0])])[0, 0]!)
        let responses = try #require(v1["responses"]?.arrayValue)
        #expect(responses.count == 50 && v1["failure_count"]?.intValue == expected.count, "\(v1)")
        for (index, item) in responses.enumerated() {
            #expect(item["success"]?.boolValue == (expected[index] == nil), "responses[\(index)]: \(item)")
        }
    }

    @Test func legacyRowsWrittenByATriggerAreDelivered() throws {
        let stack = try WorkerStack()
        defer { stack.close() }
        let c = stack.connection
        // Code written for the old API: a trigger that writes legacy payloads into herald.jobs.
        try c.execute("""
            CREATE TABLE public.alerts (id bigserial PRIMARY KEY, tokens text[] NOT NULL, text text NOT NULL);
            CREATE FUNCTION public.alerts_push() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                INSERT INTO herald.jobs (message)
                VALUES (jsonb_build_object('registration_ids', to_jsonb(NEW.tokens), 'priority', 'high', 'time_to_live', 600,
                                           'notification', jsonb_build_object('title', 'Alert', 'body', NEW.text, 'badge', '1'),
                                           'data', jsonb_build_object('alert_id', NEW.id)));
                RETURN NEW;
            END $$;
            CREATE TRIGGER alerts_push AFTER INSERT ON public.alerts FOR EACH ROW EXECUTE FUNCTION public.alerts_push();
            """)
        try c.execute("INSERT INTO public.alerts (tokens, text) VALUES (ARRAY['trigger-1', 'trigger-2', 'fail-unregistered-t'], 'Storm warning')")
        // Straight INSERTs as old code wrote them: one single token, one refused (time_to_live out of range).
        let single = try c.query(#"INSERT INTO herald.jobs (message) VALUES ('{"to": "trigger-3", "data": {"k": "v"}}') RETURNING id"#).int(0, 0)!
        let refused = try c.query(#"INSERT INTO herald.jobs (message) VALUES ('{"to": "trigger-4", "time_to_live": 9999999}') RETURNING id"#).int(0, 0)!
        #expect(try stack.count("SELECT count(*) FROM herald.jobs") == 5, "the three-token row became three jobs")

        try drain(stack)
        for token in ["trigger-1", "trigger-2"] {
            let message = try received(stack, token: token)
            #expect(message["notification"] == ["title": "Alert", "body": "Storm warning"])
            #expect(message["apns"]?["payload"] == ["aps": ["badge": 1]])
            #expect(message["android"]?["ttl"] == "600s")
            #expect(message["data"]?["alert_id"] == "1")
        }
        #expect(try received(stack, token: "trigger-3")["data"] == ["k": "v"])
        #expect(try stack.count("SELECT count(*) FROM herald.jobs WHERE state = 'completed'") == 3)
        #expect(try stack.count("SELECT count(*) FROM herald.jobs WHERE state = 'discarded' AND last_error LIKE 'UNREGISTERED%'") == 1)
        let reason = try c.query("SELECT reason FROM herald.dead_letters WHERE job_id = $1", [.int(refused)])[0, 0]
        #expect(reason == "InvalidTtl at legacy.time_to_live: must be a whole number of seconds from 0 to 2419200 (4 weeks), not 9999999")
        #expect(stack.emulator.deliveredMessages(token: "trigger-4").isEmpty)
        #expect(try stack.count("SELECT count(*) FROM herald.jobs WHERE id = $1 AND state = 'completed'", [.int(single)]) == 1)
        // The application's own row never waits on a refused payload: its transaction committed.
        #expect(try stack.count("SELECT count(*) FROM public.alerts") == 1)
    }

    @Test func aDryRunDeliversNothing() throws {
        let stack = try WorkerStack()
        defer { stack.close() }
        let c = stack.connection
        let legacy = try c.query(#"SELECT array_to_json(herald.enqueue_legacy('{"registration_ids": ["dry-1", "dry-2"], "dry_run": true, "notification": {"title": "T"}}'))::text"#)[0, 0]!
        let v1 = try c.query(#"SELECT herald.enqueue('{"token": "dry-3", "notification": {"title": "T"}}', validate_only => true)"#).int(0, 0)!
        let inserted = try c.query(#"INSERT INTO herald.jobs (message) VALUES ('{"to": "dry-4", "dry_run": 1, "data": {"k": "v"}}') RETURNING id"#).int(0, 0)!
        let real = try c.query(#"SELECT herald.enqueue('{"token": "not-dry", "notification": {"title": "T"}}')"#).int(0, 0)!
        let refused = try c.query(#"SELECT herald.enqueue('{"token": "fail-invalid-dry", "notification": {"title": "T"}}', validate_only => true)"#).int(0, 0)!
        try drain(stack)

        // A refused dry run stays a dry run when it is replayed.
        let letter = try c.query("SELECT id, validate_only FROM herald.dead_letters WHERE job_id = $1", [.int(refused)])
        #expect(letter[0, 1] == "t")
        let replayed = try c.query("SELECT herald.retry_dead_letter($1)", [.int(letter.int(0, 0)!)]).int(0, 0)!
        #expect(try stack.count("SELECT count(*) FROM herald.jobs WHERE id = $1 AND validate_only", [.int(replayed)]) == 1)

        #expect(stack.emulator.deliveredMessages().map(\.token) == ["not-dry"], "only the real send was delivered")
        #expect(stack.emulator.statistics["validate_only"]?.intValue == 4, "the four accepted dry runs")
        #expect(stack.emulator.statistics["delivered"]?.intValue == 1)
        let ids = try JSONValue.parse(legacy).arrayValue!.compactMap(\.intValue) + [v1, inserted]
        for id in ids {
            let row = try c.query("SELECT state, validate_only, fcm_message_name FROM herald.jobs WHERE id = $1", [.int(id)])
            #expect(row[0, 0] == "completed" && row[0, 1] == "t" && row[0, 2] != nil, "job \(id)")
        }
        #expect(try stack.count("SELECT count(*) FROM herald.jobs WHERE id = $1 AND NOT validate_only", [.int(real)]) == 1)
        let result = try JSONValue.parse(try c.query("SELECT herald.legacy_result($1::bigint[])::text",
                                                     [.text("{" + ids.prefix(2).map(String.init).joined(separator: ",") + "}")])[0, 0]!)
        #expect(result["success"] == 2 && result["failure"] == 0)
    }

    @Test func heraldSendLegacyPrintsEachOutcomeAndTheLegacyResponse() throws {
        let stack = try WorkerStack()
        defer { stack.close() }
        let directory = NSTemporaryDirectory() + "herald-legacy-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        func send(_ name: String, _ contents: String, _ extra: [String] = []) throws -> (status: Int32?, output: String) {
            let path = directory + "/" + name
            try contents.write(toFile: path, atomically: true, encoding: .utf8)
            return try HeraldProcess.run(["send", "--legacy", path] + extra, environment: stack.environment, timeout: 60)
        }

        let multicast = try send("multicast.json", #"{"registration_ids": ["cli-1", "fail-unregistered-cli", "cli-2"], "data": {"n": 7}}"#)
        #expect(multicast.status == 1, "one token failed: \(multicast.output)")
        #expect(multicast.output.contains("note: legacy.data.n: number sent as its JSON text"))
        #expect(multicast.output.contains("token fail-unregistered-cli: NotRegistered (UNREGISTERED"))
        let response = try JSONValue.parse(try #require(multicast.output.split(separator: "\n").last.map(String.init)))
        #expect(response["success"] == 2 && response["failure"] == 1 && response["canonical_ids"] == 0)
        let results = try #require(response["results"]?.arrayValue)
        #expect(results.count == 3 && results[1] == ["error": "NotRegistered"])
        let first = try #require(stack.emulator.deliveredMessages(token: "cli-1").first)
        #expect(results[0]["message_id"]?.stringValue == String(first.name.split(separator: "/").last!))
        #expect(try JSONValue.parse(first.body)["message"]?["data"] == ["n": "7"])

        let form = try send("form.txt", "registration_id=cli-form&data.score=3x1&dry_run=true\n", ["--form"])
        #expect(form.status == 0, "\(form.output)")
        #expect(stack.emulator.deliveredMessages(token: "cli-form").isEmpty, "a dry run delivers nothing")
        #expect(stack.emulator.statistics["validate_only"]?.intValue == 1)

        let refused = try send("refused.json", #"{"to": "cli-3", "priority": "urgent"}"#)
        #expect(refused.status == 1)
        #expect(refused.output.contains(#"InvalidParameters at legacy.priority: must be "high" or "normal", not "urgent"; nothing was sent"#))
        #expect(stack.emulator.deliveredMessages(token: "cli-3").isEmpty)

        let notJSON = try send("form-without-flag.txt", "registration_id=x")
        #expect(notJSON.status == 2 && notJSON.output.contains("needs --form"), "\(notJSON.output)")
    }

    @Test func anInvalidPayloadEnqueuesNothing() throws {
        let database = try TestDatabase.fresh()
        defer { database.drop() }
        let c = try database.connect()
        do {
            _ = try c.query(#"SELECT herald.enqueue_legacy('{"registration_ids": ["a", ""], "data": {"k": "v"}}')"#)
            Issue.record("accepted")
        } catch {
            #expect(error.sqlState == "22023")
            #expect(error.message.contains("MissingRegistration at legacy.registration_ids[1]: is empty"))
        }
        do {
            _ = try c.query("SELECT herald.enqueue_legacy_form('data.k=v')")
            Issue.record("accepted")
        } catch {
            #expect(error.message.contains("MissingRegistration at legacy.registration_id"))
        }
        #expect(try c.query("SELECT count(*) FROM herald.jobs").int(0, 0) == 0)
    }
}
