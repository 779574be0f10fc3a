import Foundation
import Metrics
import Postgres

/// CPU time spent by a PostgreSQL cluster's server processes, read from /proc (Linux).
///
/// Backends come and go (every worker's connection is a process that exits with it), so a
/// reading is the postmaster's own time, plus the time of every child it has reaped (the kernel
/// adds an exited child's user and system time to its parent's cutime and cstime), plus the time
/// of every child still running. The difference of two readings is what the whole cluster
/// (backends, autovacuum, WAL writer, checkpointer) spent in between, whoever exited meanwhile.
public struct ServerCPU: Sendable {
    public let postmasterPID: Int32

    public init(postmasterPID: Int32) { self.postmasterPID = postmasterPID }

    /// The postmaster's pid from the first line of `DATA/postmaster.pid`, or nil when the
    /// server is not running there.
    public static func postmasterPID(dataDirectory: String) -> Int32? {
        guard let text = try? String(contentsOfFile: dataDirectory + "/postmaster.pid", encoding: .utf8),
              let line = text.split(separator: "\n").first else { return nil }
        return Int32(line.trimmingCharacters(in: .whitespaces))
    }

    /// CPU seconds of the cluster so far; nil when the postmaster is gone.
    public func seconds() -> Double? {
        guard let own = ProcessStatistics.read(pid: postmasterPID) else { return nil }
        var total = own.cpuSeconds + own.reapedChildrenCPUSeconds
        for child in children() {
            if let statistics = ProcessStatistics.read(pid: child) {
                total += statistics.cpuSeconds + statistics.reapedChildrenCPUSeconds
            }
        }
        return total
    }

    /// The pids of the postmaster's running children (field 4 of /proc/PID/stat is the parent).
    public func children() -> [Int32] {
        guard let entries = try? FileManager.default.contentsOfDirectory(atPath: "/proc") else { return [] }
        var found: [Int32] = []
        for entry in entries {
            guard let pid = Int32(entry),
                  let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
                  let close = stat.lastIndex(of: ")") else { continue }
            let fields = stat[stat.index(after: close)...].split(separator: " ", maxSplits: 3)
            if fields.count > 1, Int32(fields[1]) == postmasterPID { found.append(pid) }
        }
        return found
    }

    /// Waits (up to `timeout` seconds) until the backends of connections that were closed have
    /// exited, so their time has reached the postmaster's reaped total: until no child is left
    /// beyond those in `before` and autovacuum workers.
    public func settle(before: Set<Int32>, timeout: Double = 5) {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            let lingering = children().filter { pid in
                guard !before.contains(pid) else { return false }
                let command = (try? String(contentsOfFile: "/proc/\(pid)/cmdline", encoding: .utf8)) ?? ""
                return !command.contains("autovacuum worker")
            }
            if lingering.isEmpty { return }
            usleep(10_000)
        }
    }

    /// CPU seconds of one process (e.g. the backend of the bench's own connection), or nil.
    public static func processSeconds(_ pid: Int32) -> Double? {
        ProcessStatistics.read(pid: pid).map { $0.cpuSeconds }
    }
}

/// CPU seconds the calling thread has spent.
public func threadCPUSeconds() -> Double {
    var now = timespec()
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now)
    return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
}

/// One statement of a `pg_stat_statements` profile.
public struct StatementCost: Sendable {
    public var query: String
    public var calls: Int
    public var rows: Int
    public var totalMilliseconds: Double
    public var sharedBlocksHit: Int
    public var sharedBlocksRead: Int
}

/// `pg_stat_statements` in the bench's own cluster (loaded with `shared_preload_libraries` when
/// `herald bench --profile` is given): reset before a phase, read after it.
public enum StatementProfile {
    public static func enable(_ connection: PGConnection) throws(PostgresError) {
        try connection.execute(SQL.profileEnable)
    }

    public static func reset(_ connection: PGConnection) throws(PostgresError) {
        try connection.execute(SQL.profileReset)
    }

    /// The statements that took the most time, at most `limit`; the profile's own queries aside.
    public static func top(_ connection: PGConnection, limit: Int) throws(PostgresError) -> [StatementCost] {
        let result = try connection.query(SQL.profileTop, [.int(limit)])
        var costs: [StatementCost] = []
        for row in 0..<result.rowCount {
            costs.append(StatementCost(query: result[row, 0] ?? "", calls: result.int(row, 1) ?? 0, rows: result.int(row, 2) ?? 0,
                                       totalMilliseconds: result.double(row, 3) ?? 0,
                                       sharedBlocksHit: result.int(row, 4) ?? 0, sharedBlocksRead: result.int(row, 5) ?? 0))
        }
        return costs
    }

    /// Every statement's calls and time together (the profile's own queries aside).
    public static func totals(_ connection: PGConnection) throws(PostgresError) -> (calls: Int, milliseconds: Double) {
        let result = try connection.query(SQL.profileTotals)
        return (result.int(0, 0) ?? 0, result.double(0, 1) ?? 0)
    }
}
