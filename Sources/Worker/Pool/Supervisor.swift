import CEpoll
import Foundation
import Lifecycle
import Metrics

/// `herald work --processes N`: starts N worker processes (this same binary, with
/// HERALD_WORKER_CHILD=1) for each group (the jobs of no project, and each registry project the
/// pool works), restarts one that crashes (with backoff: 1 s, 2 s, 4 s ... 30 s), passes
/// SIGTERM/SIGINT on, and exits once they have all stopped. With a `PoolMonitor`, each worker
/// slot has a shared-memory region for its counters, handed to every process of the slot as file
/// descriptor 3 (HERALD_METRICS_FD).
public final class Supervisor {
    /// Worker processes that share their arguments: `arguments` are added to the pool's.
    public struct Group: Sendable {
        /// For logs: "project shop", or nil for the jobs of no project.
        public var label: String?
        /// The registry project its workers send for (nil: the jobs of no project).
        public var project: String?
        public var arguments: [String]
        /// A worker of the group refusing its settings (status 78) stops the whole pool (true),
        /// or only its group, which is started again `retryAfterRefusal` seconds later: a
        /// registry project whose key is missing or refused, while the others go on.
        public var refusalStopsPool: Bool
        public init(label: String? = nil, project: String? = nil, arguments: [String] = [], refusalStopsPool: Bool = true) {
            self.label = label
            self.project = project
            self.arguments = arguments
            self.refusalStopsPool = refusalStopsPool
        }
    }

    public struct Report: Sendable {
        /// Exit status: 0 when every worker stopped cleanly.
        public var status: Int32
        /// The largest peak resident set of any worker process, in bytes (from wait4).
        public var peakRSSBytes: Int
        public var restarts: Int
        /// User plus system CPU seconds of every worker process that exited (from wait4), so
        /// a run's CPU per message can be measured from outside the workers.
        public var workerCPUSeconds: Double
    }

    /// The exit status of a worker whose settings are wrong (EX_CONFIG): not restarted.
    public static let configurationErrorStatus = 78

    let processes: Int
    private(set) var groups: [Group]
    /// How long a group whose worker refused its settings waits before it is started again.
    public var retryAfterRefusal = 30.0
    /// The registry's project names now (nil: could not be read, nothing changes). Set, a pool
    /// started without --project asks it every `registryPollInterval` seconds and starts the
    /// workers of a project added to the registry (with `groupForProject`), and stops those of
    /// one removed, without a restart. Not under --drain.
    public var registryPoll: (() -> [String]?)?
    public var groupForProject: ((String) -> Group)?
    public var registryPollInterval = 10.0
    /// Groups whose project left the registry: their workers are stopped and not restarted.
    private var retiredGroups: Set<Int> = []
    let arguments: [String]
    let environment: [String: String]
    let drain: Bool
    let log: Logger
    /// After SIGTERM, how long workers may take before they are killed.
    let stopGrace: Double
    let monitor: PoolMonitor?
    private var children: [pid_t: Int] = [:]
    private var startedAt: [Int: Double] = [:]

    /// `arguments` are passed to every worker (argv[1...]), then its group's; `environment` is
    /// added to ours. `processes` workers a group.
    public init(processes: Int, arguments: [String], environment: [String: String], drain: Bool, log: Logger,
                stopGrace: Double = 45, monitor: PoolMonitor? = nil, groups: [Group] = [Group()]) {
        precondition(!groups.isEmpty, "at least one group")
        precondition(monitor == nil || monitor!.regions.count == max(1, processes) * groups.count, "one metrics region per worker process")
        self.stopGrace = stopGrace
        self.monitor = monitor
        self.groups = groups
        self.processes = max(1, processes)
        self.arguments = arguments
        self.environment = environment
        self.drain = drain
        self.log = log
    }

    /// Blocks the graceful shutdown signals (SIGTERM, SIGINT) and SIGCHLD in the calling thread
    /// and every thread it starts later; call before starting any other thread. The supervisor
    /// takes them with sigtimedwait in its own loop, which also reaps the workers on SIGCHLD.
    public static func blockSignals() {
        ShutdownSignals.termination.block(adding: [SIGCHLD])
    }

    static func signalSet() -> sigset_t {
        ShutdownSignals.termination.set(adding: [SIGCHLD])
    }

    /// In a worker process: ask for SIGTERM when the supervisor dies (and stop at once if it
    /// already has). The supervisor's pid comes in HERALD_SUPERVISOR_PID, so a supervisor that
    /// is itself pid 1 (a container's entry point) is not mistaken for a dead one.
    public static func adoptParentDeathSignal() {
        _ = herald_set_parent_death_signal(SIGTERM)
        if let expected = ProcessInfo.processInfo.environment["HERALD_SUPERVISOR_PID"].flatMap({ pid_t($0) }),
           getppid() != expected {
            kill(getpid(), SIGTERM)
        }
    }

