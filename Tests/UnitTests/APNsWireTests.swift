import Crypto
import Dispatch
import FCM
import HTTPClient
import JSON
import Synchronization
import Testing
@testable import APNs
import Emulator

/// A clock tests move by hand.
final class TestClock: Sendable {
    private let now = Mutex<Double>(1_800_000_000)
    var read: @Sendable () -> Double { { [self] in now.withLock { $0 } } }
    func advance(minutes: Double) { now.withLock { $0 += minutes * 60 } }
    var value: Double { now.withLock { $0 } }
}

@Suite struct APNsProviderTokenTests {
    static let key = try! P256PrivateKey.generate()

    func claims(_ token: String) throws -> JSONValue {
        try #require(JWT.verifyES256(token, key: Self.key.publicKey))
    }

    @Test func oneTokenIsReusedUntilItIsDueThenRenewed() throws {
        let clock = TestClock()
        let source = APNsProviderToken(teamID: "TEAM123456", keyID: "KEY1234567", key: Self.key, clock: clock.read, jitter: { 0.5 })
        let first = try source.current()
        let header = try #require(JWT.Unverified(first)).header
        #expect(header == ["alg": "ES256", "kid": "KEY1234567"])
        #expect(try claims(first) == ["iss": "TEAM123456", "iat": .number(String(Int64(clock.value)))])
        // Jitter 0.5: due 45 minutes after it was made; the same token every time before that.
        for _ in 0..<44 {
            clock.advance(minutes: 1)
            #expect(try source.current() == first)
        }
        #expect(source.tokensMade == 1)
        clock.advance(minutes: 1)
        let second = try source.current()
        #expect(second != first)
        #expect(try claims(second)["iat"]?.intValue == Int(clock.value))
        #expect(source.tokensMade == 2)
    }

    @Test func jitterSpreadsRenewalBetweenFortyAndFiftyMinutes() throws {
        for (jitter, dueMinutes) in [(0.0, 40.0), (1.0, 50.0)] {
            let clock = TestClock()
            let source = APNsProviderToken(teamID: "T", keyID: "K", key: Self.key, clock: clock.read, jitter: { jitter })
            let first = try source.current()
            clock.advance(minutes: dueMinutes - 0.1)
            #expect(try source.current() == first, "jitter \(jitter)")
            clock.advance(minutes: 0.1)
            #expect(try source.current() != first, "jitter \(jitter)")
        }
    }

    @Test func expiredProviderTokenRenewsAtOnceButOnlyOnce() throws {
        let clock = TestClock()
        let source = APNsProviderToken(teamID: "T", keyID: "K", key: Self.key, clock: clock.read, jitter: { 0 })
        let first = try source.current()
        clock.advance(minutes: 5)
        source.expired(first)
        let second = try source.current()
        #expect(second != first)
        // More answers for the old token (requests that were in flight) make no further token.
        source.expired(first)
        source.expired(first)
        #expect(try source.current() == second)
        #expect(source.tokensMade == 2)
    }

    @Test func tooManyUpdatesHoldsRenewalForTwentyMinutes() throws {
        let clock = TestClock()
        let source = APNsProviderToken(teamID: "T", keyID: "K", key: Self.key, clock: clock.read, jitter: { 0 })
        let first = try source.current()
        clock.advance(minutes: 39)
        source.tooManyUpdates()
        clock.advance(minutes: 19)   // 58 minutes old, due since 40: held
        #expect(try source.current() == first)
        clock.advance(minutes: 1)    // the hold is over
        #expect(try source.current() != first)
    }

    @Test func neverRenewsSoonerThanTwentyMinutesOnSchedule() throws {
        // Even with a policy asking for renewals every 5 minutes, the 20-minute floor holds.
        var policy = APNsTokenPolicy()
        policy.renewAfterMinimum = 5 * 60
        policy.renewAfterMaximum = 5 * 60
        let clock = TestClock()
        let source = APNsProviderToken(teamID: "T", keyID: "K", key: Self.key, policy: policy, clock: clock.read)
        let first = try source.current()
        clock.advance(minutes: 19.9)
        #expect(try source.current() == first)
        clock.advance(minutes: 0.1)
        #expect(try source.current() != first)
    }

