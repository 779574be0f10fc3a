import Foundation
import Logging
import Metrics
import Synchronization

/// The herald version `herald_build_info` reports.
public let heraldVersion = "0.1.0"

/// What the supervisor knows about its pool, for `/metrics`, `/healthz` and `/readyz`: one
/// shared-memory slot per worker process (its counters survive the process), and which slots
/// have a running process. Read from the admin server's thread, written by the supervisor's.
public final class PoolMonitor: @unchecked Sendable {
    /// One per worker slot; a project added to the registry while the pool runs adds slots.
    public var regions: [SlotRegion] { state.withLock { $0.regions } }
    /// Each slot's registry project (nil: the jobs of no project), for the `project` label.
    public var slotProjects: [String?] { state.withLock { $0.projects } }
    private struct Slot {
        var pid: pid_t?
        /// Why the slot has no process, when it has none.
        var lastExit: String?
        /// Its project was removed from the registry: no process is expected (its counts stay).
        var retired = false
    }
    private struct State: @unchecked Sendable {
        var regions: [SlotRegion]
        var projects: [String?]
        var slots: [Slot]
        var stopping = false
        /// The CPU total last shown: a counter must never go down, and a worker reaped between
        /// reading the supervisor and reading that worker would otherwise be missed once.
        var shownCPUSeconds: Double = 0
    }
    private let state: Mutex<State>

    /// `processes` slots, all of the jobs of no project.
    public convenience init(processes: Int) throws(SlotRegionError) {
        try self.init(slotProjects: Array(repeating: nil, count: max(1, processes)))
    }

    /// One slot per entry, labelled with its project (nil: the jobs of no project).
    public init(slotProjects: [String?]) throws(SlotRegionError) {
        var regions: [SlotRegion] = []
        for _ in 0..<max(1, slotProjects.count) { regions.append(try SlotRegion.create()) }
        state = Mutex(State(regions: regions, projects: slotProjects.isEmpty ? [nil] : slotProjects,
                            slots: Array(repeating: Slot(pid: nil, lastExit: "not started yet"), count: regions.count)))
    }

    // MARK: the supervisor's side

    func workerStarted(slot: Int, pid: pid_t) {
        state.withLock { $0.slots[slot] = Slot(pid: pid, lastExit: nil) }
    }

    /// `count` new slots for `project` (a project added to the registry while the pool runs),
    /// numbered after the existing ones.
    func addSlots(project: String?, count: Int) throws(SlotRegionError) {
        var added: [SlotRegion] = []
        for _ in 0..<count { added.append(try SlotRegion.create()) }
        state.withLock {
            $0.regions += added
            $0.projects += Array(repeating: project, count: count)
            $0.slots += Array(repeating: Slot(pid: nil, lastExit: "not started yet"), count: count)
        }
    }

    /// The slots' project left the registry (`retired`), or came back: a retired slot without a
    /// process is neither unhealthy nor unready.
    func setRetired(slots: [Int], _ retired: Bool) {
        state.withLock { state in for slot in slots { state.slots[slot].retired = retired } }
    }

    /// The slot's process is gone (`why`: how it ended); its running-process gauges are cleared.
    func workerExited(slot: Int, why: String) {
        regions[slot].resetProcessState()
        state.withLock { $0.slots[slot].pid = nil; $0.slots[slot].lastExit = why }
    }

    func stopping() { state.withLock { $0.stopping = true } }

    // MARK: readings

    /// The pool's counters summed over its slots.
    public func totals() -> SlotSnapshot {
        var totals = SlotSnapshot()
        for region in regions { totals.add(SlotSnapshot(region)) }
        return totals
    }

