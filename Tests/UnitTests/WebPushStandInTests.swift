import Foundation
import HTTPServer
import JSON
import Testing
@testable import Crypto
@testable import Emulator
import WebPush

/// The emulator's Web Push side judged request by request, without a socket: what it refuses,
/// with which status and reason, and what it keeps of what it accepts.
@Suite struct WebPushStandInTests {
    static let origin = "https://127.0.0.1:8443"
    static let key = try! VAPIDKey.generate()

    struct Stand {
        let standIn = WebPushStandIn(capacity: 100)
        init() { standIn.origin.withLock { $0 = WebPushStandInTests.origin } }

        func subscribe(_ options: WebPushSubscriptionOptions = .init()) throws -> WebPushSubscription { try standIn.subscribe(options) }

        /// A push as Herald makes it: encrypted for the subscription, signed by `key` for its origin.
        func push(_ subscription: WebPushSubscription, payload: String = #"{"title":"Hi"}"#, subject: String = "mailto:ops@example.com",
                  audience: String? = nil, expiresIn: Int64 = 3600, key: VAPIDKey = WebPushStandInTests.key,
                  headers: [String: String] = ["ttl": "60", "content-encoding": "aes128gcm"], body: [UInt8]? = nil,
                  authorization: String? = nil, method: String = "POST") throws -> HTTPServerResponse {
            let keys = try WebPushSubscriptionKeys(p256dh: subscription.p256dh, auth: subscription.auth)
            let encrypted = try body ?? WebPushEncryption.encrypt(Array(payload.utf8), for: keys)
            let vapid = try authorization ?? VAPID.authorization(audience: audience ?? subscription.origin, subject: subject,
                                                                 expiresAt: Int64(Date().timeIntervalSince1970) + expiresIn, key: key)
            var lines = [HTTPHeader(name: "authorization", value: vapid)]
            for (name, value) in headers.sorted(by: { $0.key < $1.key }) { lines.append(HTTPHeader(name: name, value: value)) }
            return standIn.handle(HTTPServerRequest(method: method, path: "/webpush/push/" + subscription.id, headers: lines, body: encrypted,
                                                    isSecure: true, remoteAddress: "127.0.0.1:5000"), subscriptionID: subscription.id)
        }
    }

    static func json(_ response: HTTPServerResponse) -> JSONValue? { try? JSONValue.parse(response.body) }
    static func header(_ response: HTTPServerResponse, _ name: String) -> String? { response.headers.first { $0.name == name }?.value }

    @Test func issuesASubscriptionAsABrowserAndDecryptsWhatIsPushedToIt() throws {
        let stand = Stand()
        let subscription = try stand.subscribe()
        #expect(subscription.endpoint == Self.origin + "/webpush/push/" + subscription.id)
        let keys = try WebPushSubscriptionKeys(p256dh: subscription.p256dh, auth: subscription.auth)
        #expect(keys.p256dh.count == 65 && keys.auth.count == 16)
        #expect(subscription.json["expirationTime"] == .null)
        #expect(subscription.json["keys"]?["auth"]?.stringValue == subscription.auth)

        let response = try stand.push(subscription, payload: #"{"order":42,"text":"Ünïcode ✓"}"#,
                                      headers: ["ttl": "3600", "content-encoding": "aes128gcm", "urgency": "high", "topic": "order-42"])
        #expect(response.status == 201)
        let location = try #require(Self.header(response, "location"))
        #expect(location.hasPrefix(Self.origin + "/webpush/messages/"))
        #expect(Self.header(response, "ttl") == "3600")
        let delivery = try #require(stand.standIn.deliveries(subscriptionID: subscription.id).first)
        #expect(delivery.payloadText == #"{"order":42,"text":"Ünïcode ✓"}"#)
        #expect(location.hasSuffix(delivery.messageID))
        #expect(delivery.ttl == 3600 && delivery.urgency == "high" && delivery.topic == "order-42")
        #expect(delivery.vapid.subject == "mailto:ops@example.com" && delivery.vapid.audience == Self.origin)
        #expect(delivery.vapid.publicKey == Self.key.publicKeyBase64URL)
        #expect(!delivery.headers.contains { $0.name == "authorization" })
        #expect(stand.standIn.statistics.delivered == 1)
    }

