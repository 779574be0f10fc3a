import Crypto
import HTTPServer
import JSON
import Synchronization
import WebPush

/// Counters of the Web Push side, as `EmulatorServer.webPushStatistics` reports them.
public struct WebPushStatistics: Sendable, Equatable {
    public var subscriptionsIssued = 0
    /// Pushes received, and those answered 201.
    public var requests = 0
    public var delivered = 0
    /// Accepted pushes whose body did not decrypt (a browser would drop them unseen).
    public var undecryptable = 0
    public var byStatus: [Int: Int] = [:]
    /// Refusals by the emulator's short reason (`missing-ttl`, `vapid`, ...; Apple's reason in apple mode).
    public var byReason: [String: Int] = [:]
    /// Deliveries past `maxStoredMessages`, counted but not kept.
    public var unstored = 0
}

/// The emulator's stand-in for the browsers' push services (RFC 8030), on the emulator's port:
/// it issues subscriptions as a browser would (`POST /webpush/subscriptions`: an endpoint on
/// this emulator, a fresh P-256 key pair and auth secret it keeps) and receives pushes to them
/// (`POST /webpush/push/{id}`), checking in this order, as the services do:
/// 1. the subscription: unknown, 404;
/// 2. VAPID (RFC 8292, `VAPID.verify`): `Authorization: vapid t=<ES256 JWT>, k=<key>` whose
///    signature verifies with k, `aud` the endpoint's origin exactly, `exp` ahead and at most 24
///    hours ahead, a `sub`; in apple mode the subject keeps Apple's rules. Refused: 401 (apple:
///    403 BadJwtToken). A key other than the one the subscription is bound to: 403;
/// 3. headers: no `TTL` or one that is not a whole number, 400 (RFC 8030 §5.2 requires it, and
///    Mozilla's service enforces it; some services accept a push without it and drop it when the
///    browser is offline); an `Urgency` other than very-low, low, normal, high, 400; a `Topic`
///    over 32 characters or outside the base64url alphabet, 400;
/// 4. the body: above 4,096 bytes (3,070 in constrained mode), 413; a non-empty body whose
///    `Content-Encoding` is not aes128gcm, 400;
/// 5. the subscription's fault (`WebPushFault`), if any;
/// then it decrypts the body with the subscription's keys, stores the delivery and answers 201
/// with a `Location` naming the message and the TTL. A body that does not decrypt is stored
/// with the reason and answered 201 all the same: a push service cannot read the payload, and
/// the browser drops it silently.
final class WebPushStandIn: Sendable {
    private struct State {
        var subscriptions: [String: WebPushSubscription] = [:]
        var attempts: [String: Int] = [:]
        var deliveries: [WebPushDelivery] = []
        var stats = WebPushStatistics()
        var sequence = 0
    }

    private let state = Mutex(State())
    let capacity: Int
    /// The emulator's base URL once it listens: the origin of the endpoints it issues.
    let origin = Mutex<String>("")

    init(capacity: Int) { self.capacity = capacity }

    // MARK: subscriptions

    func subscribe(_ options: WebPushSubscriptionOptions) throws(CryptoError) -> WebPushSubscription {
        let subscription = try WebPushSubscription(id: Base64URL.encode(Random.bytes(16)), origin: origin.withLock { $0 }, options: options)
        state.withLock { s in
            s.subscriptions[subscription.id] = subscription
            s.stats.subscriptionsIssued += 1
        }
        return subscription
    }

    func subscription(id: String) -> WebPushSubscription? { state.withLock { $0.subscriptions[id] } }

    /// `POST /webpush/subscriptions`: 201 with `PushSubscription.toJSON()`.
    func subscribe(_ request: HTTPServerRequest) -> HTTPServerResponse {
        switch WebPushSubscriptionOptions.parse(request.body) {
        case .failure(let error):
            return HTTPServerResponse.json(400, Self.errorBody(error.description))
        case .success(let options):
            do {
                let subscription = try subscribe(options)
                return HTTPServerResponse.json(201, Array(subscription.json.serialized.utf8),
                                               headers: [HTTPHeader(name: "location", value: subscription.endpoint)])
            } catch {
                return HTTPServerResponse.json(500, Self.errorBody("cannot make a key pair: \(error)"))
            }
        }
    }

    // MARK: pushes

