import Crypto
import JSON
import Synchronization

/// When provider tokens are renewed; every default is Apple's rule or the choice beside it.
public struct APNsTokenPolicy: Sendable, Equatable {
    /// A token is renewed this many seconds after it was made at the earliest... Default 40 minutes.
    public var renewAfterMinimum: Double = 40 * 60
    /// ...and at the latest (a jitter picks a point in between for each token, so the keys of many
    /// apps do not all renew at once). Default 50 minutes; Apple refuses tokens older than 60.
    public var renewAfterMaximum: Double = 50 * 60
    /// No new token for a key sooner than this after the last one, except after APNs answered
    /// ExpiredProviderToken for it. Default 20 minutes, Apple's floor.
    public var minimumGap: Double = 20 * 60
    /// After APNs answered TooManyProviderTokenUpdates, no new token for this long. Default 20 minutes.
    public var holdAfterTooManyUpdates: Double = 20 * 60

    public init() {}
}

/// The provider token (ES256 JWT: `kid` in the header, `iss` = team ID and `iat` in the claims)
/// of one APNs signing key, made once and reused by every request until it is due: renewed
/// between `renewAfterMinimum` and `renewAfterMaximum` after it was made, at once when APNs
/// answers ExpiredProviderToken for it, and otherwise never sooner than `minimumGap` after the
/// previous one (Apple answers TooManyProviderTokenUpdates to senders that re-sign more often).
/// Safe to share between threads; `clock` (seconds since 1970) and `jitter` (0 to 1) are given
/// so tests drive time.
public final class APNsProviderToken: Sendable {
    public let teamID: String
    public let keyID: String
    private let key: P256PrivateKey
    private let policy: APNsTokenPolicy
    private let clock: @Sendable () -> Double
    private let jitter: @Sendable () -> Double

    private struct State {
        var token: String?
        /// When the current token was made (its `iat`), and when it falls due.
        var madeAt: Double = 0
        var dueAt: Double = 0
        /// No scheduled renewal before this (after TooManyProviderTokenUpdates).
        var holdUntil: Double = 0
        /// Tokens made so far.
        var made = 0
    }

    private let state = Mutex(State())

    public init(teamID: String, keyID: String, key: P256PrivateKey, policy: APNsTokenPolicy = APNsTokenPolicy(),
                clock: @escaping @Sendable () -> Double, jitter: @escaping @Sendable () -> Double = { Double.random(in: 0..<1) }) {
        self.teamID = teamID
        self.keyID = keyID
        self.key = key
        self.policy = policy
        self.clock = clock
        self.jitter = jitter
    }

    /// The token to send now: the current one, or a new one when it is due (or there is none).
    public func current() throws(CryptoError) -> String {
        let now = clock()
        return try state.withLock { (state: inout State) throws(CryptoError) -> String in
            if let token = state.token {
                let due = now >= state.dueAt && now >= state.holdUntil && now - state.madeAt >= policy.minimumGap
                if !due { return token }
            }
            return try renew(&state, now: now)
        }
    }

    /// APNs answered ExpiredProviderToken to a request that carried `token`: the next `current()`
    /// makes a new one at once. Answers for a token already replaced change nothing, so a burst of
    /// such answers on requests in flight makes one new token, not one each.
    public func expired(_ token: String) {
        state.withLock { state in
            guard state.token == token else { return }
            state.token = nil
        }
    }

    /// APNs answered TooManyProviderTokenUpdates: keep the current token and make no scheduled
    /// renewal for `holdAfterTooManyUpdates`.
    public func tooManyUpdates() {
        let now = clock()
        state.withLock { $0.holdUntil = max($0.holdUntil, now + policy.holdAfterTooManyUpdates) }
    }

    /// Tokens made so far (for tests and metrics).
    public var tokensMade: Int { state.withLock { $0.made } }

    /// When the current token was made, seconds since 1970 (nil before the first).
    public var currentMadeAt: Double? { state.withLock { $0.token == nil ? nil : $0.madeAt } }

    private func renew(_ state: inout State, now: Double) throws(CryptoError) -> String {
        let issuedAt = Int64(now)
        let claims: JSONValue = ["iss": .string(teamID), "iat": .number(String(issuedAt))]
        let token = try JWT.signES256(claims: claims, keyID: keyID, key: key)
        let spread = max(0, policy.renewAfterMaximum - policy.renewAfterMinimum)
        state.token = token
        state.madeAt = Double(issuedAt)
        state.dueAt = Double(issuedAt) + policy.renewAfterMinimum + spread * min(max(jitter(), 0), 1)
        state.made += 1
        return token
    }
}

/// One `APNsProviderToken` per signing key (team ID, key ID), so every app and connection using
/// a key shares its token.
public final class APNsProviderTokens: Sendable {
    private let tokens = Mutex<[String: APNsProviderToken]>([:])
    private let policy: APNsTokenPolicy
    private let clock: @Sendable () -> Double

    public init(policy: APNsTokenPolicy = APNsTokenPolicy(), clock: @escaping @Sendable () -> Double) {
        self.policy = policy
        self.clock = clock
    }

    /// The token source of the key `keyID` of `teamID`; `makeKey` is called only the first time.
    public func source(teamID: String, keyID: String, makeKey: () throws(CryptoError) -> P256PrivateKey) throws(CryptoError) -> APNsProviderToken {
        let name = teamID + "/" + keyID
        if let known = tokens.withLock({ $0[name] }) { return known }
        let made = APNsProviderToken(teamID: teamID, keyID: keyID, key: try makeKey(), policy: policy, clock: clock)
        return tokens.withLock { tokens in
            if let known = tokens[name] { return known }
            tokens[name] = made
            return made
        }
    }
}
