import Lifecycle

// The worker process's long-running parts in the one `Service` shape, run by the `ServiceGroup`
// of `WorkerProcess.run()`. The store loop, the sender and the topic carrier share the process's
// stop flag: a stop asked of any of them is the process's (no new claims, the sender drains, the
// store records what comes back), as the store machine decides. The heartbeat (lease extensions)
// and the leader's maintenance are not services of their own: they are steps the store machine
// schedules on the store loop's connection, so they start and stop with it.

/// The store loop ended with PostgreSQL still unavailable and outcomes unrecorded.
struct StoreLoopExit: Error, CustomStringConvertible {
    var status: Int32
    var description: String { "PostgreSQL is still unavailable (exit status \(status))" }
}

extension StoreLoop: Service {
    var name: String { "store" }

    /// Returns once the machine exits: after a stop (the sender finished and its outcomes were
    /// recorded) or a drain; throws `StoreLoopExit` when it gave up on PostgreSQL.
    func run() throws {
        let status = runUntilExit()
        if status != 0 { throw StoreLoopExit(status: status) }
    }

    func beginShutdown() { stop.set() }
}

extension Sender: Service {
    var name: String { "sender" }

    /// Stops taking jobs: those not sent go back, those in flight get up to the shutdown timeout.
    func beginShutdown() {
        stop.set()
        inbox.signal()
    }
}

extension TopicSubscriptionCarrier: Service {
    var name: String { "topics" }

    /// The request in flight finishes; what it has not asked yet goes back unasked.
    func beginShutdown() { stop.set() }
}