    /// The text of `GET /metrics`.
    public func metricsText(now: Double = Date().timeIntervalSince1970) -> String {
        let (regions, slotProjects) = state.withLock { ($0.regions, $0.projects) }
        let snapshots = regions.map(SlotSnapshot.init)
        var totals = SlotSnapshot()
        for snapshot in snapshots { totals.add(snapshot) }
        let pids = state.withLock { $0.slots.compactMap(\.pid) }
        // The supervisor's own CPU, its reaped workers' (from its cutime/cstime), and the running workers'.
        var cpu = 0.0
        var resident = 0
        if let own = ProcessStatistics.read(pid: getpid()) {
            cpu = own.cpuSeconds + own.reapedChildrenCPUSeconds
            resident = own.residentBytes
        }
        for pid in pids {
            guard let worker = ProcessStatistics.read(pid: pid) else { continue }
            cpu += worker.cpuSeconds
            resident += worker.residentBytes
        }
        let shownCPU = state.withLock { state in
            state.shownCPUSeconds = max(state.shownCPUSeconds, cpu)
            return state.shownCPUSeconds
        }
        var reading = PoolReading(totals: totals, workerProcesses: pids.count,
                                  quotaPaused: snapshots.contains { $0.projectPausedUntil > now }, version: heraldVersion,
                                  cpuSeconds: shownCPU, residentBytes: resident)
        reading.supervisorLogWritesDropped = StandardStreams.droppedWrites
        if slotProjects.contains(where: { $0 != nil }) {
            // Per group, in the order the supervisor numbers them (the jobs of no project first).
            var order: [String?] = []
            var byProject: [String?: (totals: SlotSnapshot, paused: Bool)] = [:]
            for (slot, snapshot) in snapshots.enumerated() {
                let project = slotProjects[slot]
                if byProject[project] == nil {
                    order.append(project)
                    byProject[project] = (SlotSnapshot(), false)
                }
                byProject[project]!.totals.add(snapshot)
                if snapshot.projectPausedUntil > now { byProject[project]!.paused = true }
            }
            reading.projects = order.map { ProjectReading(project: $0, totals: byProject[$0]!.totals, quotaPaused: byProject[$0]!.paused) }
        }
        // The projects carried by workers of many: their rows summed by name over the slots,
        // taken out of the unlabelled group's answers, quota answers and snoozes so that a sum
        // over `project` is still the pool's total.
        var carried: [String: SlotSnapshot.ProjectCounts] = [:]
        for (slot, snapshot) in snapshots.enumerated() where slotProjects[slot] == nil {
            for (name, counts) in snapshot.projects { carried[name, default: SlotSnapshot.ProjectCounts()].add(counts) }
        }
        if !carried.isEmpty {
            if reading.projects.isEmpty { reading.projects = [ProjectReading(project: nil, totals: totals, quotaPaused: reading.quotaPaused)] }
            if let unlabelled = reading.projects.firstIndex(where: { $0.project == nil }) {
                var rest = reading.projects[unlabelled].totals
                for counts in carried.values {
                    for (code, count) in counts.requestsByCode { rest.requestsByCode[code] = (rest.requestsByCode[code] ?? 0) - min(count, rest.requestsByCode[code] ?? 0) }
                    for (limit, count) in counts.quotaByLimit { rest.quotaByLimit[limit] = (rest.quotaByLimit[limit] ?? 0) - min(count, rest.quotaByLimit[limit] ?? 0) }
                    rest.snoozed -= min(counts.snoozed, rest.snoozed)
                }
                reading.projects[unlabelled].totals = rest
            }
            // By name, the overflow row last.
            let names = carried.keys.filter { $0 != SlotRegion.overflowLabel }.sorted() + (carried[SlotRegion.overflowLabel] == nil ? [] : [SlotRegion.overflowLabel])
            reading.projects += names.map { ProjectReading(carried: $0, carried[$0]!, now: now) }
        }
        return PoolExposition.render(reading)
    }

    /// `/healthz`: healthy while every slot has a running worker process.
    public func health() -> (healthy: Bool, text: String) {
        let (slots, stopping) = state.withLock { ($0.slots, $0.stopping) }
        if stopping { return (false, "stopping: the supervisor received SIGTERM or SIGINT, or its queues are drained\n") }
        let missing = slots.enumerated().filter { $0.element.pid == nil && !$0.element.retired }
        let expected = slots.filter { !$0.retired }.count
        if missing.isEmpty { return (true, "ok: \(expected) of \(expected) worker processes running\n") }
        let lines = missing.map { "worker slot \($0.offset): no process (\($0.element.lastExit ?? "unknown"))" }
        return (false, "\(expected - missing.count) of \(expected) worker processes running\n" + lines.joined(separator: "\n") + "\n")
    }

    /// `/readyz`: ready once every slot's process holds a database connection and an access token.
    public func readiness() -> (ready: Bool, text: String) {
        let (slots, stopping, regions) = state.withLock { ($0.slots, $0.stopping, $0.regions) }
        if stopping { return (false, "stopping: no new jobs are claimed\n") }
        var reasons: [String] = []
        for (index, slot) in slots.enumerated() where !(slot.retired && slot.pid == nil) {
            guard let pid = slot.pid else {
                reasons.append("worker slot \(index): no process (\(slot.lastExit ?? "unknown"))")
                continue
            }
            let snapshot = SlotSnapshot(regions[index])
            var missing: [String] = []
            if snapshot.pid != pid { missing.append("still starting") }
            else {
                if !snapshot.databaseConnected { missing.append("no PostgreSQL connection") }
                if !snapshot.tokenHeld { missing.append("no FCM access token") }
            }
            if !missing.isEmpty { reasons.append("worker slot \(index) (pid \(pid)): " + missing.joined(separator: ", ")) }
        }
        if reasons.isEmpty { return (true, "ready: \(slots.count) worker processes hold a PostgreSQL connection and an access token\n") }
        return (false, "not ready\n" + reasons.joined(separator: "\n") + "\n")
    }
}
