import Crypto
import HTTPServer
import JSON
import WebPush

/// How the push service behind an issued subscription behaves.
public enum WebPushServiceMode: String, Sendable, CaseIterable {
    /// RFC 8030 and 8292 as Mozilla's and Google's services apply them: bodies up to 4,096
    /// bytes; a bad VAPID header is 401, a key other than the subscription's 403.
    case standard
    /// Apple's service (web.push.apple.com): every VAPID fault is 403 `{"reason":"BadJwtToken"}`,
    /// and the subject must keep Apple's rules (`VAPIDSubject`); answers carry `{"reason": ...}`.
    case apple
    /// Mozilla's service for some Android devices: as `standard`, but 413 above 3,070 bytes.
    case constrained

    /// The largest body accepted before 413.
    var maxBodyBytes: Int { self == .constrained ? 3070 : WebPushEncryption.maxBodyLength }
}

/// A fault an issued subscription's push service answers with, after every other check passed.
public enum WebPushFault: Sendable, Equatable {
    /// 404: the subscription is unknown (FCM's old `/fcm/send/` endpoints, 2024).
    case notFound
    /// 410: the subscription expired or the user unsubscribed.
    case gone
    /// 429 with `Retry-After: retryAfter` on the first `failures` attempts (nil: every attempt).
    case tooManyRequests(retryAfter: Int, failures: Int?)
    /// A 5xx status (500, 502, 503, 504) on the first `failures` attempts (nil: every attempt);
    /// a 503 carries `Retry-After: retryAfter` when it is given.
    case serverError(status: Int, retryAfter: Int?, failures: Int?)

    /// The answer (status, Retry-After) to the `attempt`-th push (1-based), or nil to deliver.
    func answer(attempt: Int) -> (status: Int, retryAfter: Int?)? {
        switch self {
        case .notFound: return (404, nil)
        case .gone: return (410, nil)
        case .tooManyRequests(let retryAfter, let failures):
            if let failures, attempt > failures { return nil }
            return (429, retryAfter)
        case .serverError(let status, let retryAfter, let failures):
            if let failures, attempt > failures { return nil }
            return (status, retryAfter)
        }
    }
}

/// What to issue a subscription with (`POST /webpush/subscriptions` takes the same as JSON:
/// `{"mode": "apple", "fault": "429", "failures": 2, "retry_after": 1, "application_server_key": B64URL}`).
public struct WebPushSubscriptionOptions: Sendable {
    public var mode: WebPushServiceMode = .standard
    public var fault: WebPushFault? = nil
    /// The VAPID public key (base64url) the subscription is bound to, as a page's
    /// `subscribe({applicationServerKey})` binds it; pushes signed with another key are refused.
    /// Nil: any key whose signature verifies.
    public var applicationServerKey: String? = nil

    public init(mode: WebPushServiceMode = .standard, fault: WebPushFault? = nil, applicationServerKey: String? = nil) {
        self.mode = mode
        self.fault = fault
        self.applicationServerKey = applicationServerKey
    }

    /// Reads the JSON of `POST /webpush/subscriptions` (an empty body: the defaults). The error
    /// names the field.
    static func parse(_ body: [UInt8]) -> Result<WebPushSubscriptionOptions, EmulatorError> {
        var options = WebPushSubscriptionOptions()
        guard !body.isEmpty else { return .success(options) }
        guard let document = try? JSONValue.parse(body), let object = document.objectValue else {
            return .failure(EmulatorError("the body must be a JSON object (or empty)"))
        }
        var faultName: String? = nil
        var failures: Int? = nil
        var retryAfter: Int? = nil
        for member in object {
            let (name, value) = (member.key, member.value)
            switch name {
            case "mode":
                guard let text = value.stringValue, let mode = WebPushServiceMode(rawValue: text) else {
                    return .failure(EmulatorError("mode must be one of standard, apple, constrained"))
                }
                options.mode = mode
            case "fault":
                guard let text = value.stringValue, ["404", "410", "429", "500", "502", "503", "504"].contains(text) else {
                    return .failure(EmulatorError("fault must be one of \"404\", \"410\", \"429\", \"500\", \"502\", \"503\", \"504\""))
                }
                faultName = text
            case "failures":
                guard let n = value.doubleValue, n >= 0, n == n.rounded(), n < 1_000_000 else {
                    return .failure(EmulatorError("failures must be a whole number, 0 for every attempt"))
                }
                failures = n == 0 ? nil : Int(n)
            case "retry_after":
                guard let n = value.doubleValue, n >= 0, n == n.rounded(), n <= 86400 else {
                    return .failure(EmulatorError("retry_after must be whole seconds from 0 to 86400"))
                }
                retryAfter = Int(n)
            case "application_server_key":
                guard let text = value.stringValue, let point = Base64URL.decode(text), P256PublicKey(uncompressedPoint: point) != nil else {
                    return .failure(EmulatorError("application_server_key must be a base64url P-256 public key (65 bytes), a page's applicationServerKey"))
                }
                options.applicationServerKey = Base64URL.encode(point)
            default:
                return .failure(EmulatorError("unknown field \(name); use mode, fault, failures, retry_after, application_server_key"))
            }
        }
        switch faultName {
        case "404": options.fault = .notFound
        case "410": options.fault = .gone
        case "429": options.fault = .tooManyRequests(retryAfter: retryAfter ?? 1, failures: failures)
        case let status?: options.fault = .serverError(status: Int(status)!, retryAfter: retryAfter, failures: failures)
        case nil:
            if failures != nil || retryAfter != nil { return .failure(EmulatorError("failures and retry_after go with a fault")) }
        }
        return .success(options)
    }
}

