import struct Foundation.Date
import HTTPClient
import JSON

/// Which of FCM's limits a `QUOTA_EXCEEDED` answer is about.
public enum QuotaLimit: String, Sendable, Equatable, CaseIterable {
    /// One registration token's (device's) message rate.
    case device
    /// One topic's message rate.
    case topic
    /// The project's quota: every send of the project.
    case project
    /// The answer does not say (no QuotaFailure detail, or only subjects this build does not
    /// know): the sender judges by what else is answered at the same moment.
    case unattributed
}

/// What the worker does with one FCM answer.
public enum SendClassification: Sendable, Equatable {
    /// FCM accepted the message; `name` is `projects/{p}/messages/{id}` (or the device group's
    /// `notification_key` for a group-management call; empty when the answer carried neither).
    case delivered(name: String)
    /// The token is gone for good (UNREGISTERED, legacy NotRegistered): remove it, never retry.
    case pruneToken(code: String, message: String)
    /// Retrying cannot help (bad message or token, wrong sender, credentials FCM holds for APNs
    /// or Web Push): dead-letter with `reason`.
    case deadLetter(code: String, message: String)
    /// Try again later, no sooner than `retryAfter` seconds when given. `quota` is set for a
    /// QUOTA_EXCEEDED answer: which limit it is about (a device's, a topic's, the project's).
    case retry(code: String, message: String, retryAfter: Double?, quota: QuotaLimit?)
    /// Our OAuth2 access token was refused: refresh it once and retry.
    case reauthenticate(message: String)

    /// Classifies an HTTP answer of FCM (v1 send, or the legacy-style device-group endpoint).
    /// `now` resolves an HTTP-date `Retry-After`; every string in `redacting` (say the access
    /// token and the job's registration token) is removed from the kept message, on top of
    /// anything that looks like a bearer token, a Google access token or a JWT.
    public init(httpStatus: Int, headers: [(name: String, value: String)], body: [UInt8], now: Date,
                redacting secrets: [String] = []) {
        // FCM's usual answer, `{"name": "projects/.../messages/..."}` on a 200, read without
        // building a JSON value: it is a delivery and nothing else (no error, no results).
        if (200..<300).contains(httpStatus), let name = Self.onlyName(in: body) {
            self = .delivered(name: name)
            return
        }
        // One parse of the body serves both the failure and the success reading.
        let json = try? JSONValue.parse(body)
        // Any other 2xx object with neither `error` nor `results` is a delivery too (FCMFailure
        // would find nothing in it).
        if (200..<300).contains(httpStatus), case .object(let object)? = json,
           object["error"] == nil, object["results"] == nil {
            self = .delivered(name: FCMFailure.successName(json))
            return
        }
        if let failure = FCMFailure(httpStatus: httpStatus, headers: headers, body: body, json: json, now: now, redacting: secrets) {
            self = failure.classification
        } else {
            self = .delivered(name: FCMFailure.successName(json))
        }
    }

    /// Classifies an answer of the HTTP client: the same as `init(httpStatus:headers:...)`, but
    /// the answer's headers are read only when they can matter (FCM's usual 200 is settled by
    /// its body alone).
    public init(response: HTTPResponse, now: Date, redacting secrets: [String] = []) {
        if (200..<300).contains(response.status), let name = Self.onlyName(in: response.body) {
            self = .delivered(name: name)
            return
        }
        self.init(httpStatus: response.status, headers: response.headers, body: response.body, now: now, redacting: secrets)
    }

    /// The value of `name` when `body` is exactly a JSON object with that one member, a string of
    /// printable ASCII without escapes (what FCM answers a send); nil for anything else, which
    /// the full parse then reads.
    static func onlyName(in body: [UInt8]) -> String? {
        body.withUnsafeBufferPointer { bytes -> String? in
            var index = 0
            func skipSpace() {
                while index < bytes.count, bytes[index] == 0x20 || bytes[index] == 0x0A || bytes[index] == 0x0D || bytes[index] == 0x09 {
                    index += 1
                }
            }
            func take(_ expected: StaticString) -> Bool {
                let count = expected.utf8CodeUnitCount
                guard index + count <= bytes.count else { return false }
                for offset in 0..<count where bytes[index + offset] != expected.utf8Start[offset] { return false }
                index += count
                return true
            }
            skipSpace()
            guard take("{") else { return nil }
            skipSpace()
            guard take(#""name""#) else { return nil }
            skipSpace()
            guard take(":") else { return nil }
            skipSpace()
            guard take(#"""#) else { return nil }
            let start = index
            while index < bytes.count, bytes[index] >= 0x20, bytes[index] < 0x7F, bytes[index] != UInt8(ascii: "\""),
                  bytes[index] != UInt8(ascii: "\\") {
                index += 1
            }
            let end = index
            guard take(#"""#) else { return nil }
            skipSpace()
            guard take("}") else { return nil }
            skipSpace()
            guard index == bytes.count else { return nil }
            return String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<end]), as: UTF8.self)
        }
    }

    /// Classifies a request that got no HTTP answer. Every such failure is retried: nothing says
    /// FCM saw the message, and the backoff keeps a dead network from being hammered.
    public init(transport: TransportFailure, redacting secrets: [String] = []) {
        self = .retry(code: transport.code, message: Redact.secrets(in: transport.detail, limit: FCMFailure.messageLimit, also: secrets),
                      retryAfter: nil, quota: nil)
    }

    /// `CODE: message` for a failure (what a dead-letter row or a log line shows); nil on delivery.
    public var reason: String? {
        switch self {
        case .delivered: return nil
        case .pruneToken(let code, let message), .deadLetter(let code, let message),
             .retry(let code, let message, _, _):
            return "\(code): \(message)"
        case .reauthenticate(let message): return "UNAUTHENTICATED: \(message)"
        }
    }

    /// Whether the failure is a quota answer, for `RetryPolicy.delay(quota:)`.
    public var isQuota: Bool { quotaLimit != nil }

    /// The limit a quota answer is about; nil for anything else.
    public var quotaLimit: QuotaLimit? {
        if case .retry(_, _, _, let quota) = self { return quota }
        return nil
    }
}

/// A request that got no HTTP answer.
public struct TransportFailure: Sendable, Equatable {
    public enum Kind: String, Sendable {
        /// No answer within the deadline.
        case timeout = "TIMEOUT"
        /// Could not connect, or the connection broke (DNS, refused, reset, HTTP/2 GOAWAY).
        case connection = "CONNECTION"
        /// The TLS handshake or certificate check failed.
        case tls = "TLS"
        /// FCM's front end did not process the request (REFUSED_STREAM, or above its GOAWAY's
        /// last-stream-id): it goes again without using an attempt.
        case unprocessed = "UNPROCESSED"
        case other = "TRANSPORT"
    }

    public var kind: Kind
    /// What the HTTP client said (never include request headers).
    public var detail: String

    public init(_ kind: Kind, detail: String) {
        self.kind = kind
        self.detail = detail
    }

    var code: String { kind.rawValue }
}

extension TransportFailure {
    /// The failure of a request the HTTP client could not complete.
    public init(_ error: HTTPClientError) {
        self.init(Kind(error.kind), detail: error.message)
    }
}

extension TransportFailure.Kind {
    /// The kind of an HTTP client's failure.
    public init(_ kind: HTTPClientError.Kind) {
        switch kind {
        case .timeout: self = .timeout
        case .connection: self = .connection
        case .tls: self = .tls
        case .unprocessed: self = .unprocessed
        case .other: self = .other
        }
    }
}