    @Test func refusesWhatTheServicesRefuse() throws {
        let stand = Stand()
        let subscription = try stand.subscribe()
        func check(_ response: HTTPServerResponse, _ status: Int, _ words: String, sourceLocation: SourceLocation = #_sourceLocation) {
            #expect(response.status == status, sourceLocation: sourceLocation)
            let message = Self.json(response)?["message"]?.stringValue ?? ""
            #expect(message.contains(words), "\(message)", sourceLocation: sourceLocation)
        }
        check(try stand.push(subscription, authorization: ""), 401, "no Authorization header")
        check(try stand.push(subscription, audience: "https://127.0.0.1:9999"), 401, "not this push service's origin \(Self.origin)")
        check(try stand.push(subscription, expiresIn: 90000), 401, "more than 24 hours")
        check(try stand.push(subscription, expiresIn: -10), 401, "expired")
        check(try stand.push(subscription, subject: ""), 401, "no sub claim")
        check(try stand.push(subscription, headers: ["content-encoding": "aes128gcm"]), 400, "no TTL header")
        check(try stand.push(subscription, headers: ["ttl": "-1", "content-encoding": "aes128gcm"]), 400, "TTL must be whole seconds")
        check(try stand.push(subscription, headers: ["ttl": "60", "content-encoding": "aes128gcm", "urgency": "urgent"]), 400, "Urgency")
        check(try stand.push(subscription, headers: ["ttl": "60", "content-encoding": "aes128gcm", "topic": "order 42"]), 400, "Topic")
        check(try stand.push(subscription, headers: ["ttl": "60", "content-encoding": "aes128gcm", "topic": String(repeating: "a", count: 33)]),
              400, "Topic")
        check(try stand.push(subscription, headers: ["ttl": "60", "content-encoding": "aesgcm"]), 400, "obsolete draft")
        check(try stand.push(subscription, headers: ["ttl": "60"]), 400, "Content-Encoding must be aes128gcm")
        check(try stand.push(subscription, body: [UInt8](repeating: 1, count: 4097)), 413, "4097 bytes")
        let unknown = stand.standIn.handle(HTTPServerRequest(method: "POST", path: "/webpush/push/nope"), subscriptionID: "nope")
        #expect(unknown.status == 404)
        check(try stand.push(subscription, method: "PUT"), 405, "POST")
        // Nothing refused was kept; each refusal is counted by reason.
        #expect(stand.standIn.deliveries(subscriptionID: nil).isEmpty)
        let stats = stand.standIn.statistics
        #expect(stats.byStatus[401] == 5 && stats.byStatus[400] == 7 && stats.byStatus[413] == 1)
        #expect(stats.byReason["missing-ttl"] == 1)
        // A mere subject Apple refuses passes a standard service.
        #expect(try stand.push(subscription, subject: "mailto:ops@localhost").status == 201)
        // A push without a body needs no encoding.
        #expect(try stand.push(subscription, headers: ["ttl": "0"], body: []).status == 201)
        #expect(stand.standIn.deliveries(subscriptionID: subscription.id).last?.payload == nil)
    }

    @Test func appleModeAnswers403BadJwtTokenForEveryVAPIDFaultAndItsSubjectRules() throws {
        let stand = Stand()
        let subscription = try stand.subscribe(.init(mode: .apple))
        for subject in ["mailto:ops@localhost", "mailto: ops@example.com", "mailto:<ops@example.com>", "ops@example.com", ""] {
            let response = try stand.push(subscription, subject: subject)
            #expect(response.status == 403, "\(subject)")
            #expect(Self.json(response) == ["reason": "BadJwtToken"], "\(subject)")
        }
        #expect(try stand.push(subscription, audience: "https://web.push.apple.com").status == 403)
        #expect(try stand.push(subscription, expiresIn: 86400 + 60).status == 403)
        #expect(try stand.push(subscription, subject: "https://example.com").status == 201)
        let oversized = try stand.push(subscription, body: [UInt8](repeating: 0, count: 5000))
        #expect(oversized.status == 413 && Self.json(oversized) == ["reason": "PayloadTooLarge"])
        #expect(stand.standIn.statistics.byReason["BadJwtToken"] == 7)
    }

    @Test func aSubscriptionBoundToAKeyRefusesAnother() throws {
        let stand = Stand()
        let bound = try stand.subscribe(.init(applicationServerKey: Self.key.publicKeyBase64URL))
        #expect(try stand.push(bound).status == 201)
        let other = try VAPIDKey.generate()
        let response = try stand.push(bound, key: other)
        #expect(response.status == 403)
        #expect(Self.json(response)?["message"]?.stringValue?.contains("applicationServerKey") == true)
    }

    @Test func constrainedModeRefusesBodiesAbove3070Bytes() throws {
        let stand = Stand()
        let subscription = try stand.subscribe(.init(mode: .constrained))
        // 3,070 - 86 - 17 = 2,967 bytes of payload fit; one more does not.
        #expect(try stand.push(subscription, payload: String(repeating: "x", count: 2967)).status == 201)
        let refused = try stand.push(subscription, payload: String(repeating: "x", count: 2968))
        #expect(refused.status == 413)
        #expect(Self.json(refused)?["message"]?.stringValue?.contains("3071 bytes") == true)
        // A standard service takes the whole 4,096.
        let standard = try stand.subscribe()
        #expect(try stand.push(standard, payload: String(repeating: "x", count: 3993)).status == 201)
    }

