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
///   "quota": {"per_minute": 600000, "window": "minute", "start": 0},
///   "quota_answer": "production",
///   "limits": {"device_per_minute": 240, "device_per_hour": 5000, "collapsible_burst": 20,
///              "collapsible_every_seconds": 180, "topic_per_minute": 600},
///   "capacity_per_second": 2000,
///   "goaway_every": 1000,
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
/// - `quota`: the project's quota of `per_minute` messages, counted as `window` says:
///   `"minute"` (the default, as FCM documents it): windows of 60 s that are not aligned to the
///   clock, each starting at the first counted request after the last one ended; a window that
///   holds `per_minute` refuses everything until it ends. `"continuous"`: a token bucket of
///   `per_minute` messages refilled continuously at `per_minute / 60` a second, so at most a
///   minute's worth goes through at once and then the stated rate; `burst` makes the bucket
///   smaller (default `per_minute`; continuous only). `start` is what the quota allows at the
///   start (default all of it: a project that sent nothing for a minute): what the bucket holds,
///   or what is left of a minute window running from start-up. Every answer but a 429 counts
///   (4xx included, as FCM counts them). When spent, in the `production` shape (`quota_answer`): FCM's answer as seen in
///   production (429 RESOURCE_EXHAUSTED, `ErrorInfo` reason `RATE_LIMIT_EXCEEDED` with
///   `quota_limit_value` = `per_minute`, a `Help` link; no `FcmError`, no `QuotaFailure`, no
///   Retry-After); in the `legacy` shape 429 QUOTA_EXCEEDED with a QuotaFailure `project:ID` and
///   `Retry-After` set to the seconds until a message is available (the window's end), rounded up.
/// - `quota_answer`: `production` (the default) or `legacy`, how every limit above and below
///   words its 429 (docs/fcm-limits.md).
/// - `limits`: FCM's per-target limits, each optional (absent: not enforced). Per device (the
///   message's `token`): `device_per_minute` and `device_per_hour` messages, and for collapsible
///   messages (`android.collapse_key` or an `apns-collapse-id` header) a burst of
///   `collapsible_burst`, then one every `collapsible_every_seconds`. Per topic (a `topic`
///   target): `topic_per_minute`. Each is a token bucket that refills continuously. Beyond one:
///   429 QUOTA_EXCEEDED with a `google.rpc.QuotaFailure` whose violation's `subject` names the
///   target (`device:TOKEN` or `topic:NAME`) and an `FcmError` QUOTA_EXCEEDED; in the `legacy`
///   shape also `Retry-After` set to the whole seconds until that bucket holds a message again.
///   A refused send takes nothing from any bucket (FCM does not count 429s against a quota).
/// - `capacity_per_second`: how many sends a second the emulator serves. Past it, requests wait
///   their turn in one first-in first-out line (as at an overloaded server): a send is served
///   (and a delivered message's `time` is) when its turn comes, and answered after its latency
///   from then, so answer times grow with the number of requests open at once.
///   `--capacity` on the command line wins over it.
/// - `goaway_every`: end every HTTP/2 connection gracefully with a GOAWAY after this many
///   requests on it (`1000`) or once it is this old (`"30s"`), as Google's front ends do (see
///   `GoawayEvery`). `--goaway-every` on the command line wins over it.
/// - `scripts`: per-prefix answer scripts. The first script whose `prefix` the message's token
///   (or topic, or condition) starts with decides: the n-th attempt of that exact token gets
///   `answers[n-1]`, and every attempt after the list gets `then` (default `"success"`).
///   Scripts come before the built-in `fail-...` tokens, so a script can redefine them.
/// - An answer is `"success"` or `{"error": CODE, "retry_after": SECONDS, "status": HTTP,
///   "message": TEXT, "quota": SUBJECT}` where CODE is UNREGISTERED, INVALID_ARGUMENT, SENDER_ID_MISMATCH,
///   QUOTA_EXCEEDED, UNAVAILABLE, INTERNAL, THIRD_PARTY_AUTH_ERROR, APNS_AUTH_ERROR,
///   UNSPECIFIED_ERROR (500 unless `status` says otherwise), UNAUTHENTICATED (a plain 401 as for
///   an expired access token) or PERMISSION_DENIED (FCM's `FCMErrorCode`); `status` and
///   `message` default to what FCM sends for that code. `quota` (QUOTA_EXCEEDED only) is which
///   limit the QuotaFailure detail names: `project` (the default), `device`, `topic`, `none` (no
///   QuotaFailure detail at all) or `legacy-device` / `legacy-topic` (a legacy-style body
///   `{"error": "DeviceMessageRateExceeded"}` / `TopicsMessageRateExceeded`); or `rate-limit`,
///   the project quota's production body (no QuotaFailure), whose `quota_limit_value` is the
///   answer's `quota_limit_value` member (a string or a number, sent as a string, so a test can
///   state a malformed one), else the scenario's `quota.per_minute`, else 600000.
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
        /// How it is counted: FCM's documented minute (the default) or a bucket refilled
        /// continuously.
        public var window: QuotaWindowModel
        /// The continuous bucket's size (nil: `perMinute`); refused with the minute window, which
        /// has no bucket (`problem`).
        public var burst: Int?
        /// What the quota allows at the start (nil: all of it): the continuous bucket's content,
        /// or what is left of a minute window already running at start-up.
        public var start: Int?
        public init(perMinute: Int, burst: Int? = nil, start: Int? = nil, window: QuotaWindowModel = .minute) {
            self.perMinute = perMinute
            self.window = window
            self.burst = burst
            self.start = start
        }

        /// Why the quota cannot be used as given (nil: it can), naming the setting.
        public var problem: String? {
            if burst != nil && window == .minute {
                return "a burst (--quota-burst, \"quota.burst\") sizes the continuous bucket: give --quota-window continuous (\"window\": \"continuous\") with it, or leave it out for FCM's minute window"
            }
            if let start, start > (burst ?? perMinute) {
                return "the quota's start (--quota-start, \"quota.start\": \(start)) must not exceed what it allows (\(burst ?? perMinute) messages)"
            }
            return nil
        }

        /// The model in words, for the start-up line and `/emulator/stats`.
        public var described: String {
            switch window {
            case .minute:
                return "\(perMinute) messages a minute, counted in windows of 60 s that start at the first counted request (not aligned to the clock); once a window holds \(perMinute), every send is refused until it ends"
                    + (start.map { "; a window with \($0) left is running at start-up" } ?? "")
            case .continuous:
                return "\(perMinute) messages a minute, a bucket of \(burst ?? perMinute) refilled continuously at \(Self.figure(Double(perMinute) / 60)) a second"
                    + (start.map { "; holding \($0) at start-up" } ?? "")
            }
        }

        static func figure(_ value: Double) -> String {
            value == value.rounded() ? String(Int(value)) : String(Double(Int(value * 100)) / 100)
        }
    }

    /// FCM's per-device and per-topic limits (see the type's documentation); nil: none enforced.
    public struct Limits: Sendable, Equatable {
        public var devicePerMinute: Int? = nil
        public var devicePerHour: Int? = nil
        public var collapsibleBurst: Int? = nil
        public var collapsibleEverySeconds: Double? = nil
        public var topicPerMinute: Int? = nil
        public init() {}

        /// The device limits FCM documents for Android: 240 a minute and 5,000 an hour to one
        /// device; collapsible messages a burst of 20, then one every 3 minutes.
        public static var fcm: Limits {
            var limits = Limits()
            limits.devicePerMinute = 240
            limits.devicePerHour = 5000
            limits.collapsibleBurst = 20
            limits.collapsibleEverySeconds = 180
            return limits
        }

        var isEmpty: Bool { self == Limits() }
    }

    public var seed: UInt64 = 1
    public var latency: Latency? = nil
    public var errorRate: Double = 0
    public var randomErrors: [ErrorAnswer] = [ErrorAnswer(code: .unavailable)]
    public var quota: Quota? = nil
    /// How the limits word their 429s: as FCM does (default) or in the emulator's older shape.
    public var quotaAnswer: QuotaAnswerShape = .production
    public var scripts: [Script] = []
    public var limits = Limits()
    /// Sends served a second at most (nil: as fast as the threads go).
    public var capacityPerSecond: Double? = nil
    /// When an HTTP/2 connection is sent a GOAWAY (nil: never).
    public var goawayEvery: GoawayEvery? = nil

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
                var start: Int? = nil
                var window = QuotaWindowModel.minute
                for field in quota {
                    switch field.key {
                    case "window":
                        guard let text = field.value.stringValue, let model = QuotaWindowModel(rawValue: text) else {
                            throw ParseError("\"quota.window\" must be \"minute\" (FCM's documented minute, the default) or \"continuous\", not \(field.value)")
                        }
                        window = model
                    case "per_minute":
                        guard let n = field.value.intValue, n > 0 else { throw ParseError("\"quota.per_minute\" must be a positive integer") }
                        perMinute = n
                    case "burst":
                        guard let n = field.value.intValue, n > 0 else { throw ParseError("\"quota.burst\" must be a positive integer") }
                        burst = n
                    case "start":
                        guard let n = field.value.intValue, n >= 0 else { throw ParseError("\"quota.start\" must be a whole number of messages >= 0") }
                        start = n
                    default: throw ParseError("unknown member \"quota.\(field.key)\" (known: per_minute, window, burst, start)")
                    }
                }
                guard let perMinute else { throw ParseError("\"quota\" needs \"per_minute\"") }
                let parsed = Quota(perMinute: perMinute, burst: burst, start: start, window: window)
                if let problem = parsed.problem { throw ParseError(problem) }
                scenario.quota = parsed
            case "quota_answer":
                guard let text = member.value.stringValue, let shape = QuotaAnswerShape(rawValue: text) else {
                    throw ParseError("\"quota_answer\" must be \"production\" or \"legacy\", not \(member.value)")
                }
                scenario.quotaAnswer = shape
            case "limits":
                scenario.limits = try parseLimits(member.value)
            case "goaway_every":
                let text = member.value.stringValue ?? member.value.intValue.map(String.init) ?? member.value.description
                do {
                    scenario.goawayEvery = try GoawayEvery(parsing: text)
                } catch {
                    throw ParseError("\"goaway_every\" \(error.description)")
                }
            case "capacity_per_second":
                guard let rate = member.value.doubleValue, rate > 0, rate.isFinite else {
                    throw ParseError("\"capacity_per_second\" must be a number of sends a second above 0, not \(member.value)")
                }
                scenario.capacityPerSecond = rate
            case "scripts":
                guard let items = member.value.arrayValue else { throw ParseError("\"scripts\" must be an array") }
                for (index, item) in items.enumerated() {
                    scenario.scripts.append(try parseScript(item, at: "scripts[\(index)]"))
                }
            default:
                throw ParseError("unknown member \"\(member.key)\" (known: seed, latency_ms, error_rate, random_errors, quota, quota_answer, limits, capacity_per_second, goaway_every, scripts)")
            }
        }
        return scenario
    }

    private static func parseLimits(_ value: JSONValue) throws(ParseError) -> Limits {
        guard let object = value.objectValue else {
            throw ParseError("\"limits\" must be an object such as {\"device_per_minute\": 240}")
        }
        var limits = Limits()
        for member in object {
            func count() throws(ParseError) -> Int {
                guard let n = member.value.intValue, n > 0 else {
                    throw ParseError("\"limits.\(member.key)\" must be a positive integer, not \(member.value)")
                }
                return n
            }
            switch member.key {
            case "device_per_minute": limits.devicePerMinute = try count()
            case "device_per_hour": limits.devicePerHour = try count()
            case "collapsible_burst": limits.collapsibleBurst = try count()
            case "collapsible_every_seconds":
                guard let seconds = member.value.doubleValue, seconds > 0, seconds.isFinite else {
                    throw ParseError("\"limits.collapsible_every_seconds\" must be a number of seconds above 0, not \(member.value)")
                }
                limits.collapsibleEverySeconds = seconds
            case "topic_per_minute": limits.topicPerMinute = try count()
            default:
                throw ParseError("unknown member \"limits.\(member.key)\" (known: device_per_minute, device_per_hour, collapsible_burst, collapsible_every_seconds, topic_per_minute)")
            }
        }
        if (limits.collapsibleBurst == nil) != (limits.collapsibleEverySeconds == nil) {
            throw ParseError("\"limits.collapsible_burst\" and \"limits.collapsible_every_seconds\" go together: give both or neither")
        }
        return limits
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
            case "quota":
                guard let text = member.value.stringValue, let subject = QuotaSubjectChoice(rawValue: text) else {
                    throw ParseError("\"\(path).quota\" must be one of rate-limit, project, device, topic, none, legacy-device, legacy-topic, not \(member.value)")
                }
                answer.quotaSubject = subject
            case "quota_limit_value":
                if let text = member.value.stringValue {
                    answer.quotaLimitValue = text
                } else if case .number(let digits) = member.value {
                    answer.quotaLimitValue = digits
                } else {
                    throw ParseError("\"\(path).quota_limit_value\" must be a number or a string, not \(member.value)")
                }
            default:
                throw ParseError("unknown member \"\(path).\(member.key)\" (known: error, retry_after, status, message, quota, quota_limit_value)")
            }
        }
        guard let code else { throw ParseError("\"\(path)\" needs an \"error\" code") }
        if answer.quotaSubject != nil && code != .quotaExceeded {
            throw ParseError("\"\(path).quota\" goes with \"error\": \"QUOTA_EXCEEDED\" only, not \(code.rawValue)")
        }
        if answer.quotaLimitValue != nil && answer.quotaSubject != .rateLimit {
            throw ParseError("\"\(path).quota_limit_value\" goes with \"quota\": \"rate-limit\" only")
        }
        answer.code = code
        return .error(answer)
    }
}

