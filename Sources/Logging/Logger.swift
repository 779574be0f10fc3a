import Foundation
import JSON
import Synchronization

/// A value of a log line's field.
public enum LogValue: Sendable, Equatable, ExpressibleByStringLiteral, ExpressibleByIntegerLiteral {
    case string(String)
    case int(Int)

    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int) { self = .int(value) }
}

/// Log lines on stderr, one event per line, as text (`time level prefix: message key=value ...`)
/// or as JSON (`{"time", "level", "msg", "pid", and the fields}`), for log shippers that index
/// fields such as `job_id`, `queue` and `code`.
///
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
        public var name: String { ["debug", "info", "warn", "error"][rawValue] }
    }

    public enum Format: String, Sendable, CaseIterable {
        case text, json
        public init?(name: String) { self.init(rawValue: name.lowercased()) }
    }

    public var level: Level
    public var format: Format
    public var prefix: String
    /// Where lines go: stderr unless a test captures them.
    let sink: @Sendable (String) -> Void

    public init(level: Level = .info, format: Format = .text, prefix: String = "herald") {
        self.init(level: level, format: format, prefix: prefix) { line in
            StandardStreams.write(line, to: 2)
        }
    }

    /// A logger whose lines (each ending in a newline) go to `sink`.
    public init(level: Level = .info, format: Format = .text, prefix: String = "herald", sink: @escaping @Sendable (String) -> Void) {
        self.level = level
        self.format = format
        self.prefix = prefix
        self.sink = sink
    }

    public func log(_ level: Level, _ message: String, _ fields: KeyValuePairs<String, LogValue> = [:]) {
        guard level >= self.level else { return }
        sink(line(level, message, fields, time: Self.timestamp(), pid: getpid()))
    }

    /// One line, newline included.
    func line(_ level: Level, _ message: String, _ fields: KeyValuePairs<String, LogValue>, time: String, pid: Int32) -> String {
        switch format {
        case .text:
            var line = "\(time) \(level.name) \(prefix): \(message)"
            for (key, value) in fields {
                switch value {
                case .int(let number): line += " \(key)=\(number)"
                case .string(let text):
                    let plain = !text.isEmpty && !text.contains(where: { $0 == " " || $0 == "\"" || $0 == "=" || $0.isNewline })
                    line += " \(key)=" + (plain ? text : JSONValue.quoted(text))
                }
            }
            return line + "\n"
        case .json:
            var line = "{\"time\":\"\(time)\",\"level\":\"\(level.name)\",\"msg\":" + JSONValue.quoted(message) + ",\"pid\":\(pid)"
            for (key, value) in fields {
                line += "," + JSONValue.quoted(key) + ":"
                switch value {
                case .int(let number): line += String(number)
                case .string(let text): line += JSONValue.quoted(text)
                }
            }
            return line + "}\n"
        }
    }

    /// Neither the message nor its fields are built unless debug lines are logged: the sender
    /// logs one for every retry.
    public func debug(_ message: @autoclosure () -> String, _ fields: @autoclosure () -> KeyValuePairs<String, LogValue> = [:]) {
        if level <= .debug { log(.debug, message(), fields()) }
    }
    public func info(_ message: String, _ fields: KeyValuePairs<String, LogValue> = [:]) { log(.info, message, fields) }
    public func warning(_ message: String, _ fields: KeyValuePairs<String, LogValue> = [:]) { log(.warning, message, fields) }
    public func error(_ message: String, _ fields: KeyValuePairs<String, LogValue> = [:]) { log(.error, message, fields) }

    /// UTC with milliseconds, RFC 3339.
    public static func timestamp() -> String {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        var seconds = time_t(now.tv_sec)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        return String(format: "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", parts.tm_year + 1900, parts.tm_mon + 1, parts.tm_mday,
                      parts.tm_hour, parts.tm_min, parts.tm_sec, Int(now.tv_nsec / 1_000_000))
    }
}

/// Writes to standard output and standard error that never end the process. A log shipper that
/// stops reading (`herald work 2>&1 | head -1`) leaves a closed pipe: with SIGPIPE ignored (every
/// herald command ignores it) `write` answers EPIPE, and the line is dropped and counted
/// (`herald_log_lines_dropped_total` on a pool's /metrics) instead of trapping, as
/// `FileHandle.write` does on an error.
public enum StandardStreams {
    private static let dropped = Atomic<Int>(0)

    /// Lines (or other writes) dropped so far in this process because the stream was closed or failing.
    public static var droppedWrites: Int { dropped.load(ordering: .relaxed) }

    /// Writes all of `text` to `descriptor` (1 or 2); returns false, and counts a dropped write,
    /// when the stream refuses it. Partial writes are continued; EINTR is retried.
    @discardableResult
    public static func write(_ text: String, to descriptor: Int32) -> Bool {
        var bytes = Array(text.utf8)
        if bytes.isEmpty { return true }
        let written = bytes.withUnsafeMutableBytes { buffer -> Bool in
            var offset = 0
            while offset < buffer.count {
                let result = Glibc.write(descriptor, buffer.baseAddress! + offset, buffer.count - offset)
                if result > 0 {
                    offset += result
                } else if result < 0 && errno == EINTR {
                    continue
                } else {
                    return false
                }
            }
            return true
        }
        if !written { dropped.wrappingAdd(1, ordering: .relaxed) }
        bytes.removeAll()
        return written
    }
}
