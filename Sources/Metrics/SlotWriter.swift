import Foundation
import Queue
import Synchronization

/// The worker side of a slot: what one worker process counts. Thread-safe (the store thread
/// and the sender thread both write); adding to a counter is one atomic add in shared memory.
public final class SlotWriter: @unchecked Sendable {
    public let region: SlotRegion
    private struct Labels {
        var queues: [String: Int] = [:]
        var codes: [String: Int] = [:]
        /// The label looked up last in each table and its index: nearly every job is in the same
        /// queue as the one before and gets the same answer (`OK`), and comparing two strings
        /// costs less than hashing one.
        var lastQueue: (name: String, index: Int)? = nil
        var lastCode: (name: String, index: Int)? = nil
        /// Project rows by name (a worker carrying many projects), and the rows of dropped
        /// projects, oldest drop first: the ones a new project takes when no row is empty.
        var projects: [String: Int] = [:]
        var droppedRows: [Int] = []
        /// The project looked up last and its row (forgotten when any project is dropped):
        /// answers come in runs of one project's jobs.
        var lastProject: (name: String, row: Int)? = nil
    }
    private let labels: Mutex<Labels>
    /// The project row that collects the projects beyond the table.
    private let overflowRow: Int
    /// Token fetches of the slot's earlier processes.
    private let tokenFetchBase: UInt64
    /// Log lines dropped by the slot's earlier processes.
    private let logDropBase: UInt64

    /// Takes over the slot: earlier workers' label tables are read back, so the new process
    /// keeps adding to the same entries; `pid` marks the slot as this process's.
    /// `projectRows`: the rows of the projects table this writer uses, the last for the
    /// overflow (all of them but in tests, which make the table small to reach its end).
    public init(region: SlotRegion, pid: Int32 = getpid(), projectRows: Int = SlotRegion.projectCapacity) {
        self.region = region
        overflowRow = max(1, min(projectRows, SlotRegion.projectCapacity)) - 1
        var known = Labels()
        for (index, name) in region.names(.queues).enumerated() { known.queues[name] = index }
        for (index, name) in region.names(.codes).enumerated() { known.codes[name] = index }
        for row in 0...overflowRow {
            guard let found = region.readProject(row: row) else { continue }
            known.projects[found.name] = row
            if found.state == .dropped { known.droppedRows.append(row) }
        }
        labels = Mutex(known)
        tokenFetchBase = region.load(SlotRegion.Header.tokenRefreshes.rawValue)
        logDropBase = region.load(SlotRegion.Header.logWritesDropped.rawValue)
        region.store(SlotRegion.Header.pid.rawValue, UInt64(pid))
    }

    // MARK: outcomes and answers

    /// `count` outcomes of one kind were recorded for jobs of `queue`.
    public func recorded(queue: String, outcome: MessageOutcome, count: Int = 1) {
        guard count > 0 else { return }
        region.add(region.entryStart(.queues, index(ofQueue: queue)) + SlotRegion.nameWords + outcome.index, UInt64(count))
    }

    /// One FCM request was answered (`code` `OK`, an FCM error code, or `TRANSPORT`) after `seconds`.
    /// With `project` (a worker carrying many projects), counted in its project row as well.
    /// `apns`: an APNs request (`code` Apple's reason, `OK`, `TRANSPORT` or `UNPROCESSED`), kept
    /// apart from FCM's (herald_apns_requests_total, its own duration histogram).
    public func answered(code: String, seconds: Double, project: String? = nil, apns: Bool = false) {
        let code = index(ofCode: apns ? SlotRegion.apnsCodePrefix + code : code)
        region.add(region.entryStart(.codes, code) + SlotRegion.nameWords, 1)
        Self.observe(seconds, bounds: SlotRegion.durationBounds, in: region, at: apns ? SlotRegion.apnsDurationStart : SlotRegion.durationStart)
        // After the slot's count: a reader reads the rows first, so a row never shows more than the total.
        if let project { inProjectRow(project) { region.add($0 + SlotRegion.ProjectWord.codes + code, 1) } }
    }

