/// The named statements of the leaders' upkeep (files of Sources/Queue/SQL), for the maintenance
/// tasks of Sources/Worker/Maintenance, which run them on the leader's connection. `SQL` stays
/// Queue's own; these are the ones the tasks may run.
public enum MaintenanceSQL {
    /// Leadership: a row of herald.leaders taken or renewed ($1 role, $2 worker id, $3 seconds),
    /// and given up ($1 role, $2 worker id).
    public static let takeLeadership = SQL.takeLeadership
    public static let resignLeadership = SQL.resignLeadership
    /// Jobs whose lease ran out go back to the queue.
    public static let rescueExpiredLeases = SQL.rescueExpiredLeases
    /// Running campaigns with nothing left to send are marked finished.
    public static let finishCampaigns = SQL.finishCampaigns
    /// Finished jobs older than $1 seconds, $2 at most.
    public static let deleteFinishedJobs = SQL.deleteFinishedJobs
    /// Dedupe keys whose period is over, $1 at most.
    public static let deleteExpiredDedupeKeys = SQL.deleteExpiredDedupeKeys
    /// Delivery events older than $1 seconds, $2 at most.
    public static let deleteOldEvents = SQL.deleteOldEvents
    /// A slice of herald.token_sends ($1 rows after the key $3, $4; $2 the time, NULL the database's).
    public static let deleteSpentTokenSends = SQL.deleteSpentTokenSends
    /// The token registry's aging rule ($1 the time, NULL the database's; $2 batch).
    public static let ageTokens = SQL.ageTokenBatch
    /// herald.jobs' live and dead row versions, and whether this role may VACUUM it.
    public static let jobsRowCounts = SQL.jobsRowCounts
    public static let vacuumJobs = SQL.vacuumJobs
}
