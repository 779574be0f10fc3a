import Foundation

/// The signals that end a process gracefully (SIGTERM and SIGINT), taken in one place.
///
/// They are blocked in every thread, so none of them kills the process or interrupts a system
/// call, and one thread of their own waits for them (`sigwait`) and says what came. Blocking
/// must come first thing in `main`, before any other thread starts: threads inherit the mask,
/// and a signal that arrives during start-up then waits for the handler instead of killing the
/// process. A process whose own loop waits for them together with other signals (the pool's
/// supervisor, with SIGCHLD) takes `set` and `name(_:)` from here and waits itself.
public struct ShutdownSignals: Sendable {
    public let signals: [Int32]

    /// SIGTERM (what a service manager or `kill` sends) and SIGINT (Ctrl-C).
    public static let termination = ShutdownSignals([SIGTERM, SIGINT])

    public init(_ signals: [Int32]) {
        self.signals = signals
    }

    /// The signals as a `sigset_t`, with `adding` besides.
    public func set(adding extra: [Int32] = []) -> sigset_t {
        var set = sigset_t()
        sigemptyset(&set)
        for signal in signals + extra { sigaddset(&set, signal) }
        return set
    }

    /// Blocks the signals (and `adding`) in the calling thread and every thread it starts later.
    public func block(adding extra: [Int32] = []) {
        var set = set(adding: extra)
        pthread_sigmask(SIG_BLOCK, &set, nil)
    }

    /// Blocks the signals, and starts the thread that waits for them: `received` is called on
    /// it for every one that arrives (a second SIGTERM too), so a caller decides whether a
    /// repeat means anything.
    public func handle(_ received: @escaping @Sendable (Int32) -> Void) {
        block()
        let waitSet = set()
        let thread = Thread {
            var set = waitSet
            var signal: Int32 = 0
            while sigwait(&set, &signal) == 0 { received(signal) }
        }
        thread.name = "herald-signals"
        thread.start()
    }

    /// `SIGTERM`, `SIGINT`, or `signal N` for another, for logs.
    public static func name(_ signal: Int32) -> String {
        switch signal {
        case SIGTERM: "SIGTERM"
        case SIGINT: "SIGINT"
        case SIGCHLD: "SIGCHLD"
        default: "signal \(signal)"
        }
    }
}