/// A subscription the emulator issued, holding what a browser holds: the private half of
/// `p256dh` and the `auth` secret, so it can decrypt what is pushed to it.
public struct WebPushSubscription: Sendable {
    /// The last part of the endpoint's path.
    public let id: String
    public let endpoint: String
    /// The origin of the endpoint: what a push's VAPID `aud` must be.
    public let origin: String
    /// base64url, as `PushSubscription.toJSON()` gives them.
    public let p256dh: String
    public let auth: String
    public let options: WebPushSubscriptionOptions
    let privateKey: P256PrivateKey
    let authSecret: [UInt8]

    init(id: String, origin: String, options: WebPushSubscriptionOptions) throws(CryptoError) {
        self.id = id
        self.origin = origin
        endpoint = origin + "/webpush/push/" + id
        self.options = options
        privateKey = try P256PrivateKey.generate()
        authSecret = Random.bytes(16)
        p256dh = Base64URL.encode(privateKey.uncompressedPublicPoint)
        auth = Base64URL.encode(authSecret)
    }

    /// `PushSubscription.toJSON()`: `{"endpoint", "expirationTime": null, "keys": {"p256dh", "auth"}}`.
    public var json: JSONValue {
        ["endpoint": .string(endpoint), "expirationTime": .null, "keys": ["p256dh": .string(p256dh), "auth": .string(auth)]]
    }
}

/// One push the emulator's Web Push side accepted (201).
public struct WebPushDelivery: Sendable {
    /// 1, 2, 3... in order of acceptance.
    public var sequence: Int
    public var subscriptionID: String
    /// The id in the answer's Location.
    public var messageID: String
    public var ttl: Int
    public var urgency: String?
    public var topic: String?
    /// The VAPID token's claims and key.
    public var vapid: VAPIDClaims
    /// The encrypted body's length.
    public var bodyBytes: Int
    /// The decrypted payload; nil when the body was empty or did not decrypt.
    public var payload: [UInt8]?
    /// Why the body did not decrypt: a browser would have dropped the message silently, while
    /// the push service answered 201, as the real ones do.
    public var decryptionError: String?
    /// Every request header but `authorization`, names lowercased, in order.
    public var headers: [HTTPHeader]
    /// The client's address and port.
    public var connection: String
    public var receivedAtMilliseconds: Int64

    /// The payload as UTF-8 text.
    public var payloadText: String? { payload.map { String(decoding: $0, as: UTF8.self) } }

    var json: JSONValue {
        var object = JSONObject([
            "sequence": JSONValue(sequence), "subscription": .string(subscriptionID), "message_id": .string(messageID),
            "ttl": JSONValue(ttl),
        ])
        if let urgency { object["urgency"] = .string(urgency) }
        if let topic { object["topic"] = .string(topic) }
        object["vapid"] = ["aud": .string(vapid.audience), "exp": .number(String(vapid.expiresAt)), "sub": .string(vapid.subject),
                           "k": .string(vapid.publicKey)]
        object["body_bytes"] = JSONValue(bodyBytes)
        if let payload {
            object["payload"] = .string(String(decoding: payload, as: UTF8.self))
            object["payload_base64url"] = .string(Base64URL.encode(payload))
        } else {
            object["payload"] = .null
        }
        if let decryptionError { object["decryption_error"] = .string(decryptionError) }
        object["time"] = .string(Timestamp.rfc3339(milliseconds: receivedAtMilliseconds))
        return .object(object)
    }
}
