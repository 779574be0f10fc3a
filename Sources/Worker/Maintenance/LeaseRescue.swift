import Postgres
import Queue

/// Jobs whose lease ran out (their worker died) go back to the queue and are sent again.
final class LeaseRescue: MaintenanceTask {
    let name = "lease rescue"
    let interval: Double
    /// A new leader waits one lease: workers that are reconnecting record first.
    let waitsForGrace = true

    init(interval: Double = 0) { self.interval = interval }

    func runOnce(_ run: MaintenanceRun) throws(PostgresError) -> MaintenanceResult {
        let rescued = try run.connection.query(MaintenanceSQL.rescueExpiredLeases).affectedRows
        return MaintenanceResult(counts: ["rescued": rescued],
                                 note: rescued > 0 ? .init(level: .info, text: "took back \(rescued) jobs whose lease ran out (their worker stopped)") : nil)
    }
}