    @Test func manyThreadsShareOneToken() throws {
        let clock = TestClock()
        let source = APNsProviderToken(teamID: "T", keyID: "K", key: Self.key, clock: clock.read)
        let tokens = Mutex<Set<String>>([])
        DispatchQueue.concurrentPerform(iterations: 8) { _ in
            for _ in 0..<500 {
                let token = try! source.current()
                tokens.withLock { _ = $0.insert(token) }
            }
        }
        #expect(tokens.withLock { $0.count } == 1)
        #expect(source.tokensMade == 1)
    }

    @Test func oneSourcePerKey() throws {
        let clock = TestClock()
        let sources = APNsProviderTokens(clock: clock.read)
        let a = try sources.source(teamID: "T", keyID: "K1") { Self.key }
        let again = try sources.source(teamID: "T", keyID: "K1") { Issue.record("the key was read again"); return Self.key }
        let b = try sources.source(teamID: "T", keyID: "K2") { Self.key }
        #expect(a === again)
        #expect(a !== b)
        #expect(try a.current() == (try again.current()))
    }
}

@Suite struct APNsRequestTests {
    static let token = String(repeating: "ab", count: 32)

    func message(_ headers: JSONValue? = nil, payload: JSONValue = ["aps": ["alert": ["title": "Hi"]]], token: String = token) -> JSONValue {
        var apns = JSONObject(["payload": payload])
        if let headers { apns["headers"] = headers }
        return ["apns_token": .string(token), "apns": .object(apns)]
    }

    func request(_ message: JSONValue, jobID: Int64 = 7, ttl: Int64? = nil) throws(APNsRequestError) -> APNsRequest {
        try APNsRequest(message: message, bundleID: "com.example.shop", jobID: jobID, ttlSeconds: ttl, now: 1_800_000_000)
    }

    func header(_ request: APNsRequest, _ name: String) -> String? { request.headers.first { $0.name == name }?.value }

    @Test func alertRequestHasPathTopicPriorityAndBody() throws {
        let payload: JSONValue = ["aps": ["alert": ["title": "Hi"]], "order": 42]
        let built = try request(message(["apns-push-type": "alert"], payload: payload, token: String(repeating: "AB", count: 32)))
        #expect(built.path == "/3/device/" + Self.token)
        #expect(header(built, "apns-topic") == "com.example.shop")
        #expect(header(built, "apns-push-type") == "alert")
        #expect(header(built, "apns-priority") == "10")
        #expect(header(built, "apns-expiration") == nil)
        #expect(try JSONValue.parse(built.body) == payload)
        let lines = built.headerLines(providerToken: "TOKEN")
        #expect(lines.first == "authorization: bearer TOKEN")
        #expect(lines.contains("apns-topic: com.example.shop"))
    }

    @Test func topicFollowsThePushType() throws {
        let expected: [(String, String)] = [
            ("alert", "com.example.shop"), ("background", "com.example.shop"), ("voip", "com.example.shop.voip"),
            ("liveactivity", "com.example.shop.push-type.liveactivity"), ("complication", "com.example.shop.complication"),
            ("location", "com.example.shop.location-query"),
        ]
        for (type, topic) in expected {
            let built = try request(message(["apns-push-type": .string(type)]))
            #expect(header(built, "apns-topic") == topic, "\(type)")
            #expect(header(built, "apns-push-type") == type)
        }
    }

