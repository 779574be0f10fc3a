import FCM
import JSON

/// What `--scenario FILE` scripts beyond the fault tokens. The file is one JSON object; every
/// member is optional and unknown members are refused (a typo should not silently do nothing):
///
/// ```json
/// {
///   "seed": 42,
///   "latency_ms": 20,
///   "error_rate": 0.02,
///   "random_errors": [{"error": "UNAVAILABLE", "retry_after": 1}, {"error": "INTERNAL"}],
///   "quota": {"per_minute": 600000, "burst": 10000},
///   "scripts": [
///     {"prefix": "flaky-", "answers": [{"error": "UNAVAILABLE", "retry_after": 2}, "success"], "then": "success"},
///     {"prefix": "gone-", "then": {"error": "UNREGISTERED"}},
///     {"prefix": "slow-", "answers": [{"error": "QUOTA_EXCEEDED", "retry_after": 30}]}
///   ]
/// }
/// ```
///
/// - `seed` (integer, default 1): seeds every random choice. A choice depends only on the seed,
///   the token (or topic/condition) and its attempt number, so a run repeats however requests
///   interleave.
/// - `latency_ms`: a fixed delay for every send (`20`), or a range (`{"min": 5, "max": 50}`)
///   drawn per request. `--latency-ms` on the command line wins over it.
/// - `error_rate` (0...1, default 0): the share of sends, not already answered by a script or
///   a fault token, that get a random error from `random_errors` (default: 503 UNAVAILABLE
///   without Retry-After).
/// - `quota`: a project-wide token bucket, `per_minute` sends refilled continuously, holding at
///   most `burst` (default `per_minute`). When empty: 429 QUOTA_EXCEEDED with `Retry-After`
///   set to the seconds until a send is available, rounded up. Answers of any status but 429
///   take from the bucket, as FCM counts 4xx against the quota.
/// - `scripts`: per-prefix answer scripts. The first script whose `prefix` the message's token
///   (or topic, or condition) starts with decides: the n-th attempt of that exact token gets
///   `answers[n-1]`, and every attempt after the list gets `then` (default `"success"`).
///   Scripts come before the built-in `fail-...` tokens, so a script can redefine them.
/// - An answer is `"success"` or `{"error": CODE, "retry_after": SECONDS, "status": HTTP,
///   "message": TEXT}` where CODE is UNREGISTERED, INVALID_ARGUMENT, SENDER_ID_MISMATCH,
///   QUOTA_EXCEEDED, UNAVAILABLE, INTERNAL, THIRD_PARTY_AUTH_ERROR, APNS_AUTH_ERROR,
///   UNSPECIFIED_ERROR (500 unless `status` says otherwise), UNAUTHENTICATED (a plain 401 as for
///   an expired access token) or PERMISSION_DENIED (FCM's `FCMErrorCode`); `status` and
///   `message` default to what FCM sends for that code.
public struct Scenario: Sendable, Equatable {
    public enum Behaviour: Sendable, Equatable {
        case success
        case error(ErrorAnswer)
    }

    public struct Script: Sendable, Equatable {
        public var prefix: String
        public var answers: [Behaviour]
        public var then: Behaviour

        public init(prefix: String, answers: [Behaviour], then: Behaviour = .success) {
            self.prefix = prefix
            self.answers = answers
            self.then = then
        }

        /// The behaviour for the `attempt`-th request (1-based).
        public func behaviour(attempt: Int) -> Behaviour {
            attempt >= 1 && attempt <= answers.count ? answers[attempt - 1] : then
        }
    }

    public enum Latency: Sendable, Equatable {
        case fixed(Int)
        case range(Int, Int)
    }

    public struct Quota: Sendable, Equatable {
        public var perMinute: Int
        public var burst: Int?
        public init(perMinute: Int, burst: Int? = nil) {
            self.perMinute = perMinute
            self.burst = burst
        }
    }

    public var seed: UInt64 = 1
    public var latency: Latency? = nil
    public var errorRate: Double = 0
    public var randomErrors: [ErrorAnswer] = [ErrorAnswer(code: .unavailable)]
    public var quota: Quota? = nil
    public var scripts: [Script] = []

    public init() {}

    /// The script for a target, if any.
    public func script(for key: String) -> Script? {
        scripts.first { key.hasPrefix($0.prefix) }
    }

    /// Why a scenario file is not usable, naming the member.
    public struct ParseError: Error, Sendable, CustomStringConvertible, Equatable {
        public var description: String
        init(_ description: String) { self.description = description }
    }

