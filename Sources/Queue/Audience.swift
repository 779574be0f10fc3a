import Postgres

/// The token registry's counts (herald.device_tokens, herald.pruned_tokens), for /metrics.
public struct TokenCounts: Sendable, Equatable {
    public var fresh = 0
    public var stale = 0
    /// Pruned tokens by why: "unregistered" (FCM said so) or "idle" (the aging rule).
    public var prunedUnregistered = 0
    public var prunedIdle = 0

    public init(fresh: Int = 0, stale: Int = 0, prunedUnregistered: Int = 0, prunedIdle: Int = 0) {
        self.fresh = fresh
        self.stale = stale
        self.prunedUnregistered = prunedUnregistered
        self.prunedIdle = prunedIdle
    }

    public static func read(_ connection: PGConnection) throws(PostgresError) -> TokenCounts {
        let row = try connection.query(SQL.tokenCounts)
        return TokenCounts(fresh: row.int(0, 0) ?? 0, stale: row.int(0, 1) ?? 0,
                           prunedUnregistered: row.int(0, 2) ?? 0, prunedIdle: row.int(0, 3) ?? 0)
    }
}