    @Test func priorityDefaultsByPushTypeAndRefusesWhatAppleRefuses() throws {
        #expect(try request(message(["apns-push-type": "background"], payload: ["aps": ["content-available": 1]])).priority == 5)
        #expect(try request(message(["apns-push-type": "liveactivity"])).priority == 10)
        #expect(try request(message(["apns-push-type": "alert", "apns-priority": "5"])).priority == 5)
        #expect(try request(message(["apns-push-type": "alert", "apns-priority": "1"])).priority == 1)
        // No push type: alert, as the rule file's default_push_type says (a silent payload too).
        let untyped = try request(message(payload: ["aps": ["content-available": 1], "sync": true]))
        #expect(untyped.pushType == .alert && untyped.priority == 10)
        for (headers, fragment) in [(["apns-push-type": "background", "apns-priority": "10"] as JSONValue,
                                     #""10" is not allowed for push type background; give one of 1, 5"#),
                                    (["apns-priority": "7"], #""7" is not one of 1, 5, 10"#)] {
            #expect(throws: APNsRequestError.self) { try request(message(headers)) }
            do { _ = try request(message(headers)) } catch {
                #expect(error.field == "apns.headers.apns-priority")
                #expect(error.message.contains(fragment), "\(error)")
            }
        }
    }

    @Test func apnsIDIsOnePerJobAndTheSameOnEveryRetry() throws {
        let first = try request(message(), jobID: 12_345)
        let retry = try request(message(), jobID: 12_345)
        let other = try request(message(), jobID: 12_346)
        #expect(first.apnsID == retry.apnsID)
        #expect(first.apnsID != other.apnsID)
        #expect(APNsIdentifier.isCanonical(first.apnsID))
        #expect(first.apnsID == first.apnsID.lowercased())
        let digits = Array(first.apnsID.utf8)
        #expect(digits[14] == UInt8(ascii: "8"))   // version 8
        #expect([UInt8(ascii: "8"), UInt8(ascii: "9"), UInt8(ascii: "a"), UInt8(ascii: "b")].contains(digits[19]))
        // A sender's own UUID is kept (it is part of the message, so stable too).
        let given = try request(message(["apns-id": "123E4567-E89B-12D3-A456-426614174000"]))
        #expect(given.apnsID == "123e4567-e89b-12d3-a456-426614174000")
    }

    /// The same digest of the job's ID as the releases before, so a job retried across an
    /// upgrade keeps its apns-id (values from an independent SHA-256 of `herald-apns-job:<ID>`).
    @Test func apnsIDStaysTheDigestOfTheJobID() {
        #expect(APNsIdentifier.forJob(12_345) == "c8753610-1842-88a1-8ca9-1fc8d7dbe964")
        #expect(APNsIdentifier.forJob(-7) == "806e14d9-faba-8f52-85a4-b3955f08428b")
    }

    /// A sender keeps the lines an app's requests share and adds each request's own: together
    /// they are the request's lines, and the own ones are all that differs from job to job.
    @Test func sharedAndOwnLinesMakeTheRequestsLines() throws {
        let first = try request(message(["apns-collapse-id": "order-7"]), jobID: 1, ttl: 60)
        let second = try request(message(["apns-collapse-id": "order-8"]), jobID: 2, ttl: 60)
        func shared(_ request: APNsRequest) -> [String] {
            APNsRequest.sharedHeaderLines(providerToken: "TOKEN", pushType: request.pushType, topic: request.topic, priority: request.priority)
        }
        #expect(shared(first) == shared(second))
        #expect(shared(first) + first.ownHeaderLines == first.headerLines(providerToken: "TOKEN"))
        #expect(first.ownHeaderLines == ["apns-id: " + first.apnsID, "apns-expiration: 1800000060", "apns-collapse-id: order-7"])
        #expect(second.ownHeaderLines.first == "apns-id: " + second.apnsID && first.apnsID != second.apnsID)
        let background = try request(message(["apns-push-type": "background"], payload: ["aps": ["content-available": 1]]))
        #expect(shared(background).contains("apns-priority: 5") && shared(background).contains("apns-push-type: background"))
        #expect(background.ownHeaderLines == ["apns-id: " + background.apnsID])
    }

    /// The payload the rules measured is the body sent: handed over, it is not written again,
    /// and it is what the request writes itself.
    @Test func theRulesPayloadIsTheBody() throws {
        let payload: JSONValue = ["aps": ["alert": ["title": "Grüße \"x\"\n"]], "order": 42, "list": [1, "a", nil]]
        let whole = message(payload: payload)
        var written: [UInt8] = []
        #expect(APNsMessageRules.standard.validate(whole, payload: &written).isEmpty)
        #expect(try JSONValue.parse(written) == payload)
        let handed = try APNsRequest(message: whole, bundleID: "com.example.shop", jobID: 7, ttlSeconds: nil, now: 1_800_000_000, payload: written)
        #expect(handed.body == written)
        #expect(try request(whole).body == written)
        // A message the rules refuse before the size rule hands back no payload.
        var none: [UInt8] = []
        #expect(!APNsMessageRules.standard.validate(message(payload: ["alert": "no aps"]), payload: &none).isEmpty)
        #expect(none.isEmpty)
    }

    @Test func expirationComesFromTheTTL() throws {
        #expect(try request(message(), ttl: 3600).expiration == 1_800_003_600)
        #expect(try request(message(), ttl: 0).expiration == 0)
        // Without a TTL, the sender's own value; with one, the job's deadline wins.
        #expect(try request(message(["apns-expiration": "1800000100"])).expiration == 1_800_000_100)
        #expect(try request(message(["apns-expiration": "1800000100"]), ttl: 60).expiration == 1_800_000_060)
    }

    @Test func badInputNamesTheField() throws {
        let cases: [(JSONValue, String, String)] = [
            (["apns": ["payload": ["aps": [:]]]], "apns_token", "device token"),
            (message(token: "xyz1"), "apns_token", "hex digits"),
            (message(token: "abc"), "apns_token", "even number"),
            (["apns_token": .string(Self.token)], "apns", "apns object"),
            (message(payload: "text"), "apns.payload", "JSON object"),
            (message(["apns-push-type": "mdm"]), "apns.headers.apns-push-type", "Herald does not send push type \"mdm\" yet: it needs certificate-based"),
            (message(["apns-push-type": "fileprovider"]), "apns.headers.apns-push-type", "Herald does not send push type \"fileprovider\" yet"),
            (message(["apns-push-type": "banner"]), "apns.headers.apns-push-type", "not a push type Herald knows; give one of alert, background"),
            (message(["apns-push-type": "voip", "apns-topic": "com.example.shop.voip"]), "apns.headers.apns-topic", "not a header a message sets"),
            (message(["apns-id": "job-7"]), "apns.headers.apns-id", "UUID"),
            (message(["apns-collapse-id": .string(String(repeating: "c", count: 65))]), "apns.headers.apns-collapse-id", "must be 1 to 64 bytes; got 65"),
            (message(["apns-collapse-id": ""]), "apns.headers.apns-collapse-id", "must be 1 to 64 bytes; got 0"),
            (message(["apns-expiration": "soon"]), "apns.headers.apns-expiration", "seconds since 1970"),
            (message(["apns-expiration": "-1"]), "apns.headers.apns-expiration", "seconds since 1970"),
            (message(["apns-expiration": 1_800_000_100]), "apns.headers.apns-expiration", "expected a string, got number"),
            (message(["x-custom": "1"]), "apns.headers.x-custom", "not a header a message sets"),
            (message(["APNS-PRIORITY": "5"]), "apns.headers.APNS-PRIORITY", "give apns-push-type, apns-priority, apns-expiration, apns-collapse-id, apns-id"),
        ]
        for (input, field, fragment) in cases {
            do {
                _ = try request(input)
                Issue.record("\(field): accepted")
            } catch {
                #expect(error.field == field, "\(error)")
                #expect(error.message.contains(fragment), "\(error)")
            }
        }
    }

    /// What the sender refuses is what the rules refuse at enqueue, in the same words: for each
    /// header case, APNsRequest's refusal is the rules' issue for that field, and a message the
    /// rules take (every push type Herald sends, every header at its bounds) makes a request.
    @Test func theSenderRefusesWhatTheRulesRefuseInTheirWords() throws {
        let rules = APNsMessageRules.standard
        let refused: [JSONValue] = [
            ["apns-push-type": "mdm"], ["apns-push-type": "pushtotalk"], ["apns-push-type": "widgets"],
            ["apns-topic": "com.example.shop"], ["x-custom": "1"], ["apns-id": "123e4567e89b12d3a456426614174000"],
            ["apns-expiration": "1800000000.5"], ["apns-expiration": .string(String(repeating: "9", count: 19))],
            ["apns-collapse-id": .string(String(repeating: "é", count: 33))],
            ["apns-push-type": "background", "apns-priority": "10"], ["apns-priority": "high"],
        ]
        for headers in refused {
            let input = message(headers, payload: ["aps": ["content-available": 1]])
            let issues = rules.validate(input)
            let issue = try #require(issues.first, "\(headers.serialized): the rules take it")
            do {
                _ = try request(input)
                Issue.record("\(headers.serialized): the sender takes what the rules refuse")
            } catch {
                #expect("message." + error.field == issue.field, "\(error)")
                #expect(error.message == issue.reason, "\(error) | \(issue)")
            }
        }
        var taken: [JSONValue] = [[
            "apns-push-type": "alert", "apns-priority": "1", "apns-expiration": .string(String(repeating: "9", count: 18)),
            "apns-collapse-id": .string(String(repeating: "é", count: 32)), "apns-id": "123E4567-E89B-12D3-A456-426614174000",
        ]]
        for type in APNsPushType.allCases where type != .liveactivity { taken.append(["apns-push-type": .string(type.rawValue)]) }
        for headers in taken {
            let input = message(headers, payload: ["aps": ["content-available": 1]])
            #expect(rules.validate(input).isEmpty, "\(headers.serialized)")
            #expect(throws: Never.self) { try request(input) }
        }
    }

    /// APNsPushType is the rule file's list: every push type the rules admit is one the sender
    /// sends, with the rule file's suffix, priorities and limit, and none the rules refuse.
    @Test func pushTypesAreTheRuleFiles() throws {
        let rules = APNsMessageRules.standard
        #expect(APNsPushType.allCases.map(\.rawValue) == rules.pushTypes.map(\.name))
        for rule in rules.pushTypes {
            let type = try #require(APNsPushType(rawValue: rule.name))
            #expect(type.topicSuffix == rule.topicSuffix)
            #expect(type.payloadLimit == rule.maxPayloadBytes)
            #expect(String(type.defaultPriority) == rule.defaultPriority)
            #expect(type.priorities.map(String.init) == (rule.priorities ?? rules.priorities), "\(rule.name): priorities must be whole numbers")
            #expect(type.allows(priority: type.defaultPriority))
        }
        for later in rules.notSent { #expect(APNsPushType(rawValue: later.name) == nil) }
        #expect(APNsPushType.standardDefault.rawValue == rules.defaultPushType)
        #expect(APNsRequest.senderHeaders == ["apns-push-type", "apns-priority", "apns-expiration", "apns-collapse-id", "apns-id"])
    }
}

@Suite struct APNsAnswerTests {
    func action(_ status: Int, _ reason: String? = nil, timestamp: Int64? = nil, retryAfter: String? = nil) -> APNsAction {
        var body = JSONObject()
        if let reason { body["reason"] = .string(reason) }
        if let timestamp { body["timestamp"] = .number(String(timestamp)) }
        return APNsAnswer.action(status: status, body: reason == nil ? [] : Array(JSONValue.object(body).serialized.utf8),
                                 apnsID: "11111111-2222-3333-4444-555555555555", retryAfter: retryAfter)
    }

    @Test func okIsDelivered() {
        #expect(action(200) == .delivered(apnsID: "11111111-2222-3333-4444-555555555555"))
    }

    @Test func unregisteredPrunesWithApplesTime() {
        #expect(action(410, "Unregistered", timestamp: 1_700_000_000_123) == .pruneToken(reason: "Unregistered", invalidSinceMilliseconds: 1_700_000_000_123))
    }

    @Test func expiredTokenPrunes() {
        #expect(action(410, "ExpiredToken", timestamp: 1_700_000_000_000) == .pruneToken(reason: "ExpiredToken", invalidSinceMilliseconds: 1_700_000_000_000))
        #expect(action(410, "ExpiredToken") == .pruneToken(reason: "ExpiredToken", invalidSinceMilliseconds: nil))
    }

    @Test func badDeviceTokenDeadLettersNamingTheEnvironment() {
        guard case .deadLetter(let reason) = action(400, "BadDeviceToken") else { Issue.record("not dead-lettered"); return }
        #expect(reason.hasPrefix("BadDeviceToken"))
        #expect(reason.contains("sandbox") && reason.contains("production"))
    }

    @Test func otherBadRequestsDeadLetterWithApplesReason() {
        for reason in ["BadPriority", "BadTopic", "BadExpirationDate", "MissingTopic", "PayloadEmpty", "InvalidPushType"] {
            #expect(action(400, reason) == .deadLetter(reason: reason))
        }
        if case .deadLetter(let reason) = action(400, "DeviceTokenNotForTopic") {
            #expect(reason.hasPrefix("DeviceTokenNotForTopic"))
        } else { Issue.record("DeviceTokenNotForTopic not dead-lettered") }
    }

    @Test func payloadTooLargeDeadLetters() {
        #expect(action(413, "PayloadTooLarge") == .deadLetter(reason: "PayloadTooLarge"))
    }

    @Test func expiredProviderTokenRenewsAndResends() {
        #expect(action(403, "ExpiredProviderToken") == .renewProviderToken)
    }

    @Test func otherForbiddenAnswersPauseTheAppWithTheReason() {
        for reason in ["InvalidProviderToken", "BadEnvironmentKeyIdInToken", "MissingProviderToken", "BadCertificateEnvironment", "Forbidden"] {
            guard case .pauseApp(let text) = action(403, reason) else { Issue.record("\(reason) does not pause"); continue }
            #expect(text.hasPrefix(reason))
        }
        guard case .pauseApp(let text) = action(400, "TopicDisallowed") else { Issue.record("TopicDisallowed does not pause"); return }
        #expect(text.hasPrefix("TopicDisallowed"))
    }

    @Test func tooManyRequestsBacksTheDeviceOff() {
        #expect(action(429, "TooManyRequests") == .deviceBackoff(reason: "TooManyRequests"))
    }

    @Test func tooManyProviderTokenUpdatesHoldsRenewals() {
        #expect(action(429, "TooManyProviderTokenUpdates") == .holdTokenRenewals(reason: "TooManyProviderTokenUpdates"))
    }

    @Test func serverErrorsRetryHonouringRetryAfter() {
        #expect(action(500, "InternalServerError") == .retry(reason: "InternalServerError", retryAfterSeconds: nil))
        #expect(action(503, "ServiceUnavailable", retryAfter: "30") == .retry(reason: "ServiceUnavailable", retryAfterSeconds: 30))
        #expect(action(503, "Shutdown", retryAfter: "soon") == .retry(reason: "Shutdown", retryAfterSeconds: nil))
        #expect(action(502) == .retry(reason: "HTTP 502 without a reason", retryAfterSeconds: nil))
    }

    @Test func wrongEndpointPausesTheApp() {
        guard case .pauseApp(let text) = action(404, "BadPath") else { Issue.record("BadPath does not pause"); return }
        #expect(text.contains("/3/device/"))
    }

    @Test func connectionFailuresAreAnOutageAndUnsentRequestsAreResent() {
        for kind in [HTTPClientError.Kind.connection, .timeout, .tls] {
            guard case .outage = APNsAnswer.action(HTTPClientError(kind: kind, message: "x")) else { Issue.record("\(kind)"); continue }
        }
        guard case .resend = APNsAnswer.action(HTTPClientError(kind: .unprocessed, message: "x")) else {
            Issue.record("an unprocessed stream is not resent")
            return
        }
    }
}

@Suite struct APNsFaultTokenTests {
    @Test func prefixesStayHexAndSayHowTheFaultEnds() {
        let rest = String(repeating: "0", count: 56)
        #expect(APNsFaultToken.parse("fa110410" + rest) == .unregistered)
        #expect(APNsFaultToken.parse("fa11e410" + rest) == .expiredToken)
        #expect(APNsFaultToken.parse("fa110400" + rest) == .badDeviceToken)
        #expect(APNsFaultToken.parse("fa110429" + rest) == .tooManyRequests(failures: nil))
        #expect(APNsFaultToken.parse("fa1104293" + rest) == .tooManyRequests(failures: 3))
        #expect(APNsFaultToken.parse("fa110503f" + rest) == .serviceUnavailable(failures: 15))
        #expect(APNsFaultToken.parse("fa1105001" + rest) == .internalServerError(failures: 1))
        // Ordinary tokens, and prefixes that name no fault, are delivered.
        #expect(APNsFaultToken.parse(String(repeating: "ab", count: 32)) == nil)
        #expect(APNsFaultToken.parse("fa110418" + rest) == nil)
        #expect(APNsFaultToken.parse("fa11") == nil)
    }
}
