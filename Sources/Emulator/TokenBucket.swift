/// A token bucket: `capacity` sends at most, refilled continuously at `perMinute / 60` a second.
/// The per-device and per-topic limits use one, and so does the project's quota in the
/// continuous model (`--quota-window continuous`, a bucket of a minute's size: a minute's worth at
/// once, then the stated rate); FCM's documented minute is `MinuteWindow` (docs/fcm-limits.md).
public struct TokenBucket: Sendable, Equatable {
    public let capacity: Double
    public let perSecond: Double
    public private(set) var tokens: Double
    private var last: UInt64

    /// `start`: what the bucket holds at first (nil: full; at most `capacity`).
    public init(perMinute: Int, capacity: Int? = nil, start: Int? = nil, now: UInt64) {
        self.perSecond = Double(perMinute) / 60
        self.capacity = Double(capacity ?? perMinute)
        self.tokens = min(self.capacity, start.map(Double.init) ?? self.capacity)
        self.last = now
    }

    /// A bucket of `capacity` sends refilled at `perSecond`, starting full.
    public init(perSecond: Double, capacity: Double, now: UInt64) {
        self.perSecond = perSecond
        self.capacity = capacity
        self.tokens = capacity
        self.last = now
    }

    /// Nil when a send is available now (nothing taken), else the whole seconds until one is (>= 1).
    public mutating func wait(now: UInt64) -> Int? {
        if now > last {
            tokens = min(capacity, tokens + Double(now - last) / 1e9 * perSecond)
            last = now
        }
        if tokens >= 1 { return nil }
        guard perSecond > 0 else { return 60 }
        return max(1, Int(((1 - tokens) / perSecond).rounded(.up)))
    }

    /// Takes one send that `wait(now:)` just said is available.
    public mutating func takeOne() { tokens -= 1 }

    /// Takes one send; nil when granted, else the whole seconds until one is available (>= 1).
    public mutating func take(now: UInt64) -> Int? {
        if now > last {
            tokens = min(capacity, tokens + Double(now - last) / 1e9 * perSecond)
            last = now
        }
        if tokens >= 1 {
            tokens -= 1
            return nil
        }
        guard perSecond > 0 else { return 60 }
        let wait = (1 - tokens) / perSecond
        return max(1, Int(wait.rounded(.up)))
    }
}