    func handle(_ request: HTTPServerRequest, subscriptionID: String) -> HTTPServerResponse {
        let now = realtimeSeconds()
        guard let subscription = state.withLock({ $0.subscriptions[subscriptionID] }) else {
            return refuse(404, "unknown-subscription", "no subscription \(subscriptionID) was issued by this emulator", mode: .standard)
        }
        let mode = subscription.options.mode
        guard request.method == "POST" else {
            return refuse(405, "method", "push with POST, not \(request.method)", mode: mode, apple: "MethodNotAllowed",
                          headers: [HTTPHeader(name: "allow", value: "POST")])
        }

        // 2. VAPID.
        let claims: VAPIDClaims
        switch VAPID.verify(authorization: request.header("authorization"), audience: subscription.origin, now: Int64(now),
                            appleSubjectRules: mode == .apple) {
        case .failure(let refusal):
            return refuse(401, "vapid", refusal.description, mode: mode, apple: "BadJwtToken", appleStatus: 403)
        case .success(let verified):
            claims = verified
        }
        if let bound = subscription.options.applicationServerKey, bound != claims.publicKey {
            return refuse(403, "vapid-key-mismatch", "the VAPID key is not the applicationServerKey this subscription was made with",
                          mode: mode, apple: "BadJwtToken")
        }

        // 3. Headers.
        guard let ttlText = request.header("ttl") else {
            return refuse(400, "missing-ttl", "no TTL header; RFC 8030 requires one (seconds the push may wait for an offline browser)",
                          mode: mode, apple: "BadExpirationDate")
        }
        guard !ttlText.isEmpty, ttlText.utf8.count <= 10, ttlText.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let ttl = Int(ttlText) else {
            return refuse(400, "bad-ttl", "TTL must be whole seconds, not \(ttlText)", mode: mode, apple: "BadExpirationDate")
        }
        let urgency = request.header("urgency")
        if let urgency, !["very-low", "low", "normal", "high"].contains(urgency) {
            return refuse(400, "bad-urgency", "Urgency must be very-low, low, normal or high, not \(urgency)", mode: mode, apple: "BadPriority")
        }
        let topic = request.header("topic")
        if let topic, topic.isEmpty || topic.utf8.count > 32 || !topic.utf8.allSatisfy(Self.isBase64URLCharacter) {
            return refuse(400, "bad-topic", "Topic must be 1 to 32 characters of the base64url alphabet", mode: mode, apple: "BadWebPushTopic")
        }

        // 4. The body.
        guard request.body.count <= mode.maxBodyBytes else {
            return refuse(413, "payload-too-large", "the body is \(request.body.count) bytes; this push service takes at most \(mode.maxBodyBytes)",
                          mode: mode, apple: "PayloadTooLarge")
        }
        if !request.body.isEmpty {
            let encoding = request.header("content-encoding")?.lowercased()
            guard encoding == "aes128gcm" else {
                let said = encoding.map { $0 == "aesgcm" ? "aesgcm, the obsolete draft coding" : $0 } ?? "missing"
                return refuse(400, "content-encoding", "Content-Encoding must be aes128gcm (RFC 8291), not \(said)", mode: mode,
                              apple: "BadContentEncoding")
            }
        }

        // 5. The subscription's fault.
        if let fault = subscription.options.fault {
            let attempt = state.withLock { s -> Int in
                s.attempts[subscriptionID, default: 0] += 1
                return s.attempts[subscriptionID]!
            }
            if let answer = fault.answer(attempt: attempt) {
                let headers = answer.retryAfter.map { [HTTPHeader(name: "retry-after", value: String($0))] } ?? []
                let (reason, apple): (String, String) = switch answer.status {
                case 404: ("not-found", "BadDeviceToken")
                case 410: ("gone", "Unregistered")
                case 429: ("too-many-requests", "TooManyRequests")
                case 503: ("service-unavailable", "ServiceUnavailable")
                default: ("server-error", "InternalServerError")
                }
                return refuse(answer.status, reason, "fault of the subscription (attempt \(attempt))", mode: mode, apple: apple, headers: headers)
            }
        }

        // Decrypt and keep.
        var payload: [UInt8]? = nil
        var decryptionError: String? = nil
        if !request.body.isEmpty {
            do {
                payload = try WebPushEncryption.decrypt(request.body, privateKey: subscription.privateKey, auth: subscription.authSecret)
            } catch {
                decryptionError = error.message
            }
        }
        let messageID = Base64URL.encode(Random.bytes(12))
        let headers = request.headers.filter { $0.name.lowercased() != "authorization" }
            .map { HTTPHeader(name: $0.name.lowercased(), value: $0.value) }
        let delivery = WebPushDelivery(
            sequence: 0, subscriptionID: subscriptionID, messageID: messageID, ttl: ttl, urgency: urgency, topic: topic, vapid: claims,
            bodyBytes: request.body.count, payload: payload, decryptionError: decryptionError, headers: headers,
            connection: request.remoteAddress, receivedAtMilliseconds: Int64(now * 1000))
        state.withLock { s in
            s.sequence += 1
            s.stats.requests += 1
            s.stats.delivered += 1
            s.stats.byStatus[201, default: 0] += 1
            if decryptionError != nil { s.stats.undecryptable += 1 }
            guard s.deliveries.count < capacity else {
                s.stats.unstored += 1
                return
            }
            var kept = delivery
            kept.sequence = s.sequence
            s.deliveries.append(kept)
        }
        return HTTPServerResponse(status: 201, headers: [
            HTTPHeader(name: "location", value: subscription.origin + "/webpush/messages/" + messageID),
            HTTPHeader(name: "ttl", value: String(ttl)),
        ])
    }

