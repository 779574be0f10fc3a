import Postgres

/// The upkeep of issue 23's tables (idempotency by period, delivery events), run by the
/// maintenance leader beside the retention of finished jobs.
extension JobStore {
    /// Deletes up to `batch` dedupe keys whose period is over; returns how many.
    public func deleteExpiredDedupeKeys(batch: Int = 10_000) throws(PostgresError) -> Int {
        try connection.query(SQL.deleteExpiredDedupeKeys, [.int(batch)]).affectedRows
    }

    /// Deletes up to `batch` delivery events older than `olderThan` seconds; returns how many.
    public func deleteOldEvents(olderThan: Double, batch: Int = 10_000) throws(PostgresError) -> Int {
        try connection.query(SQL.deleteOldEvents, [.double(olderThan), .int(batch)]).affectedRows
    }
}
