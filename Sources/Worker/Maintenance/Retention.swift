import Postgres
import Queue

/// Finished jobs leave herald.jobs once older than `--retention`: up to `statements` deletes of
/// `batch` rows a run, each only while the lease is still surely held, until one deletes fewer
/// than a batch.
final class Retention: MaintenanceTask {
    let name = "retention"
    let interval: Double
    let waitsForGrace = true
    /// Seconds a finished job is kept (`--retention`).
    let retention: Double
    let batch: Int
    let statements: Int

    init(retention: Double, batch: Int = 5_000, statements: Int = 10, interval: Double = 0) {
        self.retention = retention
        self.batch = batch
        self.statements = statements
        self.interval = interval
    }

    func runOnce(_ run: MaintenanceRun) throws(PostgresError) -> MaintenanceResult {
        var purged = 0
        for _ in 0..<statements {
            guard run.stillLeads() else { break }
            let deleted = try run.connection.query(MaintenanceSQL.deleteFinishedJobs, [.double(retention), .int(batch)]).affectedRows
            purged += deleted
            if deleted < batch { break }
        }
        return MaintenanceResult(counts: ["purged": purged],
                                 note: purged > 0 ? .init(level: .debug, text: "purged \(purged) finished jobs past retention") : nil)
    }
}