    public func run() -> Report {
        var peak = 0
        var cpu = 0.0
        var restarts = 0
        var stopping = false
        let slots = processes * groups.count
        var failures: [Int: Int] = [:]
        var nextPoll = Date().timeIntervalSince1970 + registryPollInterval
        var restartAt: [Int: Double] = [:]
        var finalStatus: Int32 = 0
        var killAt: Double? = nil
        for slot in 0..<slots where !spawn(slot: slot) { restartAt[slot] = Date().timeIntervalSince1970 + 5 }
        var set = Self.signalSet()

        // A pool following the registry keeps running without workers too: a project may join.
        while !children.isEmpty || (!stopping && (!restartAt.isEmpty || (registryPoll != nil && !drain))) {
            let now = Date().timeIntervalSince1970
            if let deadline = killAt, now >= deadline {
                log.error("\(children.count) worker processes did not stop within \(Int(stopGrace)) s; killing them")
                for pid in children.keys { kill(pid, SIGKILL) }
                killAt = nil
            }
            for (slot, at) in restartAt where at <= now && !stopping {
                restartAt[slot] = nil
                restarts += 1
                if !spawn(slot: slot) { restartAt[slot] = now + 5 }
            }
            if let poll = registryPoll, !stopping, !drain, now >= nextPoll {
                nextPoll = now + registryPollInterval
                if let names = poll() { followRegistry(names, restartAt: &restartAt) }
            }
            var wait = restartAt.values.min().map { max(0.01, $0 - now) } ?? 1.0
            if registryPoll != nil && !stopping && !drain { wait = min(wait, max(0.01, nextPoll - now)) }
            var timeout = timespec(tv_sec: Int(wait), tv_nsec: Int((wait - Double(Int(wait))) * 1e9))
            let signal = sigtimedwait(&set, nil, &timeout)
            if ShutdownSignals.termination.signals.contains(signal) {
                if !stopping { log.info("received \(ShutdownSignals.name(signal)): stopping \(children.count) worker processes") }
                stopping = true
                monitor?.stopping()
                restartAt.removeAll()
                if killAt == nil { killAt = now + stopGrace }
                for pid in children.keys { kill(pid, signal) }
            }
            // Reap every child that exited (SIGCHLD may coalesce).
            while true {
                var status: Int32 = 0
                var usage = rusage()
                let pid = wait4(-1, &status, WNOHANG, &usage)
                if pid <= 0 { break }
                peak = max(peak, Int(usage.ru_maxrss) * 1024)
                cpu += Double(usage.ru_utime.tv_sec) + Double(usage.ru_utime.tv_usec) / 1e6
                    + Double(usage.ru_stime.tv_sec) + Double(usage.ru_stime.tv_usec) / 1e6
                guard let slot = children.removeValue(forKey: pid) else { continue }
                let exited = (status & 0x7f) == 0
                let code = exited ? (status >> 8) & 0xff : 128 + (status & 0x7f)
                monitor?.workerExited(slot: slot, why: "pid \(pid) \(exited ? "exited with status \(code)" : "was killed by signal \(status & 0x7f)")")
                if drain && code == 0 { monitor?.stopping() }
                if retiredGroups.contains(slot / processes) {
                    log.info("worker \(pid) of \(group(of: slot).label ?? "a group") stopped: its project left the registry")
                    continue
                }
                if code == 0 {
                    failures[slot] = 0
                    if !stopping && !drain {
                        log.warning("worker \(pid) exited; starting another")
                        restartAt[slot] = Date().timeIntervalSince1970 + 1
                    }
                    continue
                }
                if stopping {
                    if finalStatus == 0 { finalStatus = Int32(code) }
                    continue
                }
                if code == Self.configurationErrorStatus, !group(of: slot).refusalStopsPool {
                    // Its project's key is missing or refused (it printed why and paused the
                    // project with that reason): the others go on; it is tried again later.
                    let label = group(of: slot).label ?? "a group"
                    if drain {
                        log.error("worker \(pid) of \(label) refused its configuration; its jobs stay pending")
                    } else {
                        log.error("worker \(pid) of \(label) refused its configuration; trying again in \(Int(retryAfterRefusal)) s")
                        restartAt[slot] = Date().timeIntervalSince1970 + retryAfterRefusal
                    }
                    continue
                }
                if code == Self.configurationErrorStatus {
                    // A setting is wrong (it printed which); restarting cannot help.
                    log.error("worker \(pid) refused its configuration; stopping")
                    finalStatus = Int32(code)
                    stopping = true
                    monitor?.stopping()
                    restartAt.removeAll()
                    if killAt == nil { killAt = Date().timeIntervalSince1970 + stopGrace }
                    for other in children.keys { kill(other, SIGTERM) }
                    continue
                }
                // A worker that ran healthily for a while starts its backoff afresh.
                if Date().timeIntervalSince1970 - (startedAt[slot] ?? 0) > 60 { failures[slot] = 0 }
                failures[slot, default: 0] += 1
                let delay = min(30, pow(2, Double(failures[slot]! - 1)))
                log.error("worker \(pid) \(exited ? "exited with status \(code)" : "was killed by signal \(status & 0x7f)"); restarting it in \(Int(delay)) s")
                restartAt[slot] = Date().timeIntervalSince1970 + delay
            }
        }
        return Report(status: finalStatus, peakRSSBytes: peak, restarts: restarts, workerCPUSeconds: cpu)
    }

