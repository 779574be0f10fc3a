/// One application server's VAPID headers, one per push service origin, each reused until
/// near its end: a push costs a dictionary look-up, not an ECDSA signature. A value type;
/// the caller passes the time (seconds since 1970), so tests drive the clock.
///
/// Defaults: a token lives 12 hours (half of the 24 hours services allow, so a sender's clock
/// ahead of a service's by hours still passes) and is replaced once less than an hour of it is
/// left, so a request never carries a token about to expire on the way.
public struct VAPIDTokenCache: Sendable {
    public let key: VAPIDKey
    public let subject: String
    /// Seconds from a token's making to its `exp`. Default 12 hours; at most 24.
    public let lifetime: Int64
    /// A token with less than this left is replaced. Default 1 hour.
    public let renewBefore: Int64
    /// Origins kept at most; past it, expired entries go, then the one expiring first. Default 1,000
    /// (endpoints come from browsers, so their origins are not bounded by Herald).
    public let maximumOrigins: Int

    private struct Entry: Sendable {
        var authorization: String
        var expiresAt: Int64
    }

    private var entries: [String: Entry] = [:]
    /// Tokens signed so far (for tests and the benchmark).
    public private(set) var tokensMade = 0

    /// The subject is checked here (`VAPIDSubject`), so a cache never signs a token Apple refuses.
    public init(key: VAPIDKey, subject: String, lifetime: Int64 = 12 * 3600, renewBefore: Int64 = 3600,
                maximumOrigins: Int = 1000) throws(WebPushError) {
        try VAPIDSubject.check(subject)
        guard lifetime > 0, lifetime <= VAPID.maximumLifetimeSeconds else {
            throw WebPushError(field: "lifetime", "must be 1 to 86400 seconds (push services refuse an exp more than 24 hours ahead), not \(lifetime)")
        }
        guard renewBefore >= 0, renewBefore < lifetime else {
            throw WebPushError(field: "renewBefore", "must be at least 0 and less than the lifetime (\(lifetime) s), not \(renewBefore)")
        }
        self.key = key
        self.subject = subject
        self.lifetime = lifetime
        self.renewBefore = renewBefore
        self.maximumOrigins = max(1, maximumOrigins)
    }

    /// The `Authorization` value for a push to `origin` (an endpoint's origin) at `now`.
    public mutating func authorization(origin: String, now: Int64) throws(WebPushError) -> String {
        if let entry = entries[origin], entry.expiresAt - now > renewBefore { return entry.authorization }
        let expiresAt = now + lifetime
        let authorization = try VAPID.authorization(audience: origin, subject: subject, expiresAt: expiresAt, key: key)
        if entries[origin] == nil && entries.count >= maximumOrigins { makeRoom(now: now) }
        entries[origin] = Entry(authorization: authorization, expiresAt: expiresAt)
        tokensMade += 1
        return authorization
    }

    /// Origins held now.
    public var origins: Int { entries.count }

    private mutating func makeRoom(now: Int64) {
        entries = entries.filter { $0.value.expiresAt - now > renewBefore }
        if entries.count >= maximumOrigins, let first = entries.min(by: { $0.value.expiresAt < $1.value.expiresAt }) {
            entries[first.key] = nil
        }
    }
}
