import Postgres

// Leadership: the one process of all the pools that does a piece of upkeep holds a lease row of
// herald.leaders (migration 100) and renews it; a process cut off from PostgreSQL cannot renew,
// so its lease runs out and another takes the role (River's leader table). A session-level lock
// would stay held on the server for as long as the dead session looked alive.
extension JobStore {
    /// The roles one process of all the pools holds at a time (rows of herald.leaders).
    public enum Role: String, Sendable {
        /// Rescue of expired leases, campaigns' end, retention.
        case maintenance
        /// VACUUM of herald.jobs.
        case vacuum
    }

    /// Takes `role` for this process (`workerID`), or renews it, for `seconds` by the database's
    /// clock. True when this process holds it now; false while another's lease runs.
    public func takeLeadership(_ role: Role, seconds: Double) throws(PostgresError) -> Bool {
        try connection.query(SQL.takeLeadership, [.text(role.rawValue), .text(workerID), .double(seconds)]).rowCount == 1
    }

    /// Gives `role` up if this process holds it (on a clean stop).
    public func resignLeadership(_ role: Role) throws(PostgresError) {
        try connection.query(SQL.resignLeadership, [.text(role.rawValue), .text(workerID)])
    }
}
