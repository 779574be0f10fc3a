import Postgres

// Retention (run by the maintenance leader): finished jobs leave herald.jobs after --retention.
extension JobStore {
    /// Deletes up to `batch` finished jobs older than the retention period. Returns how many.
    @discardableResult
    public func deleteFinished(batch: Int = 10_000) throws(PostgresError) -> Int {
        try connection.query(SQL.deleteFinishedJobs, [.double(retention), .int(batch)]).affectedRows
    }
}
