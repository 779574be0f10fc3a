import Postgres
import Queue

/// The token registry's aging rule (herald.age_tokens, docs/audience.md): tokens idle past the
/// limits are marked stale, then pruned.
final class TokenAging: MaintenanceTask {
    let name = "token aging"
    let interval: Double
    let waitsForGrace = false
    let batch: Int

    init(batch: Int = 5_000, interval: Double = 0) {
        self.batch = batch
        self.interval = interval
    }

    func runOnce(_ run: MaintenanceRun) throws(PostgresError) -> MaintenanceResult {
        let aged = try age(run.connection)
        return MaintenanceResult(counts: ["tokens_marked_stale": aged.markedStale, "tokens_pruned": aged.pruned])
    }

    /// Runs the rule at `now` (nil: the database's clock): how many tokens it marked stale and pruned.
    func age(_ connection: PGConnection, now: Double? = nil) throws(PostgresError) -> (markedStale: Int, pruned: Int) {
        let row = try connection.query(MaintenanceSQL.ageTokens, [now.map { .double($0) }, .int(batch)])
        return (row.int(0, 0) ?? 0, row.int(0, 1) ?? 0)
    }
}
