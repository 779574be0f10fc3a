import FCM
import Foundation
import JSON
import Testing
@testable import Emulator

@Suite struct EmulatorRoutingTests {
    @Test func sendPathNamesTheProject() {
        #expect(Route.match(method: "POST", path: "/v1/projects/my-app-1/messages:send") == .send(project: "my-app-1"))
        #expect(Route.match(method: "GET", path: "/v1/projects/my-app-1/messages:send") == .methodNotAllowed(allowed: "POST"))
        #expect(Route.match(method: "POST", path: "/v1/projects//messages:send") == .notFound)
        #expect(Route.match(method: "POST", path: "/v1/projects/a/b/messages:send") == .notFound)
        #expect(Route.match(method: "POST", path: "/v1/projects/a/messages:sendx") == .notFound)
    }

    @Test func fixedEndpoints() {
        #expect(Route.match(method: "POST", path: "/token") == .token)
        #expect(Route.match(method: "GET", path: "/token") == .methodNotAllowed(allowed: "POST"))
        #expect(Route.match(method: "POST", path: "/fcm/notification") == .manageDeviceGroup)
        #expect(Route.match(method: "GET", path: "/fcm/notification") == .lookUpDeviceGroup)
        #expect(Route.match(method: "GET", path: "/emulator/messages") == .listMessages)
        #expect(Route.match(method: "DELETE", path: "/emulator/messages") == .reset)
        #expect(Route.match(method: "GET", path: "/emulator/stats") == .stats)
        #expect(Route.match(method: "GET", path: "/emulator/refusals") == .listRefusals)
        #expect(Route.match(method: "DELETE", path: "/emulator/refusals") == .methodNotAllowed(allowed: "GET"))
        #expect(Route.match(method: "GET", path: "/nothing") == .notFound)
    }
}

@Suite struct EmulatorValidationTests {
    private func violation(_ text: String) throws -> FieldViolation? {
        switch RequestChecker.validate(body: try JSONValue.parse(text)) {
        case .success: return nil
        case .failure(let violation): return violation
        }
    }

    private func accepted(_ text: String) throws -> ValidatedSend? {
        if case .success(let send) = RequestChecker.validate(body: try JSONValue.parse(text)) { return send }
        return nil
    }