    @Test func faultsAnswerAfterEveryOtherCheckPassed() throws {
        let stand = Stand()
        let gone = try stand.subscribe(.init(fault: .gone))
        let notFound = try stand.subscribe(.init(fault: .notFound))
        let busy = try stand.subscribe(.init(fault: .tooManyRequests(retryAfter: 7, failures: 2)))
        let down = try stand.subscribe(.init(fault: .serverError(status: 503, retryAfter: 3, failures: nil)))
        #expect(try stand.push(gone).status == 410)
        #expect(try stand.push(gone).status == 410)
        #expect(try stand.push(notFound).status == 404)
        // A bad request to a faulty subscription is refused for what it is first.
        #expect(try stand.push(gone, headers: ["content-encoding": "aes128gcm"]).status == 400)
        let first = try stand.push(busy)
        #expect(first.status == 429 && Self.header(first, "retry-after") == "7")
        #expect(try stand.push(busy).status == 429)
        #expect(try stand.push(busy).status == 201)
        for _ in 0..<3 {
            let answer = try stand.push(down)
            #expect(answer.status == 503 && Self.header(answer, "retry-after") == "3")
        }
        #expect(stand.standIn.deliveries(subscriptionID: nil).map(\.subscriptionID) == [busy.id])
        // The apple mode's fault reasons are APNs's words.
        let appleGone = try stand.subscribe(.init(mode: .apple, fault: .gone))
        #expect(Self.json(try stand.push(appleGone)) == ["reason": "Unregistered"])
    }

    @Test func aBodyThatDoesNotDecryptIsAcceptedAndRecordedAsTheBrowserWouldDropIt() throws {
        let stand = Stand()
        let subscription = try stand.subscribe()
        let other = try stand.subscribe()
        // Encrypted for another subscription's keys.
        let keys = try WebPushSubscriptionKeys(p256dh: other.p256dh, auth: other.auth)
        let body = try WebPushEncryption.encrypt(Array("secret".utf8), for: keys)
        let response = try stand.push(subscription, body: body)
        #expect(response.status == 201)
        let delivery = try #require(stand.standIn.deliveries(subscriptionID: subscription.id).first)
        #expect(delivery.payload == nil)
        #expect(delivery.decryptionError?.contains("tag does not verify") == true)
        #expect(stand.standIn.statistics.undecryptable == 1)
    }

    @Test func subscriptionOptionsAreReadFromJSONNamingTheBadField() {
        func options(_ text: String) -> Result<WebPushSubscriptionOptions, EmulatorError> { WebPushSubscriptionOptions.parse(Array(text.utf8)) }
        guard case .success(let parsed) = options(#"{"mode":"apple","fault":"429","failures":2,"retry_after":5}"#) else {
            Issue.record("a valid body was refused")
            return
        }
        #expect(parsed.mode == .apple)
        #expect(parsed.fault == .tooManyRequests(retryAfter: 5, failures: 2))
        if case .success(let empty) = options("") { #expect(empty.mode == .standard && empty.fault == nil) } else { Issue.record("empty body refused") }
        for (body, words) in [(#"{"mode":"chrome"}"#, "mode must be"), (#"{"fault":"418"}"#, "fault must be"),
                              (#"{"failures":1}"#, "go with a fault"), (#"{"colour":"red"}"#, "unknown field colour"),
                              (#"{"application_server_key":"abc"}"#, "application_server_key"), ("[1]", "JSON object")] {
            guard case .failure(let error) = options(body) else {
                Issue.record("\(body) was accepted")
                continue
            }
            #expect(error.description.contains(words), "\(body): \(error)")
        }
    }

    @Test func routesOfTheWebPushSide() {
        #expect(Route.match(method: "POST", path: "/webpush/subscriptions") == .webPushSubscribe)
        #expect(Route.match(method: "GET", path: "/webpush/subscriptions") == .methodNotAllowed(allowed: "POST"))
        #expect(Route.match(method: "POST", path: "/webpush/push/abc_-1") == .webPushSend(subscriptionID: "abc_-1"))
        #expect(Route.match(method: "GET", path: "/webpush/push/abc") == .webPushSend(subscriptionID: "abc"))
        #expect(Route.match(method: "POST", path: "/webpush/push/a/b") == .notFound)
        #expect(Route.match(method: "POST", path: "/webpush/push/") == .notFound)
        #expect(Route.match(method: "GET", path: "/emulator/webpush/messages") == .webPushMessages)
    }
}
