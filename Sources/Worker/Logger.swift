import Foundation

/// Log lines on stderr, one event per line: `time level message key=value ...`.
/// Nothing secret is ever passed in: messages carry job ids, counts and classified FCM reasons
/// (already redacted by FCM's classification), never keys, assertions or access tokens.
public struct Logger: Sendable {
    public enum Level: Int, Sendable, Comparable {
        case debug, info, warning, error
        public static func < (a: Level, b: Level) -> Bool { a.rawValue < b.rawValue }
        public init?(name: String) {
            switch name.lowercased() {
            case "debug": self = .debug
            case "info": self = .info
            case "warn", "warning": self = .warning
            case "error": self = .error
            default: return nil
            }
        }
        var name: String { ["debug", "info", "warn", "error"][rawValue] }
    }
    public var level: Level
    public var prefix: String

    public init(level: Level = .info, prefix: String = "herald") {
        self.level = level
        self.prefix = prefix
    }

    public func log(_ level: Level, _ message: String) {
        guard level >= self.level else { return }
        let line = "\(Logger.timestamp()) \(level.name) \(prefix): \(message)\n"
        FileHandle.standardError.write(Data(line.utf8))
    }
    public func debug(_ message: @autoclosure () -> String) { if level <= .debug { log(.debug, message()) } }
    public func info(_ message: String) { log(.info, message) }
    public func warning(_ message: String) { log(.warning, message) }
    public func error(_ message: String) { log(.error, message) }

    static func timestamp() -> String {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        var seconds = time_t(now.tv_sec)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        return String(format: "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", parts.tm_year + 1900, parts.tm_mon + 1, parts.tm_mday,
                      parts.tm_hour, parts.tm_min, parts.tm_sec, Int(now.tv_nsec / 1_000_000))
    }
}
