import Postgres
import Queue

/// The audience tables' retention (migration 130, docs/audience.md): dedupe keys past their
/// period, then delivery events past `eventsRetention`, a batch of each a run.
final class AudienceRetention: MaintenanceTask {
    let name = "audience retention"
    let interval: Double
    /// Deletes nothing a worker still needs: no grace.
    let waitsForGrace = false
    let batch: Int

    /// How long delivery events are kept (herald.events): a consumer away longer misses some.
    static let eventsRetention: Double = 7 * 86_400

    init(batch: Int = 5_000, interval: Double = 0) {
        self.batch = batch
        self.interval = interval
    }

    func runOnce(_ run: MaintenanceRun) throws(PostgresError) -> MaintenanceResult {
        let keys = try run.connection.query(MaintenanceSQL.deleteExpiredDedupeKeys, [.int(batch)]).affectedRows
        let events = try run.connection.query(MaintenanceSQL.deleteOldEvents, [.double(Self.eventsRetention), .int(batch)]).affectedRows
        return MaintenanceResult(counts: ["dedupe_keys_deleted": keys, "events_deleted": events])
    }
}