    /// FCM's 200 for a job of `queue` came `seconds` after the job was due.
    public func delivered(queue: String, secondsSinceDue seconds: Double) {
        let start = region.entryStart(.queues, index(ofQueue: queue)) + SlotRegion.nameWords + SlotRegion.outcomeCount
        Self.observe(max(0, seconds), bounds: SlotRegion.latencyBounds, in: region, at: start)
    }

    /// Outcomes the database did not apply because another worker held the job by then.
    public func stale(_ count: Int) {
        if count > 0 { region.add(SlotRegion.Header.staleOutcomes.rawValue, UInt64(count)) }
    }

    /// A quota answer taken for `limit` (`device`, `topic` or `project`).
    public func quotaExceeded(_ limit: String, project: String? = nil) {
        guard let position = SlotRegion.quotaLimits.firstIndex(where: { $0.label == limit }) else { return }
        region.add(SlotRegion.quotaLimits[position].word, 1)
        if let project { inProjectRow(project) { region.add($0 + SlotRegion.ProjectWord.quota + position, 1) } }
    }

    /// A job snoozed after a quota answer, or held back while its target backs off.
    public func snoozed(project: String? = nil) {
        region.add(SlotRegion.Header.snoozed.rawValue, 1)
        if let project { inProjectRow(project) { region.add($0 + SlotRegion.ProjectWord.snoozed, 1) } }
    }

    // MARK: projects of a worker carrying many

    /// `project`'s adapted rate in force, in its row (the overflow row keeps no gauges: it
    /// stands for many projects).
    public func setProjectRate(_ perSecond: Double, project: String) {
        inProjectRow(project, gauge: true) { region.store($0 + SlotRegion.ProjectWord.rateMilli, UInt64(max(0, min(perSecond, 1e12)) * 1000)) }
    }

    /// Seconds since 1970 until which `project` sends nothing new, in its row.
    public func setProjectPausedUntil(_ seconds: Double, project: String) {
        inProjectRow(project, gauge: true) { region.store($0 + SlotRegion.ProjectWord.pausedUntilMilliseconds, UInt64(max(0, seconds * 1000))) }
    }

    /// The worker dropped `project` (idle, or gone from the registry): its row keeps its counts,
    /// shown as before, until a project new to the slot needs a row and none is empty; then the
    /// counts of the project dropped longest ago move to the overflow row. Taken up again before
    /// that, the project goes on in its row.
    public func projectDropped(_ project: String) {
        let name = SlotRegion.shortened(project)
        labels.withLock { labels in
            guard let row = labels.projects[name], row != overflowRow, !labels.droppedRows.contains(row) else { return }
            region.setProjectState(row: row, .dropped)
            labels.lastProject = nil
            region.store(region.projectRowStart(row) + SlotRegion.ProjectWord.pausedUntilMilliseconds, 0)
            labels.droppedRows.append(row)
        }
    }

    /// Runs `body` with the start of `project`'s row, taking a row for it first when it has
    /// none (an empty one, else a dropped project's, else the overflow row). Under the lock, so
    /// a row is never renamed between finding it and adding to it.
    private func inProjectRow(_ project: String, gauge: Bool = false, _ body: (Int) -> Void) {
        let name = SlotRegion.shortened(project)
        labels.withLock { labels in
            let overflow = overflowRow
            var row: Int
            if let last = labels.lastProject, last.name == name {
                row = last.row
            } else if let known = labels.projects[name] {
                row = known
                // Taken up again before its row went to another project: it goes on in its row.
                if row != overflow, region.projectState(row: row) == .dropped, let position = labels.droppedRows.firstIndex(of: row) {
                    labels.droppedRows.remove(at: position)
                    region.setProjectState(row: row, .live)
                }
            } else if case let named = labels.projects.count - (labels.projects[SlotRegion.overflowLabel] == nil ? 0 : 1), named < overflow {
                // Rows 0..<overflow are taken in order and never emptied, so the count of named rows is the next empty one.
                row = named
                region.publishProject(row: row, name: name, overflow: overflow)
                labels.projects[name] = row
            } else if !labels.droppedRows.isEmpty {
                row = labels.droppedRows.removeFirst()
                if let old = labels.projects.first(where: { $0.value == row })?.key { labels.projects[old] = nil }
                region.publishProject(row: row, name: name, overflow: overflow)
                labels.projects[name] = row
            } else {
                row = overflow
                if labels.projects[SlotRegion.overflowLabel] == nil {
                    region.publishProject(row: overflow, name: SlotRegion.overflowLabel, overflow: overflow)
                    labels.projects[SlotRegion.overflowLabel] = overflow
                }
            }
            labels.lastProject = (name, row)
            if gauge && row == overflow { return }
            body(region.projectRowStart(row))
        }
    }

