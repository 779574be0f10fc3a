import Foundation

/// Runs services, each on a thread of its own, and stops them together.
///
/// `run()` starts the services in the order given and blocks until the group is asked to shut
/// down: by `beginShutdown()` (a signal handler calls it), by a service whose `run()` throws, or
/// by one whose `run()` returns and is marked `.shutdownGroup`. It then asks each service still
/// running to stop, in reverse order (the last started first), waiting for each to return before
/// asking the next, so a service never loses one it depends on while it drains. The whole
/// shutdown is bounded by `maximumShutdownDuration`: past it the group stops waiting and reports
/// the services still running (threads cannot be cancelled; the caller decides, usually by
/// exiting the process).
///
/// Given `gracefulShutdownSignals`, the group ends on them: `start()` (and so `run()`) starts
/// the thread that waits for them, and the first one begins the shutdown (a later one changes
/// nothing: the shutdown is already bounded). The caller blocks them first thing in `main`
/// (`ShutdownSignals.block()`), before any thread starts.
///
/// `start()` alone starts the services and returns, for a caller whose own thread has work of
/// its own (the pool's supervisor: the children it spawns belong to the thread that spawned
/// them); `run()` then waits and stops them.
public final class ServiceGroup: @unchecked Sendable {
    /// What a service's return means to the group. A failure (a throw) always shuts it down.
    public enum Termination: Sendable {
        /// Its work is the group's: once it returns, the others are stopped (the store loop).
        case shutdownGroup
        /// The others go on without it (a vacuum this role may not run).
        case ignore
    }

    public struct Member: Sendable {
        public var service: any Service
        public var whenReturns: Termination
        /// The thread's stack size in bytes; nil: Foundation's default.
        public var stackSize: Int?

        public init(_ service: any Service, whenReturns: Termination = .shutdownGroup, stackSize: Int? = nil) {
            self.service = service
            self.whenReturns = whenReturns
            self.stackSize = stackSize
        }
    }

    /// The first error a service threw, and which service threw it.
    public struct Failure: Error, CustomStringConvertible {
        public var service: String
        public var error: any Error
        public var description: String { "\(service): \(error)" }
    }

    /// How the group ended.
    public struct Report {
        /// The first service to throw (later failures are consequences, usually).
        public var failure: Failure?
        /// Services whose `run()` had not returned when the maximum shutdown duration ran out, in
        /// the order they were started.
        public var stillRunning: [String]
    }

    public let members: [Member]
    public let maximumShutdownDuration: Double
    /// The signals that end the group gracefully; nil: none (the caller handles signals).
    public let gracefulShutdownSignals: ShutdownSignals?
    /// Hears one line when the shutdown starts and one per service that does not stop in time.
    let log: @Sendable (String) -> Void
    let signalReceived: @Sendable (String) -> Void

    private let condition = NSCondition()
    private var shutdownRequested = false
    private var shutdownReason = ""
    private var returned: [Bool]
    private var failure: Failure?
    private var started = false

    /// `signalReceived` hears the name of each graceful shutdown signal as it arrives (for the
    /// caller's log at its own level).
    public init(_ members: [Member], maximumShutdownDuration: Double, gracefulShutdownSignals: ShutdownSignals? = nil,
                signalReceived: @escaping @Sendable (String) -> Void = { _ in },
                log: @escaping @Sendable (String) -> Void = { _ in }) {
        self.members = members
        self.maximumShutdownDuration = maximumShutdownDuration
        self.gracefulShutdownSignals = gracefulShutdownSignals
        self.signalReceived = signalReceived
        self.log = log
        returned = Array(repeating: false, count: members.count)
    }

    /// Starts every service (unless `start()` did), waits for the shutdown, stops them in reverse
    /// order; see the type's comment. Call once.
    public func run() -> Report {
        start()
        condition.lock()
        while !shutdownRequested { condition.wait() }
        let reason = shutdownReason
        condition.unlock()
        return stop(reason: reason)
    }

    /// Starts every service, each on a thread of its own, in order, and returns. Once only;
    /// later calls do nothing.
    public func start() {
        condition.lock()
        let first = !started
        started = true
        condition.unlock()
        guard first else { return }
        gracefulShutdownSignals?.handle { [self] signal in
            signalReceived(ShutdownSignals.name(signal))
            beginShutdown(reason: "received \(ShutdownSignals.name(signal))")
        }
        for index in members.indices {
            let member = members[index]
            let thread = Thread { [self] in
                var thrown: (any Error)? = nil
                do { try member.service.run() } catch { thrown = error }
                finished(index, error: thrown)
            }
            thread.name = "herald-\(member.service.name)"
            if let stackSize = member.stackSize { thread.stackSize = stackSize }
            thread.start()
        }
    }

    private func stop(reason: String) -> Report {
        log("stopping \(members.count) services (\(reason)), at most \(Self.seconds(maximumShutdownDuration)) s")

        let deadline = Date(timeIntervalSinceNow: maximumShutdownDuration)
        for index in members.indices.reversed() {
            condition.lock()
            let done = returned[index]
            condition.unlock()
            if done { continue }
            members[index].service.beginShutdown()
            condition.lock()
            while !returned[index] && condition.wait(until: deadline) {}
            condition.unlock()
        }
        condition.lock()
        defer { condition.unlock() }
        let stillRunning = members.indices.filter { !returned[$0] }.map { members[$0].service.name }
        if !stillRunning.isEmpty {
            log("still running after \(Self.seconds(maximumShutdownDuration)) s: \(stillRunning.joined(separator: ", "))")
        }
        return Report(failure: failure, stillRunning: stillRunning)
    }

    /// Asks the group to stop its services (gracefully, in reverse order, bounded). Returns at
    /// once; safe from any thread, more than once, and before `run()`.
    public func beginShutdown() {
        beginShutdown(reason: "shutdown requested")
    }

    private func beginShutdown(reason: String) {
        condition.lock()
        if !shutdownRequested {
            shutdownRequested = true
            shutdownReason = reason
        }
        condition.broadcast()
        condition.unlock()
    }

    private func finished(_ index: Int, error: (any Error)?) {
        let member = members[index]
        condition.lock()
        returned[index] = true
        if let error, failure == nil { failure = Failure(service: member.service.name, error: error) }
        if !shutdownRequested && (error != nil || member.whenReturns == .shutdownGroup) {
            shutdownRequested = true
            shutdownReason = error == nil ? "\(member.service.name) finished" : "\(member.service.name) failed"
        }
        condition.broadcast()
        condition.unlock()
    }

    private static func seconds(_ value: Double) -> String {
        value == value.rounded() ? String(Int(value)) : String(format: "%.1f", value)
    }
}
