import Postgres

// Campaign finishing (run by the maintenance leader).
extension JobStore {
    /// Marks finished the running campaigns with nothing left to send. Returns how many.
    @discardableResult
    public func finishCampaigns() throws(PostgresError) -> Int {
        try connection.query(SQL.finishCampaigns).affectedRows
    }
}
