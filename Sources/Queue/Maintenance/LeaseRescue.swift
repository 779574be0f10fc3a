import Postgres

// Lease rescue (run by the maintenance leader): jobs whose worker died go back to the queue.
extension JobStore {
    /// Takes back jobs whose lease ran out (their worker died): they become available again and
    /// are sent again. Returns how many.
    @discardableResult
    public func rescueExpiredLeases() throws(PostgresError) -> Int {
        try connection.query(SQL.rescueExpiredLeases).affectedRows
    }
}