    public static func parse(_ text: String) throws(ParseError) -> Scenario {
        let value: JSONValue
        do {
            value = try JSONValue.parse(text)
        } catch {
            throw ParseError("the scenario is not JSON: \(error)")
        }
        guard let root = value.objectValue else { throw ParseError("the scenario must be a JSON object, not \(value.typeName)") }
        var scenario = Scenario()
        for member in root {
            switch member.key {
            case "seed":
                guard let seed = member.value.intValue, seed >= 0 else { throw ParseError("\"seed\" must be a non-negative integer") }
                scenario.seed = UInt64(seed)
            case "latency_ms":
                scenario.latency = try parseLatency(member.value)
            case "error_rate":
                guard let rate = member.value.doubleValue, rate >= 0, rate <= 1 else {
                    throw ParseError("\"error_rate\" must be a number between 0 and 1, not \(member.value)")
                }
                scenario.errorRate = rate
            case "random_errors":
                guard let items = member.value.arrayValue, !items.isEmpty else {
                    throw ParseError("\"random_errors\" must be a non-empty array of error answers")
                }
                scenario.randomErrors = try items.enumerated().map { (index, item) throws(ParseError) -> ErrorAnswer in
                    guard case .error(let answer) = try parseBehaviour(item, at: "random_errors[\(index)]") else {
                        throw ParseError("\"random_errors[\(index)]\" must be an error, not \"success\"")
                    }
                    return answer
                }
            case "quota":
                guard let quota = member.value.objectValue else { throw ParseError("\"quota\" must be an object such as {\"per_minute\": 600000}") }
                var perMinute: Int? = nil
                var burst: Int? = nil
                for field in quota {
                    switch field.key {
                    case "per_minute":
                        guard let n = field.value.intValue, n > 0 else { throw ParseError("\"quota.per_minute\" must be a positive integer") }
                        perMinute = n
                    case "burst":
                        guard let n = field.value.intValue, n > 0 else { throw ParseError("\"quota.burst\" must be a positive integer") }
                        burst = n
                    default: throw ParseError("unknown member \"quota.\(field.key)\" (known: per_minute, burst)")
                    }
                }
                guard let perMinute else { throw ParseError("\"quota\" needs \"per_minute\"") }
                scenario.quota = Quota(perMinute: perMinute, burst: burst)
            case "scripts":
                guard let items = member.value.arrayValue else { throw ParseError("\"scripts\" must be an array") }
                for (index, item) in items.enumerated() {
                    scenario.scripts.append(try parseScript(item, at: "scripts[\(index)]"))
                }
            default:
                throw ParseError("unknown member \"\(member.key)\" (known: seed, latency_ms, error_rate, random_errors, quota, scripts)")
            }
        }
        return scenario
    }

    private static func parseLatency(_ value: JSONValue) throws(ParseError) -> Latency {
        if let fixed = value.intValue {
            guard fixed >= 0 else { throw ParseError("\"latency_ms\" must not be negative") }
            return .fixed(fixed)
        }
        guard let range = value.objectValue else {
            throw ParseError("\"latency_ms\" must be milliseconds (20) or a range ({\"min\": 5, \"max\": 50})")
        }
        var low: Int? = nil
        var high: Int? = nil
        for member in range {
            switch member.key {
            case "min": low = member.value.intValue
            case "max": high = member.value.intValue
            default: throw ParseError("unknown member \"latency_ms.\(member.key)\" (known: min, max)")
            }
        }
        guard let low, let high, low >= 0, high >= low else {
            throw ParseError("\"latency_ms\" range needs integers 0 <= min <= max")
        }
        return .range(low, high)
    }

    private static func parseScript(_ value: JSONValue, at path: String) throws(ParseError) -> Script {
        guard let object = value.objectValue else { throw ParseError("\"\(path)\" must be an object with prefix, answers and then") }
        var prefix: String? = nil
        var answers: [Behaviour] = []
        var then: Behaviour = .success
        for member in object {
            switch member.key {
            case "prefix":
                guard let text = member.value.stringValue, !text.isEmpty else { throw ParseError("\"\(path).prefix\" must be a non-empty string") }
                prefix = text
            case "answers":
                guard let items = member.value.arrayValue else { throw ParseError("\"\(path).answers\" must be an array") }
                for (index, item) in items.enumerated() {
                    answers.append(try parseBehaviour(item, at: "\(path).answers[\(index)]"))
                }
            case "then":
                then = try parseBehaviour(member.value, at: "\(path).then")
            default:
                throw ParseError("unknown member \"\(path).\(member.key)\" (known: prefix, answers, then)")
            }
        }
        guard let prefix else { throw ParseError("\"\(path)\" needs a \"prefix\"") }
        return Script(prefix: prefix, answers: answers, then: then)
    }

    private static func parseBehaviour(_ value: JSONValue, at path: String) throws(ParseError) -> Behaviour {
        if value.stringValue == "success" { return .success }
        guard let object = value.objectValue else {
            throw ParseError("\"\(path)\" must be \"success\" or {\"error\": CODE, ...}, not \(value)")
        }
        var code: FCMErrorCode? = nil
        var answer = ErrorAnswer(code: .internal)
        for member in object {
            switch member.key {
            case "error":
                guard let text = member.value.stringValue, let parsed = FCMErrorCode(rawValue: text) else {
                    let known = FCMErrorCode.allCases.map(\.rawValue).joined(separator: ", ")
                    throw ParseError("\"\(path).error\" must be one of \(known), not \(member.value)")
                }
                code = parsed
            case "retry_after":
                guard let seconds = member.value.intValue, seconds >= 0 else { throw ParseError("\"\(path).retry_after\" must be whole seconds >= 0") }
                answer.retryAfter = seconds
            case "status":
                guard let status = member.value.intValue, (400...599).contains(status) else { throw ParseError("\"\(path).status\" must be an HTTP error status (400-599)") }
                answer.status = status
            case "message":
                guard let text = member.value.stringValue else { throw ParseError("\"\(path).message\" must be a string") }
                answer.message = text
            default:
                throw ParseError("unknown member \"\(path).\(member.key)\" (known: error, retry_after, status, message)")
            }
        }
        guard let code else { throw ParseError("\"\(path)\" needs an \"error\" code") }
        answer.code = code
        return .error(answer)
    }
}