    /// Starts the workers of projects new in the registry (or back in it) and stops those of
    /// projects that left it.
    private func followRegistry(_ names: [String], restartAt: inout [Int: Double]) {
        guard let make = groupForProject else { return }
        let wanted = Set(names)
        for (index, group) in groups.enumerated() {
            guard let project = group.project, !group.refusalStopsPool else { continue }
            let slots = (index * processes)..<((index + 1) * processes)
            if !wanted.contains(project) && !retiredGroups.contains(index) {
                log.info("project \(project) left the registry: stopping its \(processes) worker processes")
                retiredGroups.insert(index)
                monitor?.setRetired(slots: Array(slots), true)
                for slot in slots { restartAt[slot] = nil }
                for (pid, slot) in children where slots.contains(slot) { kill(pid, SIGTERM) }
            } else if wanted.contains(project) && retiredGroups.contains(index) {
                log.info("project \(project) is in the registry again: starting \(processes) worker processes for it")
                retiredGroups.remove(index)
                monitor?.setRetired(slots: Array(slots), false)
                for slot in slots where !children.values.contains(slot) && !spawn(slot: slot) {
                    restartAt[slot] = Date().timeIntervalSince1970 + 5
                }
            }
        }
        let known = Set(groups.compactMap { $0.refusalStopsPool ? nil : $0.project })
        for name in names where !known.contains(name) {
            if let monitor {
                do { try monitor.addSlots(project: name, count: processes) } catch {
                    log.error("project \(name) joined the registry, but its metrics cannot be set up (\(error)); not starting it")
                    continue
                }
            }
            groups.append(make(name))
            let index = groups.count - 1
            log.info("project \(name) joined the registry: starting \(processes) worker processes for it")
            for slot in (index * processes)..<((index + 1) * processes) where !spawn(slot: slot) {
                restartAt[slot] = Date().timeIntervalSince1970 + 5
            }
        }
    }

    private func spawn(slot: Int) -> Bool {
        let executable = Self.executablePath()
        var env = ProcessInfo.processInfo.environment
        for (key, value) in environment { env[key] = value }
        env["HERALD_WORKER_CHILD"] = "1"
        env["HERALD_SUPERVISOR_PID"] = String(getpid())
        env[Self.indexVariable] = String(slot % max(1, processes))
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        if let region = monitor?.regions[slot] {
            // The slot's region as descriptor 3 (dup2 clears close-on-exec on the copy only).
            posix_spawn_file_actions_adddup2(&actions, region.fileDescriptor, Self.metricsDescriptor)
            env[WorkerMetrics.descriptorVariable] = String(Self.metricsDescriptor)
        } else {
            env[WorkerMetrics.descriptorVariable] = nil
        }
        let argv = [executable] + arguments + group(of: slot).arguments
        let envp = env.map { "\($0.key)=\($0.value)" }
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var empty = sigset_t()
        sigemptyset(&empty)
        posix_spawnattr_setsigmask(&attributes, &empty)
        var defaults = Self.signalSet()
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        var pid: pid_t = 0
        let result = withCStringArray(argv) { cargv in
            withCStringArray(envp) { cenv in
                posix_spawn(&pid, executable, &actions, &attributes, cargv, cenv)
            }
        }
        if result != 0 {
            log.error("cannot start a worker process (\(String(cString: strerror(result)))); trying again in 5 s")
            return false
        }
        children[pid] = slot
        startedAt[slot] = Date().timeIntervalSince1970
        monitor?.workerStarted(slot: slot, pid: pid)
        log.debug("started worker process \(pid)\(group(of: slot).label.map { " for " + $0 } ?? "")")
        return true
    }

    static let metricsDescriptor: Int32 = 3
    /// A worker's place among its group's processes (0 ..< --processes), a restarted one's the same.
    public static let indexVariable = "HERALD_WORKER_INDEX"

    /// Slots are numbered group by group, `processes` to a group.
    func group(of slot: Int) -> Group { groups[min(groups.count - 1, slot / processes)] }

    static func executablePath() -> String {
        if let resolved = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") { return resolved }
        return CommandLine.arguments[0]
    }
}

func withCStringArray<R>(_ strings: [String], _ body: (UnsafePointer<UnsafeMutablePointer<CChar>?>) -> R) -> R {
    var pointers: [UnsafeMutablePointer<CChar>?] = strings.map { strdup($0) }
    pointers.append(nil)
    defer { for pointer in pointers { free(pointer) } }
    return pointers.withUnsafeBufferPointer { body($0.baseAddress!) }
}
