import Postgres

// The maintenance leader: the one process that rescues leases, applies retention and finishes
// campaigns holds this advisory lock for as long as its connection lives.
extension JobStore {
    /// pg_try_advisory_lock key of the maintenance leader: "heraldm" in ASCII.
    public static let maintenanceLockKey = 0x68_6572_616c_646d

    /// Tries to become the maintenance leader (lease rescue, retention) for as long as this
    /// connection lives; true when this connection holds the lock.
    public func tryMaintenanceLock() throws(PostgresError) -> Bool {
        let result = try connection.query(SQL.tryMaintenanceLock, [.int(Self.maintenanceLockKey)])
        return result.bool(0, try result.column("leader")) ?? false
    }
}
