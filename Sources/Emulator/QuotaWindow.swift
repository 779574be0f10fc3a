/// How the emulator counts the project's quota (`--quota-window`, scenario `quota.window`).
///
/// FCM's throttling page says the quota is counted per minute, the minutes not aligned to the
/// clock, and that past it FCM answers 429 "until the quota is refilled in the following
/// minute". How it counts inside the minute is not published, so the emulator offers both
/// readings a sender must do well against (docs/fcm-limits.md):
public enum QuotaWindowModel: String, Sendable, Equatable, CaseIterable {
    /// As documented (the default): a window of 60 s that starts at the first counted request
    /// after the last window ended. Every counted request inside it counts; once it holds a
    /// minute's worth, everything is refused until it ends.
    case minute
    /// A token bucket of a minute's worth (or `burst`), refilled continuously at a sixtieth of
    /// the quota a second: after a burst, the stated rate goes through.
    case continuous
}

/// The documented reading of FCM's project quota: fixed windows of `length` that are not
/// aligned to the clock. A window begins at the first request counted after the previous one
/// ended (a refused request is not counted, so it begins none); inside it at most `limit`
/// requests are counted. Time is CLOCK_MONOTONIC nanoseconds, passed in.
public struct MinuteWindow: Sendable, Equatable {
    public let limit: Int
    public let length: UInt64
    /// When the current window began (nil: none yet, or the last one has ended).
    public private(set) var startedAt: UInt64?
    /// Requests counted in the current window.
    public private(set) var counted = 0

    /// `start`: a window already running at `now` with that many requests left in it (as for a
    /// project already spending its quota); nil: no window until the first counted request.
    public init(perMinute: Int, start: Int? = nil, lengthSeconds: Double = 60, now: UInt64) {
        limit = perMinute
        length = UInt64(lengthSeconds * 1e9)
        if let start {
            startedAt = now
            counted = max(0, perMinute - start)
        }
    }

    /// Counts one request; nil when counted, else the whole seconds until the window ends (>= 1).
    public mutating func take(now: UInt64) -> Int? {
        if let started = startedAt, now >= started &+ length { startedAt = nil }
        guard let started = startedAt else {
            startedAt = now
            counted = 1
            return nil
        }
        if counted < limit {
            counted += 1
            return nil
        }
        let left = Double(started &+ length - now) / 1e9
        return max(1, Int(left.rounded(.up)))
    }
}

/// One project's quota as the emulator counts it, in the model the scenario chose.
enum ProjectQuotaCounter: Sendable, Equatable {
    case window(MinuteWindow)
    case bucket(TokenBucket)

    /// `epoch`: when the emulator started (a minute window with a `start` runs from then);
    /// `now`: the project's first request (a bucket holds its `start` then, as it always did).
    init(_ quota: Scenario.Quota, epoch: UInt64, now: UInt64) {
        switch quota.window {
        case .minute: self = .window(MinuteWindow(perMinute: quota.perMinute, start: quota.start, now: epoch))
        case .continuous: self = .bucket(TokenBucket(perMinute: quota.perMinute, capacity: quota.burst, start: quota.start, now: now))
        }
    }

    /// Counts one request; nil when allowed, else the whole seconds until one is (>= 1).
    mutating func take(now: UInt64) -> Int? {
        switch self {
        case .window(var window):
            defer { self = .window(window) }
            return window.take(now: now)
        case .bucket(var bucket):
            defer { self = .bucket(bucket) }
            return bucket.take(now: now)
        }
    }
}
