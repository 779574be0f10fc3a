import Foundation

/// Keeps the tests that measure time at FCM's side from sharing the machine with other tests'
/// pools. Every `herald` process a test starts holds a shared claim on the machine until it has
/// exited; a timing test takes it exclusively (`MachineLock.alone`), so it starts once the other
/// tests' processes are gone and new ones wait until it is done. Two cores shared with a dozen
/// other pools would otherwise measure the machine, not Herald.
///
/// A thread that already holds a claim never waits for another (a test starting its second pool
/// must not wait for a timing test that waits for its first), and no wait lasts long (a shared claim a
/// minute, the machine alone ten): at worst a measurement shares the machine, nothing hangs.
public enum MachineLock {
    private static let condition = NSCondition()
    nonisolated(unsafe) private static var sharers = 0
    nonisolated(unsafe) private static var exclusive = false
    nonisolated(unsafe) private static var waitingForExclusive = 0
    nonisolated(unsafe) private static var exclusiveThread: Thread? = nil
    /// Claims held, by the thread that took them.
    nonisolated(unsafe) private static var claimsByThread: [ObjectIdentifier: Int] = [:]

    /// Runs `body` with the machine to itself (no other test's `herald` process running).
    public static func alone<T>(_ body: () throws -> T) rethrows -> T {
        condition.lock()
        waitingForExclusive += 1
        // Ten minutes at most: a claim a test forgot to give back must not hang the run; then the
        // measurement shares the machine and says so.
        let deadline = Date().addingTimeInterval(600)
        while exclusive || sharers > 0 {
            if !condition.wait(until: deadline) {
                print("MachineLock: \(sharers) process claim(s) still held after 10 minutes; measuring beside them")
                break
            }
        }
        waitingForExclusive -= 1
        exclusive = true
        exclusiveThread = Thread.current
        condition.unlock()
        defer {
            condition.lock()
            exclusive = false
            exclusiveThread = nil
            condition.broadcast()
            condition.unlock()
        }
        return try body()
    }

    /// A shared claim for one process, taken by the calling thread; nil when that thread runs
    /// `alone` (it needs none).
    static func share() -> ObjectIdentifier? {
        condition.lock()
        defer { condition.unlock() }
        if exclusive, exclusiveThread === Thread.current { return nil }
        let me = ObjectIdentifier(Thread.current)
        if claimsByThread[me, default: 0] == 0 {
            let deadline = Date().addingTimeInterval(60)
            while (exclusive || waitingForExclusive > 0) && condition.wait(until: deadline) {}
        }
        sharers += 1
        claimsByThread[me, default: 0] += 1
        return me
    }

    static func release(_ holder: ObjectIdentifier) {
        condition.lock()
        sharers -= 1
        claimsByThread[holder, default: 1] -= 1
        if claimsByThread[holder] == 0 { claimsByThread[holder] = nil }
        condition.broadcast()
        condition.unlock()
    }
}