    @Test func acceptsTheSeedExamples() throws {
        // FCM's examples (docs/fcm.md): a device-group message, a Live Activity start, per-platform overrides.
        #expect(try accepted(#"{"message":{"token":"APA91bGHXQBB","data":{"hello":"This is a Firebase Cloud Messaging device group message!"}}}"#) != nil)
        #expect(try accepted(#"""
            {"message":{"token":"FCM_TOKEN","apns":{"live_activity_token":"LA","headers":{"apns-priority":"10"},
             "payload":{"aps":{"timestamp":1700000000,"event":"start","content-state":{"demo":1},
             "attributes-type":"DemoAttributes","attributes":{"demoAttribute":1},"alert":{"title":"t","body":"b"}}}}}}
            """#) != nil)
        #expect(try accepted(#"""
            {"message":{"topic":"industry-tech","notification":{"title":"Breaking News","body":"New news story available."},
             "android":{"priority":"HIGH","ttl":"86400s","notification":{"icon":"stock_ticker_update","color":"#7e55c3","click_action":"OPEN"}},
             "apns":{"headers":{"apns-priority":"5","apns-expiration":"1604750400"},"payload":{"aps":{"category":"NEW_MESSAGE_CATEGORY","mutable-content":1}},
                     "fcm_options":{"image":"https://example.com/a.png"}},
             "webpush":{"headers":{"TTL":"4500","Urgency":"high"},"fcm_options":{"link":"https://example.com/news"}}}}
            """#) != nil)
    }

    @Test func targetAndValidateOnly() throws {
        let send = try #require(try accepted(#"{"message":{"topic":"/topics/news"},"validate_only":true}"#))
        #expect(send.target == .topic("news"))
        #expect(send.validateOnly)
        #expect(try accepted(#"{"message":{"condition":"'a' in topics && ('b' in topics || !('c' in topics))"}}"#)?.target
                == .condition("'a' in topics && ('b' in topics || !('c' in topics))"))
        #expect(try accepted(#"{"message":{"fid":"installation-1"}}"#)?.target == .fid("installation-1"))
        // camelCase names are proto JSON too.
        #expect(try accepted(#"{"message":{"token":"t","android":{"collapseKey":"k","restrictedPackageName":"a.b"}},"validateOnly":false}"#) != nil)
    }

    @Test(arguments: [
        (#"{"message":{"data":{"a":"b"}}}"#, "message", "Recipient of the message is not set."),
        (#"{"message":{"token":"t","topic":"x"}}"#, "message.topic", "oneof field 'target' is already set"),
        (#"{"message":{"token":""}}"#, "message.token", "not a valid FCM registration token"),
        (#"{"message":{"topic":"bad topic"}}"#, "message.topic", "[a-zA-Z0-9-_.~%]+"),
        (#"{"message":{"token":"t","data":{"from":"x"}}}"#, "message.data", "'from' is reserved"),
        (#"{"message":{"token":"t","data":{"google.x":"x"}}}"#, "message.data", "'google.x' is reserved"),
        (#"{"message":{"token":"t","data":{"gcm_key":"x"}}}"#, "message.data", "'gcm_key' is reserved"),
        (#"{"message":{"token":"t","data":{"n":1}}}"#, "message.data[0].value", "TYPE_STRING"),
        (#"{"message":{"token":"t","android":{"ttl":"86400"}}}"#, "message.android.ttl", "Illegal duration format"),
        (#"{"message":{"token":"t","android":{"ttl":"-1s"}}}"#, "message.android.ttl", "Illegal duration format"),
        (#"{"message":{"token":"t","android":{"ttl":"1.1234567890s"}}}"#, "message.android.ttl", "Illegal duration format"),
        (#"{"message":{"token":"t","android":{"ttl":"2419201s"}}}"#, "message.android.ttl", "exceeds the maximum"),
        (#"{"message":{"token":"t","android":{"ttl":3600}}}"#, "message.android.ttl", "google.protobuf.Duration"),
        (#"{"message":{"token":"t","android":{"priority":"URGENT"}}}"#, "message.android.priority", "AndroidMessagePriority"),
        (#"{"message":{"token":"t","android":{"notification":{"color":"red"}}}}"#, "message.android.notification.color", "#rrggbb"),
        (##"{"message":{"token":"t","android":{"notification":{"colour":"#ffffff"}}}}"##, "message.android.notification", "Unknown name \"colour\""),
        (#"{"message":{"token":"t","apns":{"headers":{"apns-priority":"7"}}}}"#, "message.apns.headers", "apns-priority must be 1, 5 or 10"),
        (#"{"message":{"token":"t","apns":{"headers":{"apns-priority":10}}}}"#, "message.apns.headers[0].value", "TYPE_STRING"),
        (#"{"message":{"token":"t","webpush":{"fcm_options":{"link":"http://example.com"}}}}"#, "message.webpush.fcm_options.link", "HTTPS"),
        (#"{"message":{"token":"t","apns":{"live_activity_token":"la","payload":{"aps":{"event":"pause","timestamp":1}}}}}"#,
         "message.apns.payload.aps.event", "start, update or end"),
        (#"{"message":{"token":"t","apns":{"live_activity_token":"la","payload":{"aps":{"event":"update","timestamp":"1","content-state":{}}}}}}"#,
         "message.apns.payload.aps.timestamp", "integer"),
        (#"{"message":{"token":"t","apns":{"live_activity_token":"la","payload":{"aps":{"event":"start","timestamp":1,"content-state":{}}}}}}"#,
         "message.apns.payload.aps.attributes-type", "attributes-type"),
        (#"{"message":{"token":"t","apns":{"live_activity_token":"la","payload":{"aps":{"event":"update","timestamp":1,"content-state":[1]}}}}}"#,
         "message.apns.payload.aps.content-state", "object"),
        (#"{"message":{"token":"t","tokn":"x"}}"#, "message", "Unknown name \"tokn\" at 'message'"),
        (#"{"message":{"condition":"'a' in topics && 'b' in topics && 'c' in topics && 'd' in topics && 'e' in topics && 'f' in topics"}}"#,
         "message.condition", "at most 5 topics"),
        (#"{"message":{"condition":"'a' in topics &&"}}"#, "message.condition", "Invalid condition"),
        (#"{"msg":{"token":"t"}}"#, "msg", "Unknown name \"msg\""),
        (#"{"message":"t"}"#, "message", "google.firebase.fcm.v1.Message"),
    ])
    func rejectsNamingTheField(body: String, field: String, fragment: String) throws {
        let found = try #require(try violation(body), "accepted \(body)")
        #expect(found.field == field)
        #expect(found.message.contains(fragment) || found.detail.contains(fragment), "\(found)")
    }

    @Test func payloadLimitsMeasureTheSerializedMessage() throws {
        func message(target: String, filler: Int) -> String {
            #"{"message":{\#(target),"data":{"x":"\#(String(repeating: "a", count: filler))"}}}"#
        }
        // {"token":"t","data":{"x":"..."}} is 29 bytes plus the filler.
        #expect(try violation(message(target: #""token":"t""#, filler: 4096 - 29)) == nil)
        #expect(try violation(message(target: #""token":"t""#, filler: 4096 - 28))?.message.contains("4096") == true)
        // {"topic":"t","data":{"x":"..."}} is 29 bytes as well; topics allow 2048.
        #expect(try violation(message(target: #""topic":"t""#, filler: 2048 - 29)) == nil)
        #expect(try violation(message(target: #""topic":"t""#, filler: 2048 - 28))?.message.contains("2048") == true)
    }

    @Test func serializedLengthMatchesTheWriter() throws {
        let value = try JSONValue.parse(#"{"a":"x\"y\\z\n\u0001é","b":[1,2.5,true,null,{}],"c":{"d":[]}}"#)
        #expect(RequestChecker.serializedLength(value) == value.serialized.utf8.count)
    }

    @Test func durations() {
        #expect(RequestChecker.parseDuration("0s") == 0)
        #expect(RequestChecker.parseDuration("3.5s") == 3.5)
        #expect(RequestChecker.parseDuration("1.123456789s") != nil)
        for bad in ["s", "1", "1.s", ".5s", "1.1234567890s", "-1s", "1e3s", "1 s"] {
            #expect(RequestChecker.parseDuration(bad) == nil, "\(bad)")
        }
    }
}

@Suite struct EmulatorFaultTokenTests {
    @Test func parsesThePrefixes() {
        #expect(FaultToken.parse("fail-unregistered") == .unregistered)
        #expect(FaultToken.parse("fail-unregistered-42") == .unregistered)
        #expect(FaultToken.parse("fail-invalid:x") == .invalid)
        #expect(FaultToken.parse("fail-mismatch") == .mismatch)
        #expect(FaultToken.parse("fail-auth") == .thirdPartyAuth)
        #expect(FaultToken.parse("fail-quota-30") == .quota(retryAfter: 30))
        #expect(FaultToken.parse("fail-quota-5-job17") == .quota(retryAfter: 5))
        #expect(FaultToken.parse("fail-quota") == .quota(retryAfter: nil))
        #expect(FaultToken.parse("fail-quota-x") == .quota(retryAfter: nil))
        #expect(FaultToken.parse("fail-unavailable-2") == .unavailable(retryAfter: 2))
        #expect(FaultToken.parse("fail-internal-3") == .internal(failures: 3))
        #expect(FaultToken.parse("good-token") == nil)
        #expect(FaultToken.parse("fail-other") == nil)
    }

    @Test func answersByAttempt() {
        #expect(FaultToken.quota(retryAfter: 7).answer(attempt: 1) == ErrorAnswer(code: .quotaExceeded, retryAfter: 7))
        #expect(FaultToken.quota(retryAfter: 7).answer(attempt: 2) == nil)
        #expect(FaultToken.quota(retryAfter: nil).answer(attempt: 9) == ErrorAnswer(code: .quotaExceeded))
        #expect(FaultToken.unavailable(retryAfter: 1).answer(attempt: 1)?.httpStatus == 503)
        #expect(FaultToken.internal(failures: 2).answer(attempt: 2)?.httpStatus == 500)
        #expect(FaultToken.internal(failures: 2).answer(attempt: 3) == nil)
        #expect(FaultToken.unregistered.answer(attempt: 100)?.httpStatus == 404)
        #expect(FaultToken.mismatch.answer(attempt: 1)?.httpStatus == 403)
        #expect(FaultToken.thirdPartyAuth.answer(attempt: 1)?.httpStatus == 401)
    }

    @Test func errorBodiesCarryTheFcmErrorDetail() throws {
        let body = try JSONValue.parse(FCMResponses.errorBody(ErrorAnswer(code: .unregistered)))
        #expect(body["error"]?["code"]?.intValue == 404)
        #expect(body["error"]?["status"]?.stringValue == "NOT_FOUND")
        let details = try #require(body["error"]?["details"]?.arrayValue)
        #expect(details.contains { $0["@type"]?.stringValue == "type.googleapis.com/google.firebase.fcm.v1.FcmError" && $0["errorCode"]?.stringValue == "UNREGISTERED" })

        let plain = try JSONValue.parse(FCMResponses.errorBody(ErrorAnswer(code: .unauthenticated)))
        #expect(plain["error"]?["status"]?.stringValue == "UNAUTHENTICATED")
        #expect(plain["error"]?["details"] == nil)

        let invalid = try JSONValue.parse(FCMResponses.errorBody(ErrorAnswer(code: .invalidArgument),
                                                                   violation: FieldViolation(field: "message.android.ttl", message: "bad ttl")))
        let violations = invalid["error"]?["details"]?.arrayValue?.first { $0["@type"]?.stringValue == "type.googleapis.com/google.rpc.BadRequest" }
        #expect(violations?["fieldViolations"]?.arrayValue?.first?["field"]?.stringValue == "message.android.ttl")
    }
}

@Suite struct EmulatorScenarioTests {
    @Test func parsesEveryMember() throws {
        let scenario = try Scenario.parse(#"""
            {"seed": 42, "latency_ms": {"min": 5, "max": 50}, "error_rate": 0.25,
             "random_errors": [{"error": "UNAVAILABLE", "retry_after": 1}, {"error": "INTERNAL", "status": 502}],
             "quota": {"per_minute": 600000, "window": "continuous", "burst": 100},
             "scripts": [{"prefix": "flaky-", "answers": [{"error": "QUOTA_EXCEEDED", "retry_after": 3}, "success", {"error": "UNAUTHENTICATED"}],
                          "then": {"error": "UNREGISTERED", "message": "gone"}}]}
            """#)
        #expect(scenario.seed == 42)
        #expect(scenario.latency == .range(5, 50))
        #expect(scenario.errorRate == 0.25)
        #expect(scenario.randomErrors == [ErrorAnswer(code: .unavailable, retryAfter: 1), ErrorAnswer(code: .internal, status: 502)])
        #expect(scenario.quota == Scenario.Quota(perMinute: 600000, burst: 100, window: .continuous))
        let script = try #require(scenario.script(for: "flaky-7"))
        #expect(script.behaviour(attempt: 1) == .error(ErrorAnswer(code: .quotaExceeded, retryAfter: 3)))
        #expect(script.behaviour(attempt: 2) == .success)
        #expect(script.behaviour(attempt: 3) == .error(ErrorAnswer(code: .unauthenticated)))
        #expect(script.behaviour(attempt: 4) == .error(ErrorAnswer(code: .unregistered, message: "gone")))
        #expect(scenario.script(for: "steady-1") == nil)
        // FCM's shape is the default; the older one is asked for by name.
        #expect(scenario.quotaAnswer == .production)
        let older = try Scenario.parse(#"""
            {"quota": {"per_minute": 600000, "start": 0}, "quota_answer": "legacy",
             "scripts": [{"prefix": "r-", "answers": [{"error": "QUOTA_EXCEEDED", "quota": "rate-limit", "quota_limit_value": 1000000000000}]}]}
            """#)
        #expect(older.quotaAnswer == .legacy)
        // FCM's documented minute unless the scenario says otherwise.
        #expect(older.quota == Scenario.Quota(perMinute: 600000, start: 0, window: .minute))
        #expect(older.script(for: "r-1")?.behaviour(attempt: 1)
                == .error(ErrorAnswer(code: .quotaExceeded, quotaSubject: .rateLimit, quotaLimitValue: "1000000000000")))
    }

    @Test(arguments: [
        (#"{"sed": 1}"#, "unknown member \"sed\""),
        (#"{"error_rate": 2}"#, "error_rate"),
        (#"{"latency_ms": {"min": 9, "max": 1}}"#, "latency_ms"),
        (#"{"quota": {"burst": 5}}"#, "per_minute"),
        (#"{"quota": {"per_minute": 60, "start": 61}}"#, "quota.start"),
        (#"{"quota": {"per_minute": 60, "burst": 10}}"#, "\"window\": \"continuous\""),
        (#"{"quota": {"per_minute": 60, "window": "sliding"}}"#, "quota.window"),
        (#"{"quota_answer": "modern"}"#, "quota_answer"),
        (#"{"scripts": [{"prefix": "x", "answers": [{"error": "QUOTA_EXCEEDED", "quota_limit_value": 5}]}]}"#, "quota_limit_value"),
        (#"{"scripts": [{"answers": []}]}"#, "scripts[0]\" needs a \"prefix\""),
        (#"{"scripts": [{"prefix": "x", "answers": [{"error": "NOPE"}]}]}"#, "scripts[0].answers[0].error"),
        (#"{"scripts": [{"prefix": "x", "then": "fail"}]}"#, "scripts[0].then"),
        (#"[1]"#, "JSON object"),
        (#"{"#, "not JSON"),
    ])
    func refusesNamingTheMember(text: String, fragment: String) {
        do {
            _ = try Scenario.parse(text)
            Issue.record("accepted \(text)")
        } catch {
            #expect(error.description.contains(fragment), "\(error)")
        }
    }

    @Test func seededRandomnessRepeats() {
        let a = SeededRandom.unit(seed: 7, key: "token-1", attempt: 1, salt: 1)
        #expect(a == SeededRandom.unit(seed: 7, key: "token-1", attempt: 1, salt: 1))
        #expect(a != SeededRandom.unit(seed: 8, key: "token-1", attempt: 1, salt: 1))
        #expect(a != SeededRandom.unit(seed: 7, key: "token-1", attempt: 2, salt: 1))
        let draws = (0..<10_000).map { SeededRandom.unit(seed: 1, key: "t\($0)", attempt: 1, salt: 1) }
        #expect(draws.allSatisfy { $0 >= 0 && $0 < 1 })
        let share = Double(draws.filter { $0 < 0.1 }.count) / Double(draws.count)
        #expect(abs(share - 0.1) < 0.02)
    }

    @Test func tokenBucketRefillsAndNamesTheWait() {
        let second: UInt64 = 1_000_000_000
        var bucket = TokenBucket(perMinute: 60, capacity: 2, now: 0)
        #expect(bucket.take(now: 0) == nil)
        #expect(bucket.take(now: 0) == nil)
        #expect(bucket.take(now: 0) == 1)
        #expect(bucket.take(now: second / 2) == 1)  // half a token: still 1 s rounded up
        #expect(bucket.take(now: second) == nil)
        var slow = TokenBucket(perMinute: 6, capacity: 1, now: 0)  // one every 10 s
        #expect(slow.take(now: 0) == nil)
        #expect(slow.take(now: 0) == 10)
        #expect(slow.take(now: 3 * second) == 7)
    }

    @Test func theDocumentedMinuteRefusesEverythingUntilItsWindowEnds() {
        let second: UInt64 = 1_000_000_000
        // 100 a second as FCM states it: 6,000 a minute. Nothing counted yet: no window runs.
        var minute = MinuteWindow(perMinute: 6_000, now: 0)
        #expect(minute.startedAt == nil)
        // The first counted request, 7 s after start-up, starts a window there (not on the clock's minute).
        let first = 7 * second
        var taken = 0
        while minute.take(now: first) == nil { taken += 1 }
        #expect(taken == 6_000, "the window lets its minute's worth through at any pace")
        #expect(minute.startedAt == first)
        // Spent: refused for the rest of the window, at any pace; the wait is until its end.
        #expect(minute.take(now: first + 1 * second) == 59)
        #expect(minute.take(now: first + 59 * second + second / 2) == 1)
        var refused = 0
        for tenth in 1..<600 where minute.take(now: first + UInt64(tenth) * second / 10) != nil { refused += 1 }
        #expect(refused == 599, "a spent window refused only \(refused) of 599 sends at 10 a second")
        // A refusal is not counted, so it started nothing: the next window begins at the first
        // request after the end, and holds a whole minute's worth again.
        let next = first + 75 * second
        taken = 0
        while minute.take(now: next) == nil { taken += 1 }
        #expect(taken == 6_000)
        #expect(minute.startedAt == next)
        // A window already running at start-up with nothing left (a project spending its quota):
        // refused until a minute after start-up, then a fresh window.
        var spent = MinuteWindow(perMinute: 600, start: 0, now: 0)
        #expect(spent.take(now: second) == 59)
        #expect(spent.take(now: 60 * second) == nil)
    }

    @Test func aRollingMinuteLetsAMinuteThroughThenTheRate() {
        let second: UInt64 = 1_000_000_000
        // 300 a second as FCM states it: 18,000 a minute, in a bucket of a minute's size.
        var minute = TokenBucket(perMinute: 18_000, now: 0)
        var taken = 0
        while minute.take(now: 0) == nil { taken += 1 }
        #expect(taken == 18_000, "a full bucket lets a whole minute's worth through at once")
        taken = 0
        var now: UInt64 = 0
        for _ in 0..<1000 {  // then 10 s at 100 tries every 10 ms: the stated rate, 300 a second
            now += second / 100
            for _ in 0..<100 where minute.take(now: now) == nil { taken += 1 }
        }
        #expect((2_999...3_001).contains(taken), "\(taken) in 10 s")
        // Starting empty (a project that already spends its quota): the rate from the first second.
        var empty = TokenBucket(perMinute: 600_000, start: 0, now: 0)
        #expect(empty.take(now: 0) == 1)
        taken = 0
        while empty.take(now: second) == nil { taken += 1 }
        #expect(taken == 10_000)
    }
}

@Suite struct EmulatorDeviceGroupTests {
    private func body(_ op: String, name: String = "appUser-Chris", key: String? = nil, ids: [String]) -> JSONValue {
        var object = JSONObject(["operation": .string(op), "notification_key_name": .string(name)])
        if let key { object["notification_key"] = .string(key) }
        object["registration_ids"] = .array(ids.map { .string($0) })
        return .object(object)
    }

    private func registry() -> DeviceGroupRegistry {
        let counter = Counter()
        return DeviceGroupRegistry(makeKey: { "APA91b-key-\(counter.next())" })
    }

    @Test func lifeCycle() throws {
        var groups = registry()
        let key = try groups.apply(body("create", ids: ["a", "b"]), projectID: "p").get()
        #expect(groups.members(ofKey: key, projectID: "p") == ["a", "b"])
        #expect(groups.members(ofKey: key, projectID: "other") == nil)
        #expect(try groups.apply(body("add", key: key, ids: ["c", "a"]), projectID: "p").get() == key)
        #expect(groups.members(ofKey: key, projectID: "p") == ["a", "b", "c"])
        let alias = try groups.lookUp(name: "appUser-Chris", projectID: "p").get()
        #expect(alias != key)
        #expect(groups.members(ofKey: alias, projectID: "p") == ["a", "b", "c"])
        _ = try groups.apply(body("remove", key: alias, ids: ["a", "b"]), projectID: "p").get()
        #expect(groups.members(ofKey: key, projectID: "p") == ["c"])
        _ = try groups.apply(body("remove", key: key, ids: ["c"]), projectID: "p").get()
        #expect(groups.members(ofKey: key, projectID: "p") == nil)
        #expect(groups.members(ofKey: alias, projectID: "p") == nil)
        #expect(groups.group(named: "appUser-Chris", projectID: "p") == nil)
        #expect(groups.lookUp(name: "appUser-Chris", projectID: "p") == .failure(.init(status: 404, message: "notification_key not found")))
    }

    @Test func limitsAndErrors() throws {
        var groups = registry()
        let twenty = (1...20).map { "t\($0)" }
        let key = try groups.apply(body("create", ids: twenty), projectID: "p").get()
        #expect(groups.apply(body("add", key: key, ids: ["t21"]), projectID: "p").failureStatus == 400)
        #expect(groups.members(ofKey: key, projectID: "p")?.count == 20)
        #expect(groups.apply(body("create", name: "big", ids: twenty + ["t21"]), projectID: "p").failureStatus == 400)
        #expect(groups.apply(body("create", ids: ["x"]), projectID: "p").failureMessage == "notification_key already exists")
        #expect(groups.apply(body("add", key: "APA91b-unknown", ids: ["x"]), projectID: "p").failureStatus == 404)
        #expect(groups.apply(body("add", ids: ["x"]), projectID: "p").failureMessage == "notification_key is required")
        #expect(groups.apply(body("add", name: "someone-else", key: key, ids: ["x"]), projectID: "p").failureStatus == 400)
        #expect(groups.apply(body("rename", ids: ["x"]), projectID: "p").failureStatus == 400)
        #expect(groups.apply(body("create", name: "empty", ids: []), projectID: "p").failureStatus == 400)
        // The same name in another project is another group.
        #expect((try? groups.apply(body("create", ids: ["x"]), projectID: "q").get()) != nil)
    }
}

private final class Counter: @unchecked Sendable {
    private var value = 0
    func next() -> Int {
        value += 1
        return value
    }
}

extension Result where Failure == DeviceGroupRegistry.Failure {
    var failureStatus: Int? { if case .failure(let f) = self { return f.status } else { return nil } }
    var failureMessage: String? { if case .failure(let f) = self { return f.message } else { return nil } }
}

@Suite struct EmulatorCommandTests {
    @Test func parsesFlags() throws {
        let options = try #require(try EmulatorCommand.Options.parse([
            "--host", "127.0.0.1", "--port=0", "--threads", "3", "--latency-ms", "25", "--token-lifetime", "2",
            "--write-service-account", "/tmp/sa.json", "--project-id", "demo", "--tls-cert", "c.pem", "--tls-key", "k.pem",
        ]))
        #expect(options.configuration.port == 0)
        #expect(options.configuration.threads == 3)
        #expect(options.configuration.latencyMilliseconds == 25)
        #expect(options.configuration.tokenLifetimeSeconds == 2)
        #expect(options.serviceAccountPath == "/tmp/sa.json")
        let several = try #require(try EmulatorCommand.Options.parse([
            "--write-service-account", "/tmp/a=b/sa.json", "--write-service-account", "shop-prod=/tmp/shop.json",
        ]))
        #expect(several.serviceAccounts.map(\.path) == ["/tmp/a=b/sa.json", "/tmp/shop.json"])
        #expect(several.serviceAccounts.map(\.projectID) == [nil, "shop-prod"])
        #expect(throws: EmulatorError.self) { try EmulatorCommand.Options.parse(["--write-service-account", "shop="]) }
        let many = try #require(try EmulatorCommand.Options.parse(["--write-service-accounts", "1000=/tmp/keys"]))
        #expect(many.manyServiceAccounts?.count == 1000 && many.manyServiceAccounts?.folder == "/tmp/keys")
        let folders = try #require(try EmulatorCommand.Options.parse(["--service-accounts", "/tmp/keys", "--service-accounts", "/tmp/more"]))
        #expect(folders.trustedFolders == ["/tmp/keys", "/tmp/more"] && folders.trustedAccounts.isEmpty)
        for bad in ["0=/tmp/keys", "1000", "many=/tmp/keys", "100001=/tmp/keys", "5="] {
            #expect(throws: EmulatorError.self, "\(bad)") { try EmulatorCommand.Options.parse(["--write-service-accounts", bad]) }
        }
        #expect(options.projectID == "demo")
        #expect(options.configuration.tls?.certificateFile == "c.pem")
        #expect(try EmulatorCommand.Options.parse(["--help"]) == nil)
    }

    @Test(arguments: [
        (["--port", "http"], "--port"),
        (["--port"], "--port needs a value"),
        (["--threads", "0"], "--threads"),
        (["--tls-cert", "c.pem"], "--tls-key"),
        (["--frobnicate"], "unknown option --frobnicate"),
        (["--scenario", "/nonexistent/scenario.json"], "--scenario"),
    ])
    func errorsNameTheFlag(arguments: [String], fragment: String) {
        do {
            _ = try EmulatorCommand.Options.parse(arguments)
            Issue.record("accepted \(arguments)")
        } catch {
            #expect(error.description.contains(fragment), "\(error)")
        }
    }
}

/// One list of FCM error codes serves both sides: every answer the emulator can give, read by
/// the worker's classifier, leads to what FCM's error table asks for that code.
@Suite struct EmulatorAnswerClassificationTests {
    enum Expected: Equatable { case prune, deadLetter, retry(quota: QuotaLimit?), reauthenticate }

    static func expected(_ code: FCMErrorCode) -> Expected {
        switch code {
        case .unregistered: return .prune
        case .invalidArgument, .senderIDMismatch, .thirdPartyAuthError, .apnsAuthError, .permissionDenied: return .deadLetter
        case .quotaExceeded: return .retry(quota: .project)
        case .unavailable, .internal, .unspecifiedError: return .retry(quota: nil)
        case .unauthenticated: return .reauthenticate
        }
    }

    @Test(arguments: FCMErrorCode.allCases)
    func everyEmulatorAnswerIsClassifiedAsFCMsTableSays(_ code: FCMErrorCode) {
        let answer = ErrorAnswer(code: code)
        let classification = SendClassification(httpStatus: answer.httpStatus, headers: [], body: FCMResponses.errorBody(answer), now: Date())
        let kind: Expected?
        switch classification {
        case .pruneToken: kind = .prune
        case .deadLetter: kind = .deadLetter
        case .retry(_, _, _, let quota): kind = .retry(quota: quota)
        case .reauthenticate: kind = .reauthenticate
        case .delivered: kind = nil
        }
        #expect(kind == Self.expected(code), "\(code): \(classification)")
        if code.hasFcmErrorDetail && code != .unspecifiedError {
            #expect(classification.reason?.hasPrefix(code.rawValue + ":") == true, "the reason names \(code.rawValue)")
        }
    }
}

/// The emulator's production answer to a spent project quota is the body FCM was seen to send
/// (Tests/Fixtures/FCM/answers), member for member, for the same project number and limit.
@Suite struct EmulatorProductionQuotaBodyTests {
    /// `value` with every object's members sorted by key, so member order does not count.
    static func canonical(_ value: JSONValue) -> String {
        switch value {
        case .object(let object):
            let members = object.sorted { $0.key < $1.key }.map { "\(JSONValue.string($0.key).serialized):\(canonical($0.value))" }
            return "{" + members.joined(separator: ",") + "}"
        case .array(let items): return "[" + items.map(canonical).joined(separator: ",") + "]"
        default: return value.serialized
        }
    }

    @Test func theEmulatorsBodyIsTheOneSeenInProduction() throws {
        let corpus = try #require(try FCMFixtures.answers().first { $0.id == "project-quota-rate-limit-exceeded" })
        let seen = try JSONValue.parse(corpus.body)
        let answered = try JSONValue.parse(FCMResponses.rateLimitBody(project: "123", limitValue: "18000"))
        #expect(Self.canonical(answered) == Self.canonical(seen))
        // A project ID that is not a number gets a stable 12-digit project number.
        let number = FCMResponses.projectNumber("herald-emulator")
        #expect(number.count == 12 && number.allSatisfy(\.isNumber) && number == FCMResponses.projectNumber("herald-emulator"))
        #expect(number != FCMResponses.projectNumber("herald-emulator-2"))
    }
}

/// `--tls auto`: the names the emulator's own certificate must carry, and its flag's choices.
@Suite struct EmulatorTLSAutoTests {
    @Test func theCertificateNamesWhereTheEmulatorIsReached() {
        let loopback = ["127.0.0.1", "::1", "localhost"]
        #expect(EmulatorCertificate.hosts(listening: "127.0.0.1", publicURL: nil) == loopback)
        // A wildcard address names no host; the public URL's host does (docker-compose's service name).
        #expect(EmulatorCertificate.hosts(listening: "0.0.0.0", publicURL: "https://emulator:8085") == loopback + ["emulator"])
        #expect(EmulatorCertificate.hosts(listening: "10.0.0.5", publicURL: nil) == loopback + ["10.0.0.5"])
        #expect(EmulatorCertificate.hosts(listening: "::", publicURL: "https://[fd00::1]:8085/") == loopback + ["fd00::1"])
        #expect(EmulatorCertificate.hosts(listening: "localhost", publicURL: "https://push.test") == loopback + ["push.test"])
    }

    @Test func tlsAutoByDefaultOffWhenAskedAndNeverBesideACertificateGiven() throws {
        #expect(try #require(try EmulatorCommand.Options.parse([])).ownCertificate, "HTTPS by default, as FCM")
        #expect(try #require(try EmulatorCommand.Options.parse(["--tls", "auto"])).ownCertificate)
        #expect(!(try #require(try EmulatorCommand.Options.parse(["--tls", "off"])).ownCertificate))
        let given = try #require(try EmulatorCommand.Options.parse(["--tls-cert", "c.pem", "--tls-key", "k.pem"]))
        #expect(!given.ownCertificate && given.configuration.tls?.certificateFile == "c.pem", "a certificate of the user's is served instead")
        for bad in [["--tls", "on"], ["--tls", "auto", "--tls-cert", "c.pem", "--tls-key", "k.pem"], ["--tls", "off", "--tls-cert", "c.pem", "--tls-key", "k.pem"]] {
            do {
                _ = try EmulatorCommand.Options.parse(bad)
                Issue.record("\(bad) accepted")
            } catch {
                #expect(error.description.contains("--tls"), "\(error)")
            }
        }
    }

    /// `--write-ca` keeps the authority of the certificate it makes; with cleartext or a
    /// certificate of the user's there is no such authority, and it says what to do instead.
    @Test func writeCAGoesWithTheCertificateItMakesOnly() throws {
        #expect(try #require(try EmulatorCommand.Options.parse(["--write-ca", "/tmp/ca.pem"])).caFilePath == "/tmp/ca.pem")
        for (bad, words) in [(["--tls", "off", "--write-ca", "ca.pem"], ["--write-ca", "--tls off"]),
                             (["--tls-cert", "c.pem", "--tls-key", "k.pem", "--write-ca", "ca.pem"], ["--write-ca", "HERALD_CA_FILE"]),
                             (["--write-ca", "certificates/"], ["--write-ca", "must name a file"])] {
            do {
                _ = try EmulatorCommand.Options.parse(bad)
                Issue.record("\(bad) accepted")
            } catch {
                #expect(words.allSatisfy(error.description.contains), "\(bad): \(error)")
            }
        }
    }

    /// A public URL of http:// on a port that serves HTTPS would send workers' token requests in
    /// cleartext to a TLS port (the mistake a docker-compose file kept from cleartext days makes).
    @Test func aCleartextPublicURLForAnHTTPSPortIsRefused() throws {
        do {
            _ = try EmulatorCommand.Options.parse(["--host", "0.0.0.0", "--public-url", "http://emulator:8085"])
            Issue.record("http:// accepted while serving HTTPS")
        } catch {
            #expect(error.description.contains("--public-url http://emulator:8085") && error.description.contains("https://emulator:8085")
                    && error.description.contains("--tls off"), "\(error)")
        }
        #expect(try #require(try EmulatorCommand.Options.parse(["--public-url", "https://emulator:8085"])).configuration.publicURL == "https://emulator:8085")
        #expect(try #require(try EmulatorCommand.Options.parse(["--tls", "off", "--public-url", "http://emulator:8085"])).configuration.publicURL == "http://emulator:8085")
        // Cleartext behind something that speaks TLS for it is the user's to arrange.
        #expect(try #require(try EmulatorCommand.Options.parse(["--tls", "off", "--public-url", "https://push.test"])).configuration.publicURL == "https://push.test")
    }

    /// The files it writes: the authority readable by anyone (it is public), the key by its owner
    /// alone; all gone after `remove()`.
    @Test func itsFilesAreWrittenPrivatelyAndRemoved() throws {
        let certificate = try EmulatorCertificate()
        var status = stat()
        #expect(stat(certificate.files.privateKeyFile, &status) == 0 && status.st_mode & 0o777 == 0o600)
        #expect(stat(certificate.caFile, &status) == 0 && status.st_mode & 0o777 == 0o644)
        #expect(stat(certificate.folder, &status) == 0 && status.st_mode & 0o777 == 0o700)
        #expect(try String(contentsOfFile: certificate.caFile, encoding: .utf8).hasPrefix("-----BEGIN CERTIFICATE-----"))
        certificate.remove()
        #expect(!FileManager.default.fileExists(atPath: certificate.folder))
    }

    /// `--write-ca`'s copy: readable by anyone, replacing what was there whole, and left in place
    /// when the private folder goes.
    @Test func theAuthorityWrittenToAPathOfTheUsersStays() throws {
        let folder = NSTemporaryDirectory() + "herald-write-ca-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let path = folder + "/emulator-ca.pem"
        try "an older run's authority".write(toFile: path, atomically: false, encoding: .utf8)
        let certificate = try EmulatorCertificate()
        try certificate.writeAuthority(to: path)
        let authority = try String(contentsOfFile: certificate.caFile, encoding: .utf8)
        certificate.remove()
        #expect(try String(contentsOfFile: path, encoding: .utf8) == authority, "the authority the worker must trust, whole")
        var status = stat()
        #expect(stat(path, &status) == 0 && status.st_mode & 0o777 == 0o644)
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder) == ["emulator-ca.pem"], "nothing half-written left beside it")
        // A folder that is not there: the error names the file.
        do {
            try certificate.writeAuthority(to: folder + "/missing/ca.pem")
            Issue.record("written into a folder that does not exist")
        } catch {
            #expect(error.description.contains(folder + "/missing/ca.pem"), "\(error)")
        }
    }
}
