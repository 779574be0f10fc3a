import Postgres
import Queue

/// Frequency-cap rows (herald.token_sends) that no longer hold a token back: every send in them
/// is older than the queue's cap period, or the queue has no cap any more. Each run looks at a
/// slice of the table's primary key after where the last one stopped, so the runs sweep it from
/// end to end however large it is.
final class TokenSendsSweep: MaintenanceTask {
    let name = "token_sends sweep"
    let interval: Double
    let waitsForGrace = false
    /// Rows looked at per run.
    let slice: Int
    /// The key of the last row the sweep looked at (nil: start from the first row).
    private(set) var position: (queue: String, token: String)?

    init(slice: Int = 50_000, interval: Double = 0) {
        self.slice = slice
        self.interval = interval
    }

    func runOnce(_ run: MaintenanceRun) throws(PostgresError) -> MaintenanceResult {
        MaintenanceResult(counts: ["token_sends_deleted": try sweep(run.connection)])
    }

    /// Deletes the spent rows of the next slice at `now` (nil: the database's clock) and moves
    /// the position on, back to the start once it has looked at the table's last row. Returns
    /// how many rows it deleted.
    func sweep(_ connection: PGConnection, now: Double? = nil) throws(PostgresError) -> Int {
        let row = try connection.query(MaintenanceSQL.deleteSpentTokenSends, [.int(slice), now.map { .double($0) },
                                                                               position.map { .text($0.queue) }, position.map { .text($0.token) }])
        if (row.int(0, 3) ?? 0) < slice {
            position = nil
        } else if let queue = row[0, 1], let token = row[0, 2] {
            position = (queue, token)
        }
        return row.int(0, 0) ?? 0
    }
}
