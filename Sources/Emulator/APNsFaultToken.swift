/// APNs device tokens that make the emulator fail on purpose. They stay hex (APNs tokens are
/// hex, and Herald refuses anything else before sending), so each fault is an 8-digit prefix
/// starting `fa11` followed by the status; the digit after it says how the fault ends: `0` never
/// (every attempt fails), `1`-`f` the number of attempts that fail before the token is
/// delivered (counted per exact token). Any hex digits may follow.
///
/// | token prefix | answer |
/// | --- | --- |
/// | `fa110410` | 410 `Unregistered` with `timestamp` (milliseconds since 1970), always |
/// | `fa11e410` | 410 `ExpiredToken` with `timestamp`, always |
/// | `fa110400` | 400 `BadDeviceToken`, always |
/// | `fa11d400` | 400 `DeviceTokenNotForTopic` (the token is another app's), always |
/// | `fa11b400` | 400 `TopicDisallowed` (the key may not push to the topic), always |
/// | `fa110429K` | 429 `TooManyRequests` on the first K attempts (K = 0: always) |
/// | `fa110503K` | 503 `ServiceUnavailable` on the first K attempts (K = 0: always) |
/// | `fa110500K` | 500 `InternalServerError` on the first K attempts (K = 0: always) |
///
/// An ordinary random token starts with one of these by chance once in about 4 billion.
public enum APNsFaultToken: Sendable, Equatable {
    case unregistered
    case expiredToken
    case badDeviceToken
    case deviceTokenNotForTopic
    case topicDisallowed
    /// `failures` nil: every attempt.
    case tooManyRequests(failures: Int?)
    case serviceUnavailable(failures: Int?)
    case internalServerError(failures: Int?)

    /// The fault a (lowercase hex) token asks for, or nil for an ordinary token.
    public static func parse(_ token: String) -> APNsFaultToken? {
        guard token.hasPrefix("fa11") else { return nil }
        let bytes = Array(token.utf8)
        guard bytes.count >= 8 else { return nil }
        let code = String(decoding: bytes[4..<8], as: UTF8.self)
        func failures() -> Int? {
            guard bytes.count > 8, let n = Int(String(UnicodeScalar(bytes[8])), radix: 16), n > 0 else { return nil }
            return n
        }
        switch code {
        case "0410": return .unregistered
        case "e410": return .expiredToken
        case "0400": return .badDeviceToken
        case "d400": return .deviceTokenNotForTopic
        case "b400": return .topicDisallowed
        case "0429": return .tooManyRequests(failures: failures())
        case "0503": return .serviceUnavailable(failures: failures())
        case "0500": return .internalServerError(failures: failures())
        default: return nil
        }
    }

    /// The answer (status, reason) to the `attempt`-th request (1-based), or nil to deliver.
    func answer(attempt: Int) -> (status: Int, reason: String)? {
        func limited(_ failures: Int?, _ answer: (Int, String)) -> (status: Int, reason: String)? {
            if let failures, attempt > failures { return nil }
            return answer
        }
        switch self {
        case .unregistered: return (410, "Unregistered")
        case .expiredToken: return (410, "ExpiredToken")
        case .badDeviceToken: return (400, "BadDeviceToken")
        case .deviceTokenNotForTopic: return (400, "DeviceTokenNotForTopic")
        case .topicDisallowed: return (400, "TopicDisallowed")
        case .tooManyRequests(let n): return limited(n, (429, "TooManyRequests"))
        case .serviceUnavailable(let n): return limited(n, (503, "ServiceUnavailable"))
        case .internalServerError(let n): return limited(n, (500, "InternalServerError"))
        }
    }
}