    /// Log lines this process dropped because its stderr was closed; call with the process's
    /// own total, the slot's earlier processes' drops are kept.
    public func setLogWritesDropped(_ droppedByThisProcess: Int) {
        region.store(SlotRegion.Header.logWritesDropped.rawValue, logDropBase + UInt64(max(0, droppedByThisProcess)))
    }

    // MARK: gauges (one writer each)

    /// The sender's window of requests in flight.
    public func setWindow(_ size: Int) { region.store(SlotRegion.Header.window.rawValue, UInt64(max(0, size))) }

    /// The project's adapted rate in force, sends a second.
    public func setProjectRate(_ perSecond: Double) {
        region.store(SlotRegion.Header.projectRateMilli.rawValue, UInt64(max(0, min(perSecond, 1e12)) * 1000))
    }

    public func setInFlight(_ count: Int) { region.store(SlotRegion.Header.inFlight.rawValue, UInt64(max(0, count))) }
    public func setDatabaseConnected(_ connected: Bool) { region.store(SlotRegion.Header.databaseConnected.rawValue, connected ? 1 : 0) }
    public func setTokenHeld(_ held: Bool) { region.store(SlotRegion.Header.tokenHeld.rawValue, held ? 1 : 0) }
    /// Seconds since 1970 until which this process sends nothing new (0: not held back).
    public func setProjectPausedUntil(_ seconds: Double) {
        region.store(SlotRegion.Header.projectPausedUntilMilliseconds.rawValue, UInt64(max(0, seconds * 1000)))
    }
    /// Access tokens fetched since the slot was created; call with this process's own count,
    /// the slot's earlier processes' fetches are kept.
    public func setTokenFetches(_ fetchedByThisProcess: Int) {
        region.store(SlotRegion.Header.tokenRefreshes.rawValue, tokenFetchBase + UInt64(max(0, fetchedByThisProcess)))
    }

    // MARK: internals

    static func observe(_ value: Double, bounds: [Double], in region: SlotRegion, at start: Int) {
        var bucket = bounds.count
        for (index, bound) in bounds.enumerated() where value <= bound {
            bucket = index
            break
        }
        region.add(start + bucket, 1)
        region.add(start + bounds.count + 1, UInt64((value * 1_000_000).rounded()))
    }

    private func index(ofQueue name: String) -> Int {
        labels.withLock { labels in
            if let last = labels.lastQueue, last.name == name { return last.index }
            let index = index(of: name, in: &labels.queues, table: .queues)
            labels.lastQueue = (name, index)
            return index
        }
    }

    private func index(ofCode name: String) -> Int {
        labels.withLock { labels in
            if let last = labels.lastCode, last.name == name { return last.index }
            let index = index(of: name, in: &labels.codes, table: .codes)
            labels.lastCode = (name, index)
            return index
        }
    }

    private func index(of name: String, in known: inout [String: Int], table: SlotRegion.Table) -> Int {
        let name = SlotRegion.shortened(name)
        if let index = known[name] { return index }
        let overflow = table.capacity - 1
        if known.count < overflow {
            let index = known.count
            region.publish(table, index: index, name: name)
            known[name] = index
            return index
        }
        if known[SlotRegion.overflowLabel] == nil {
            region.publish(table, index: overflow, name: SlotRegion.overflowLabel)
            known[SlotRegion.overflowLabel] = overflow
        }
        return overflow
    }
}
