import Postgres
import Queue

/// The leader's upkeep of the audience tables (migration 130): dedupe keys past their period.
enum AudienceUpkeep {
    struct Report: Sendable, Equatable {
        var dedupeKeysDeleted = 0
    }

    static func run(_ store: JobStore, batch: Int) throws(PostgresError) -> Report {
        var report = Report()
        report.dedupeKeysDeleted = try store.deleteExpiredDedupeKeys(batch: batch)
        return report
    }
}
