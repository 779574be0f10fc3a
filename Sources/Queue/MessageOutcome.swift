/// What became of a claimed job, in the one word every layer uses for it: the `outcome` label of
/// `herald_messages_total`, the `a` of a row of record_outcomes.sql (`OutcomeAction.outcome`)
/// and the `outcome` field of the worker's log lines.
public enum MessageOutcome: String, CaseIterable, Sendable {
    /// Delivered (or, for a dry run, validated): the job is `completed`.
    case completed
    /// To be sent again later; the attempt counted.
    case retried
    /// Moved to herald.dead_letters.
    case dead
    /// `discarded` without a request (e.g. its token was pruned earlier).
    case discarded
    /// FCM said the token is gone: herald.prune_token ran, the job is `discarded`.
    case pruned
    /// Put back unsent, the attempt not counted.
    case released
    /// Put back after a quota answer (a device's, a topic's or the project's limit), the first
    /// ones without counting an attempt.
    case snoozed
}