    /// A refusal counted and answered as the subscription's service would: apple mode with
    /// `{"reason": apple}` (at `appleStatus` when given), the others with
    /// `{"code", "error", "message"}` saying what the emulator found.
    private func refuse(_ status: Int, _ reason: String, _ message: String, mode: WebPushServiceMode, apple: String? = nil,
                        appleStatus: Int? = nil, headers: [HTTPHeader] = []) -> HTTPServerResponse {
        let isApple = mode == .apple && apple != nil
        let finalStatus = isApple ? (appleStatus ?? status) : status
        let counted = isApple ? apple! : reason
        state.withLock { s in
            s.stats.requests += 1
            s.stats.byStatus[finalStatus, default: 0] += 1
            s.stats.byReason[counted, default: 0] += 1
        }
        let body: JSONValue = isApple
            ? ["reason": .string(apple!)]
            : ["code": JSONValue(finalStatus), "error": .string(Self.phrase(finalStatus)), "message": .string(message)]
        return HTTPServerResponse.json(finalStatus, Array(body.serialized.utf8), headers: headers)
    }

    /// `{"error": message}`, the emulator's own answers' shape.
    static func errorBody(_ message: String) -> [UInt8] {
        let body: JSONValue = ["error": .string(message)]
        return Array(body.serialized.utf8)
    }

    static func phrase(_ status: Int) -> String {
        switch status {
        case 400: return "Bad Request"
        case 401: return "Unauthorized"
        case 403: return "Forbidden"
        case 404: return "Not Found"
        case 405: return "Method Not Allowed"
        case 410: return "Gone"
        case 413: return "Payload Too Large"
        case 429: return "Too Many Requests"
        case 500: return "Internal Server Error"
        case 502: return "Bad Gateway"
        case 503: return "Service Unavailable"
        case 504: return "Gateway Timeout"
        default: return "Error"
        }
    }

    static func isBase64URLCharacter(_ byte: UInt8) -> Bool {
        (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A) || (byte >= 0x30 && byte <= 0x39)
            || byte == UInt8(ascii: "-") || byte == UInt8(ascii: "_")
    }

    // MARK: observation

    func deliveries(subscriptionID: String?) -> [WebPushDelivery] {
        state.withLock { s in
            guard let subscriptionID else { return s.deliveries }
            return s.deliveries.filter { $0.subscriptionID == subscriptionID }
        }
    }

    /// `GET /emulator/webpush/messages[?subscription=ID][&limit=N]`.
    func listMessages(_ request: HTTPServerRequest) -> HTTPServerResponse {
        var subscriptionID: String? = nil
        var limit: Int? = nil
        for item in request.queryItems {
            switch item.name {
            case "subscription": subscriptionID = item.value
            case "limit":
                guard let n = Int(item.value), n >= 0 else {
                    return HTTPServerResponse.json(400, Self.errorBody("limit must be a whole number, not \(item.value)"))
                }
                limit = n
            default:
                return HTTPServerResponse.json(400, Self.errorBody("unknown parameter \(item.name); use subscription or limit"))
            }
        }
        var found = deliveries(subscriptionID: subscriptionID)
        if let limit { found = Array(found.suffix(limit)) }
        let body: JSONValue = ["count": JSONValue(found.count), "messages": .array(found.map(\.json))]
        return HTTPServerResponse.json(200, Array(body.serialized.utf8))
    }

    var statistics: WebPushStatistics { state.withLock { $0.stats } }

    var statisticsJSON: JSONValue {
        let stats = statistics
        var byStatus = JSONObject()
        for (status, count) in stats.byStatus.sorted(by: { $0.key < $1.key }) { byStatus[String(status)] = JSONValue(count) }
        var byReason = JSONObject()
        for (reason, count) in stats.byReason.sorted(by: { $0.key < $1.key }) { byReason[reason] = JSONValue(count) }
        return ["subscriptions_issued": JSONValue(stats.subscriptionsIssued), "requests": JSONValue(stats.requests),
                "delivered": JSONValue(stats.delivered), "undecryptable": JSONValue(stats.undecryptable),
                "by_status": .object(byStatus), "by_reason": .object(byReason), "unstored": JSONValue(stats.unstored)]
    }

    /// Forgets deliveries, counters and fault attempts; keeps the subscriptions (a browser keeps
    /// its subscription across a push service's bad day).
    func reset() {
        state.withLock { s in
            let subscriptions = s.subscriptions
            let issued = s.stats.subscriptionsIssued
            s = State()
            s.subscriptions = subscriptions
            s.stats.subscriptionsIssued = issued
        }
    }
}
