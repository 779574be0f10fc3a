import Postgres
import Queue

/// The leader's upkeep of the audience tables (migration 130): the token registry's aging rule
/// (herald.age_tokens), dedupe keys past their period, delivery
/// events past their retention (7 days), and frequency-cap rows whose sends are all past the
/// cap's period (herald.token_sends).
enum AudienceUpkeep {
    struct Report: Sendable, Equatable {
        var dedupeKeysDeleted = 0
        var eventsDeleted = 0
        var tokenSendsDeleted = 0
        var tokensMarkedStale = 0
        var tokensPruned = 0
    }

    /// How long delivery events are kept (herald.events): a consumer away longer misses some.
    static let eventsRetention: Double = 7 * 86_400

    /// Rows of herald.token_sends looked at per pass: the pass reads that many entries of its
    /// primary key, however large the table, and the passes sweep it from end to end.
    static let tokenSendsSlice = 50_000

    static func run(_ store: JobStore, batch: Int, tokenSends sweep: inout TokenSendsSweep?) throws(PostgresError) -> Report {
        var report = Report()
        report.dedupeKeysDeleted = try store.deleteExpiredDedupeKeys(batch: batch)
        report.eventsDeleted = try store.deleteOldEvents(olderThan: eventsRetention, batch: batch)
        report.tokenSendsDeleted = try store.deleteSpentTokenSends(batch: tokenSendsSlice, from: &sweep)
        let aged = try store.ageTokens(batch: batch)
        report.tokensMarkedStale = aged.markedStale
        report.tokensPruned = aged.pruned
        return report
    }
}