/// How often the emulator ends an HTTP/2 connection with a GOAWAY: after a number of requests on
/// it, or once it is so many seconds old (checked as each request completes). The GOAWAY's
/// last-stream-id is the request that reached the mark: streams the client opened after it are
/// not processed (it may send them again), the ones up to it are answered, then the emulator
/// half-closes the connection.
public enum GoawayEvery: Sendable, Equatable, CustomStringConvertible {
    case requests(Int)
    case seconds(Double)

    /// `1000` (requests) or `30s` (seconds).
    public init(parsing text: String) throws(ParseError) {
        let trimmed = String(text.drop { $0 == " " }.reversed().drop { $0 == " " }.reversed())
        if trimmed.hasSuffix("s"), let seconds = Double(trimmed.dropLast()), seconds > 0, seconds <= 86_400 {
            self = .seconds(seconds)
        } else if let requests = Int(trimmed), requests >= 1, requests <= 1_000_000_000 {
            self = .requests(requests)
        } else {
            throw ParseError("must be a number of requests from 1 (such as 1000) or of seconds up to 86400 (such as 30s), not '\(text)'")
        }
    }

    public var description: String {
        switch self {
        case .requests(let n): return "\(n)"
        case .seconds(let s): return s == s.rounded() ? "\(Int(s))s" : "\(s)s"
        }
    }

    public struct ParseError: Error, Sendable, CustomStringConvertible {
        public var description: String
        init(_ description: String) { self.description = description }
    }
}
