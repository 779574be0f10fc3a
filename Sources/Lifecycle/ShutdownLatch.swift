import Foundation

/// A one-way switch for a service's `beginShutdown()`: set once, from any thread; `run()` waits
/// on it (a server whose work happens on its own event-loop threads) or looks at it between
/// steps.
public final class ShutdownLatch: @unchecked Sendable {
    private let condition = NSCondition()
    private var set = false

    public init() {}

    public func signal() {
        condition.lock()
        set = true
        condition.broadcast()
        condition.unlock()
    }

    public var isSignalled: Bool {
        condition.lock()
        defer { condition.unlock() }
        return set
    }

    /// Blocks until `signal()` (returns at once if it came before).
    public func wait() {
        condition.lock()
        while !set { condition.wait() }
        condition.unlock()
    }

    /// Blocks until `signal()` or `deadline`, whichever comes first; true when signalled.
    public func wait(until deadline: Date) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        while !set {
            if !condition.wait(until: deadline) { return set }
        }
        return true
    }
}
