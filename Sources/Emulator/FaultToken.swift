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
