import Postgres

/// The upkeep of the audience tables of migration 130 (dedupe keys, delivery events, the token
/// registry; docs/audience.md), run by the maintenance leader beside the retention of finished jobs.
extension JobStore {
    /// Deletes up to `batch` dedupe keys whose period is over; returns how many.
    public func deleteExpiredDedupeKeys(batch: Int = 10_000) throws(PostgresError) -> Int {
        try connection.query(SQL.deleteExpiredDedupeKeys, [.int(batch)]).affectedRows
    }

    /// Deletes up to `batch` delivery events older than `olderThan` seconds; returns how many.
    public func deleteOldEvents(olderThan: Double, batch: Int = 10_000) throws(PostgresError) -> Int {
        try connection.query(SQL.deleteOldEvents, [.double(olderThan), .int(batch)]).affectedRows
    }

    /// Looks at up to `batch` rows of herald.token_sends after `position` (nil: from the first
    /// row) and deletes those that no longer hold a token back: every send in them is older than
    /// the queue's cap period at `now` (nil: the database's clock), or the queue has no cap any
    /// more. Moves `position` to the last row it looked at, or back to nil once it has looked at
    /// the table's last row, so calls that carry `position` on sweep the whole table, a bounded
    /// slice each. Returns how many rows it deleted.
    public func deleteSpentTokenSends(now: Double? = nil, batch: Int = 10_000,
                                      from position: inout TokenSendsSweep?) throws(PostgresError) -> Int {
        let row = try connection.query(SQL.deleteSpentTokenSends, [.int(batch), now.map { .double($0) },
                                                                   position.map { .text($0.queue) }, position.map { .text($0.token) }])
        if (row.int(0, 3) ?? 0) < batch {
            position = nil
        } else if let queue = row[0, 1], let token = row[0, 2] {
            position = TokenSendsSweep(queue: queue, token: token)
        }
        return row.int(0, 0) ?? 0
    }

    /// One such slice from the table's first row.
    public func deleteSpentTokenSends(now: Double? = nil, batch: Int = 10_000) throws(PostgresError) -> Int {
        var position: TokenSendsSweep?
        return try deleteSpentTokenSends(now: now, batch: batch, from: &position)
    }

    /// Runs the token registry's aging rule (herald.age_tokens) at `now` (nil: the database's
    /// clock): how many tokens it marked stale and pruned.
    public func ageTokens(now: Double? = nil, batch: Int = 10_000) throws(PostgresError) -> (markedStale: Int, pruned: Int) {
        let row = try connection.query(SQL.ageTokenBatch, [now.map { .double($0) }, .int(batch)])
        return (row.int(0, 0) ?? 0, row.int(0, 1) ?? 0)
    }
}

/// Where a sweep of herald.token_sends has got to: the key of the last row it looked at.
public struct TokenSendsSweep: Sendable, Equatable {
    public var queue: String
    public var token: String
}

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
