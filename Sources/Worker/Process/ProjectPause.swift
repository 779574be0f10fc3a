/// A hold on every send of the project: until when, why, and how long it was when set. One
/// value type for every place that holds it: the sender's machine (which sets it), the store
/// thread's machine (which stops claiming meanwhile and publishes it), and, through them,
/// herald.project_pauses (which holds back every other pool). Time is passed in.
///
/// Two things set a pause: FCM's `Retry-After` on a project quota answer (FCM said when to come
/// back) and the outage circuit (FCM does not answer at all). A project quota answer without
/// Retry-After, the shape FCM answers in production, sets none: the rate drops instead
/// (docs/fcm-limits.md).
struct ProjectPause: Sendable, Equatable {
    /// Seconds since 1970 before which nothing new is sent (0: never paused).
    private(set) var until = 0.0
    /// The part of `until` a quota answer's Retry-After asked for, which a closing circuit keeps.
    private(set) var byQuota = 0.0
    /// How long the current (or last) pause was when it was set.
    private(set) var length = 0.0
    /// Why the latest extension was asked for (herald.project_pauses.reason).
    private(set) var reason = "QUOTA_EXCEEDED"

    func isPaused(at now: Double) -> Bool { until > now }

    /// Extends the pause to `until`; false (and nothing changes) when it already reaches that far.
    @discardableResult
    mutating func extend(to until: Double, reason: String, byQuota quota: Bool, now: Double) -> Bool {
        if quota { byQuota = max(byQuota, until) }
        guard until > self.until else { return false }
        length = until - now
        self.until = until
        self.reason = reason
        return true
    }

    /// FCM answers again (the circuit closed): what the outage added ends now; a quota answer's
    /// Retry-After still holds.
    mutating func outageEnded(now: Double) {
        until = min(until, max(byQuota, now))
    }

    /// How long a job put back during the pause waits: to the pause's end, then spread over the
    /// jitter window after it (half the pause, at least a second), not all at its end.
    func releaseDelay(now: Double, jitter: Double, random: Double) -> Double {
        let spread = max(1, length * jitter) * min(max(random, 0), 1)
        return max(0, until - now) + spread
    }
}
