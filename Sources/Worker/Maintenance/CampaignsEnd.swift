import Postgres
import Queue

/// Running campaigns with nothing left to send are marked finished.
final class CampaignsEnd: MaintenanceTask {
    let name = "campaigns' end"
    let interval: Double
    /// Runs with the lease rescue: a campaign whose jobs a dead worker held is not over.
    let waitsForGrace = true

    init(interval: Double = 0) { self.interval = interval }

    func runOnce(_ run: MaintenanceRun) throws(PostgresError) -> MaintenanceResult {
        MaintenanceResult(counts: ["finished_campaigns": try run.connection.query(MaintenanceSQL.finishCampaigns).affectedRows])
    }
}
