import Foundation

/// CPU time and resident memory of a process, from /proc/PID/stat (Linux).
public struct ProcessStatistics: Sendable, Equatable {
    /// User and system CPU seconds of the process itself.
    public var cpuSeconds: Double
    /// CPU seconds of its children it has waited for (reaped), user and system.
    public var reapedChildrenCPUSeconds: Double
    public var residentBytes: Int

    public init(cpuSeconds: Double, reapedChildrenCPUSeconds: Double, residentBytes: Int) {
        self.cpuSeconds = cpuSeconds
        self.reapedChildrenCPUSeconds = reapedChildrenCPUSeconds
        self.residentBytes = residentBytes
    }

    /// nil when the process is gone (or /proc is not there).
    public static func read(pid: Int32) -> ProcessStatistics? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8) else { return nil }
        return parse(stat: text, ticksPerSecond: Double(sysconf(Int32(_SC_CLK_TCK))), pageSize: sysconf(Int32(_SC_PAGESIZE)))
    }

    /// Parses the one line of /proc/PID/stat. The command name (field 2) is in parentheses and
    /// may hold spaces and parentheses itself, so fields are counted from the last `)`.
    public static func parse(stat: String, ticksPerSecond: Double, pageSize: Int) -> ProcessStatistics? {
        guard let close = stat.lastIndex(of: ")") else { return nil }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        // fields[0] is field 3 (state): field n is fields[n - 3].
        func field(_ n: Int) -> Double? { n - 3 < fields.count ? Double(fields[n - 3]) : nil }
        guard let utime = field(14), let stime = field(15), let cutime = field(16), let cstime = field(17),
              let rss = field(24), ticksPerSecond > 0 else { return nil }
        return ProcessStatistics(cpuSeconds: (utime + stime) / ticksPerSecond,
                                 reapedChildrenCPUSeconds: (cutime + cstime) / ticksPerSecond,
                                 residentBytes: Int(rss) * pageSize)
    }
}
