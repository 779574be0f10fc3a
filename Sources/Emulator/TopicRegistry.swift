import JSON

/// Topic subscriptions of every project, kept by Instance ID's `iid/v1:batchAdd` and
/// `iid/v1:batchRemove`, and read when a message goes to a topic (the emulator then delivers a
/// copy to each subscribed token). Also a log of the requests, so tests can see at FCM's side how
/// many tokens each request carried and how often each token was added.
///
/// Per-token answers follow the fault tokens (`FaultToken`): `fail-unregistered...` is
/// `NOT_FOUND`, `fail-invalid...` `INVALID_ARGUMENT`, `fail-internal-K...` `INTERNAL` on its
/// first K attempts (every attempt without K); every other token is added or removed (`{}`).
/// A request holding `fail-unavailable-N...` is refused whole on that token's first request: 503
/// UNAVAILABLE with `Retry-After: N`, nothing changed (a sender must come back later).
/// A request is refused whole (400, `{"error": "..."}`) when `to` is not `/topics/NAME` with a
/// valid name, or `registration_tokens` is not 1 to 1,000 non-empty strings.
public struct TopicRegistry: Sendable {
    public static let maxTokensPerRequest = 1000

    /// One batch request as it arrived.
    public struct Request: Sendable, Equatable {
        public var project: String
        public var topic: String
        public var add: Bool
        public var tokens: Int
        /// 200, or the status the whole request was refused with.
        public var status: Int
        /// Milliseconds since 1970 when it arrived.
        public var atMilliseconds: Int64
    }

    private var subscribers: [String: Set<String>] = [:]
    private var adds: [String: Int] = [:]
    private var attempts: [String: Int] = [:]
    public private(set) var requests: [Request] = []

    public init() {}

    private static func key(_ project: String, _ topic: String) -> String { project + "\u{0}" + topic }

    /// The tokens subscribed to `topic` in `project`.
    public func subscribers(project: String, topic: String) -> Set<String> { subscribers[Self.key(project, topic)] ?? [] }

    /// How many batchAdd requests added `token` to `topic` successfully (more than 1 only when a
    /// sender asked again).
    public func addCount(project: String, topic: String, token: String) -> Int {
        adds[Self.key(project, topic) + "\u{0}" + token] ?? 0
    }

    /// Carries out one request body; the answer's `results`, or a refusal's message.
    public mutating func apply(_ body: JSONValue, project: String, add: Bool, nowMilliseconds: Int64 = 0) -> Result<[JSONValue], RefusedRequest> {
        guard let to = body["to"]?.stringValue, to.hasPrefix("/topics/") else {
            return .failure(RefusedRequest("\"to\" must be \"/topics/NAME\""))
        }
        let topic = String(to.dropFirst("/topics/".count))
        guard !topic.isEmpty, topic.utf8.allSatisfy(RequestChecker.isTopicByte) else {
            return .failure(RefusedRequest("Invalid topic name \(topic): topic names must match [a-zA-Z0-9-_.~%]+"))
        }
        guard let items = body["registration_tokens"]?.arrayValue, !items.isEmpty, items.count <= Self.maxTokensPerRequest else {
            return .failure(RefusedRequest("registration_tokens must hold 1 to \(Self.maxTokensPerRequest) tokens"))
        }
        var tokens: [String] = []
        for item in items {
            guard let token = item.stringValue, !token.isEmpty else {
                return .failure(RefusedRequest("registration_tokens must be non-empty strings"))
            }
            tokens.append(token)
        }
        for token in tokens {
            guard case .unavailable(let seconds?)? = FaultToken.parse(token) else { continue }
            let attempt = (attempts[token] ?? 0) + 1
            attempts[token] = attempt
            if attempt == 1 {
                requests.append(Request(project: project, topic: topic, add: add, tokens: tokens.count, status: 503, atMilliseconds: nowMilliseconds))
                return .failure(RefusedRequest("The service is currently unavailable.", status: 503, retryAfter: seconds))
            }
        }
        requests.append(Request(project: project, topic: topic, add: add, tokens: tokens.count, status: 200, atMilliseconds: nowMilliseconds))
        let key = Self.key(project, topic)
        var results: [JSONValue] = []
        for token in tokens {
            let attempt = (attempts[token] ?? 0) + 1
            attempts[token] = attempt
            switch FaultToken.parse(token) {
            case .unregistered?:
                results.append(["error": "NOT_FOUND"])
                continue
            case .invalid?:
                results.append(["error": "INVALID_ARGUMENT"])
                continue
            case .internal(let failures)? where failures == nil || attempt <= failures!:
                results.append(["error": "INTERNAL"])
                continue
            default:
                break
            }
            if add {
                subscribers[key, default: []].insert(token)
                adds[key + "\u{0}" + token, default: 0] += 1
            } else {
                subscribers[key]?.remove(token)
            }
            results.append(.object(JSONObject()))
        }
        return .success(results)
    }

    public struct RefusedRequest: Error, Sendable {
        public var message: String
        public var status: Int
        public var retryAfter: Int?
        init(_ message: String, status: Int = 400, retryAfter: Int? = nil) {
            self.message = message
            self.status = status
            self.retryAfter = retryAfter
        }
    }
}
