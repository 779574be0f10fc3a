/// A long-running part of a process (the store loop, the sender, the vacuum, a server): one
/// shape for all of them, so one `ServiceGroup` starts them, stops them and says which failed.
///
/// Herald runs its parts on threads of their own, not tasks: their hot paths wait in blocking
/// calls (libpq, libcurl's multi handle, epoll), so `run()` blocks its thread until the service
/// has stopped.
///
/// - `run()` does the work until the service is asked to stop or has nothing left to do, and
///   returns then; it throws when the service cannot go on. An `init` starts nothing.
/// - `beginShutdown()` asks for a graceful stop: take nothing new, finish what is in hand, then
///   return from `run()`. It returns at once (it does not wait), may be called from any thread,
///   more than once, and before `run()` has started (`run()` then returns promptly).
///
/// A service may also have a throwing preparation step (binding its port, checking the
/// database) that its owner calls before starting the group, so a bad setting stops start-up
/// with an error that names it; `run()` does that step itself when it was not done.
public protocol Service: AnyObject, Sendable {
    /// A short name for logs, thread names and the group's report (`store`, `sender`, `vacuum`).
    var name: String { get }
    func run() throws
    func beginShutdown()
}
