import FCM

/// When a failed job runs again.
///
/// The delay before retry number `attempt` (1 after the first failure) is
///
///     floor = max(min(cap, base * factor^(attempt - 1)), retryAfter, quota-floor)
///     delay = floor * (1 + jitter * random)
///
/// - `base` = 1 s, `factor` = 2, `cap` = 3600 s: 1 s, 2 s, 4 s, 8 s, ... up to an hour, the
///   exponential backoff FCM asks for (docs/fcm.md, Retry-After and backoff; docs/legacy.md 3,
///   Table 9 row 12 "Timeout").
/// - `retryAfter` is FCM's `Retry-After` (seconds): a job never returns sooner, even past `cap`,
///   though at most `maxRetryAfter` (1 day) so one odd header cannot park a job for years.
/// - quota-floor: a `QUOTA_EXCEEDED` answer without `Retry-After` waits at least
///   `quotaMinimum` = 60 s (Google asks for a one-minute initial delay on quota errors).
/// - `jitter` = 0.5: the random part only ever adds, up to half the floor again, so no job comes
///   back before its floor and many jobs that failed together spread over a window instead of
///   returning at once.
///
/// Quota answers (FCM's `QUOTA_EXCEEDED`) are snoozes, not attempts (see `quotaDelay`): up to
/// `snoozeCap` (20) of them per job do not count against its max_attempts.
public struct RetryPolicy: Sendable, Equatable {
    public var base: Double
    public var factor: Double
    public var cap: Double
    public var jitter: Double
    public var quotaMinimum: Double
    public var maxRetryAfter: Double
    /// Quota snoozes per job that do not use up an attempt; later ones count as attempts.
    public var snoozeCap = 20
    /// The longest a project pause lasts, whatever Retry-After says (see `projectPause`).
    public var maxProjectPause: Double = 3600

    public init(base: Double = 1, factor: Double = 2, cap: Double = 3600, jitter: Double = 0.5,
                quotaMinimum: Double = 60, maxRetryAfter: Double = 86_400) {
        self.base = base
        self.factor = factor
        self.cap = cap
        self.jitter = jitter
        self.quotaMinimum = quotaMinimum
        self.maxRetryAfter = maxRetryAfter
    }

    /// The floor before jitter: what the job must wait at least.
    public func floor(attempt: Int, retryAfter: Double?, quota: Bool) -> Double {
        // Multiply up to the cap rather than pow(): no Foundation, and a huge attempt count stops
        // as soon as the cap is reached.
        var exponential = base
        for _ in 0..<min(max(1, attempt) - 1, 4096) {
            if exponential >= cap { break }
            exponential *= factor
        }
        var floor = min(cap, exponential)
        if let retryAfter, retryAfter.isFinite {
            floor = max(floor, min(max(0, retryAfter), maxRetryAfter))
        } else if quota {
            floor = max(floor, quotaMinimum)
        }
        return floor
    }

    /// Seconds to wait before retry `attempt`; `random` is uniform in [0, 1).
    public func delay(attempt: Int, retryAfter: Double?, quota: Bool, random: Double) -> Double {
        let r = random.isFinite ? min(max(random, 0), 1) : 0
        return floor(attempt: attempt, retryAfter: retryAfter, quota: quota) * (1 + max(0, jitter) * r)
    }

    /// The wait after a quota answer about `limit`, the `streak`-th in a row for the same target
    /// (device or topic) or the project:
    /// - device: `base * factor^(streak - 1)` up to `cap`, at least `retryAfter`; no 1-minute floor;
    /// - topic: the same, at least `quotaMinimum` (a minute);
    /// - project (and an answer that does not say): at least `retryAfter`, else `quotaMinimum`.
    /// Then the jitter, which only adds, as in `delay`.
    public func quotaDelay(_ limit: QuotaLimit, streak: Int, retryAfter: Double?, random: Double) -> Double {
        var floor = floor(attempt: streak, retryAfter: retryAfter, quota: limit != .device)
        if limit == .topic { floor = max(floor, quotaMinimum) }
        let r = random.isFinite ? min(max(random, 0), 1) : 0
        return floor * (1 + max(0, jitter) * r)
    }

    /// How long the whole project holds back after its quota answer: Retry-After, else
    /// `quotaMinimum`, but at most `maxProjectPause` (an hour), so one odd header does not stop
    /// every send of the project for days; the jobs refused keep their own full Retry-After.
    public func projectPause(retryAfter: Double?) -> Double {
        min(floor(attempt: 1, retryAfter: retryAfter, quota: true), maxProjectPause)
    }

    /// `delay` with the random draw taken from `generator`.
    public func delay(attempt: Int, retryAfter: Double?, quota: Bool, using generator: inout some RandomNumberGenerator) -> Double {
        delay(attempt: attempt, retryAfter: retryAfter, quota: quota, random: Double.random(in: 0..<1, using: &generator))
    }
}

/// SplitMix64: a tiny, fast, seedable generator, so tests (and a reproducible `herald bench`)
/// get the same sequence for the same seed. Not for anything secret.
public struct SplitMix64: RandomNumberGenerator, Sendable {
    private var state: UInt64

    public init(seed: UInt64) { state = seed }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// A double uniform in [0, 1) from the top 53 bits.
    public mutating func nextUnit() -> Double {
        Double(next() >> 11) * 0x1.0p-53
    }
}
