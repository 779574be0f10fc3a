/// Registration tokens that make the emulator fail on purpose, like a payment provider's test
/// cards. The emulator counts attempts per distinct token string, so `fail-quota-5-job17` and
/// `fail-quota-5-job18` are independent; anything may follow the documented prefix.
///
/// | token prefix | answer |
/// | --- | --- |
/// | `fail-unregistered` | 404 UNREGISTERED, always |
/// | `fail-invalid` | 400 INVALID_ARGUMENT, always |
/// | `fail-mismatch` | 403 SENDER_ID_MISMATCH, always |
/// | `fail-auth` | 401 THIRD_PARTY_AUTH_ERROR, always |
/// | `fail-quota-N` | 429 QUOTA_EXCEEDED with `Retry-After: N` on the first attempt, then success |
/// | `fail-unavailable-N` | 503 UNAVAILABLE with `Retry-After: N` on the first attempt, then success |
/// | `fail-internal-K` | 500 INTERNAL (no Retry-After) on the first K attempts, then success |
///
/// The number says how a retryable fault ends. Without one (`fail-quota`, `fail-quota-x`,
/// `fail-unavailable`, `fail-internal`) the fault never ends and the answer carries no
/// Retry-After: a sustained outage, for testing a sender's own backoff and give-up path. (A
/// one-shot 429 would not even reach the caller of an SDK that honours Retry-After itself, as
/// firebase-admin's urllib3 retry does.)
public enum FaultToken: Sendable, Equatable {
    case unregistered
    case invalid
    case mismatch
    case thirdPartyAuth
    /// `retryAfter` nil: every attempt, without Retry-After.
    case quota(retryAfter: Int?)
    /// `retryAfter` nil: every attempt, without Retry-After.
    case unavailable(retryAfter: Int?)
    /// `failures` nil: every attempt.
    case `internal`(failures: Int?)

    /// The fault a token asks for, or nil for an ordinary token.
    public static func parse(_ token: String) -> FaultToken? {
        guard token.hasPrefix("fail-") else { return nil }
        let rest = token.utf8.dropFirst(5)
        func number(after name: String) -> Int? {
            let tail = rest.dropFirst(name.utf8.count)
            guard tail.first == UInt8(ascii: "-") else { return nil }
            let digits = tail.dropFirst().prefix { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }
            guard !digits.isEmpty, digits.count <= 9 else { return nil }
            return Int(String(decoding: digits, as: UTF8.self))
        }
        func starts(_ name: String) -> Bool { rest.starts(with: name.utf8) }
        if starts("unregistered") { return .unregistered }
        if starts("invalid") { return .invalid }
        if starts("mismatch") { return .mismatch }
        if starts("auth") { return .thirdPartyAuth }
        if starts("quota") { return .quota(retryAfter: number(after: "quota")) }
        if starts("unavailable") { return .unavailable(retryAfter: number(after: "unavailable")) }
        if starts("internal") { return .internal(failures: number(after: "internal")) }
        return nil
    }

    /// The answer to the `attempt`-th request (1-based) for this token; nil means deliver.
    public func answer(attempt: Int) -> ErrorAnswer? {
        switch self {
        case .unregistered: return ErrorAnswer(code: .unregistered)
        case .invalid: return ErrorAnswer(code: .invalidArgument)
        case .mismatch: return ErrorAnswer(code: .senderIDMismatch)
        case .thirdPartyAuth: return ErrorAnswer(code: .thirdPartyAuthError)
        case .quota(let seconds?): return attempt == 1 ? ErrorAnswer(code: .quotaExceeded, retryAfter: seconds) : nil
        case .quota(nil): return ErrorAnswer(code: .quotaExceeded)
        case .unavailable(let seconds?): return attempt == 1 ? ErrorAnswer(code: .unavailable, retryAfter: seconds) : nil
        case .unavailable(nil): return ErrorAnswer(code: .unavailable)
        case .internal(let failures?): return attempt <= failures ? ErrorAnswer(code: .internal) : nil
        case .internal(nil): return ErrorAnswer(code: .internal)
        }
    }

    /// Whether the answer depends on the attempt count (so attempts must be counted).
    public var countsAttempts: Bool {
        switch self {
        case .quota(let n): return n != nil
        case .unavailable(let n): return n != nil
        case .internal(let n): return n != nil
        default: return false
        }
    }
}

/// A project-wide token bucket: `capacity` sends at most, refilled at `perMinute / 60` a second.
/// FCM's default quota is 600,000 a minute, measured as a bucket, not per clock minute.
public struct TokenBucket: Sendable, Equatable {
    public let capacity: Double
    public let perSecond: Double
    public private(set) var tokens: Double
    private var last: UInt64

    public init(perMinute: Int, capacity: Int? = nil, now: UInt64) {
        self.perSecond = Double(perMinute) / 60
        self.capacity = Double(capacity ?? perMinute)
        self.tokens = self.capacity
        self.last = now
    }

    /// Takes one send; nil when granted, else the whole seconds until one is available (>= 1).
    public mutating func take(now: UInt64) -> Int? {
        if now > last {
            tokens = min(capacity, tokens + Double(now - last) / 1e9 * perSecond)
            last = now
        }
        if tokens >= 1 {
            tokens -= 1
            return nil
        }
        guard perSecond > 0 else { return 60 }
        let wait = (1 - tokens) / perSecond
        return max(1, Int(wait.rounded(.up)))
    }
}

/// Deterministic randomness for scenarios: the same seed, token and attempt give the same
/// number whichever thread or order the requests arrive in, so a run repeats.
public enum SeededRandom {
    /// A uniform number in [0, 1).
    public static func unit(seed: UInt64, key: String, attempt: Int, salt: UInt64) -> Double {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in key.utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01B3
        }
        var x = seed ^ hash ^ (UInt64(truncatingIfNeeded: attempt) &* 0x9E37_79B9_7F4A_7C15) ^ (salt &* 0xD1B5_4A32_D192_ED03)
        // splitmix64 finaliser
        x = (x ^ (x >> 30)) &* 0xBF58_476D_1CE4_E5B9
        x = (x ^ (x >> 27)) &* 0x94D0_49BB_1331_11EB
        x ^= x >> 31
        return Double(x >> 11) / Double(UInt64(1) << 53)
    }
}
