import Foundation

/// Prometheus text exposition format 0.0.4: `# HELP`, `# TYPE`, then one line per sample.
///
/// A scrape is rendered from scratch each time (families in the order they are added), so
/// there is no registry object with a lifetime to manage: whoever serves /metrics collects the
/// current values and writes them here.
public struct Exposition {
    public enum Kind: String, Sendable {
        case counter, gauge, histogram
    }

    public private(set) var text = ""
    private var declared: Set<String> = []

    /// `Content-Type` of the rendered text.
    public static let contentType = "text/plain; version=0.0.4; charset=utf-8"

    public init() {}

    /// Starts a family. `name` must be a valid metric name, counters end in `_total`; both are
    /// programming errors, not runtime input, hence preconditions.
    public mutating func family(_ name: String, _ kind: Kind, help: String) {
        precondition(Self.isValidName(name), "not a Prometheus metric name: \(name)")
        precondition(kind != .counter || name.hasSuffix("_total"), "a counter's name ends in _total: \(name)")
        precondition(!declared.contains(name), "metric family declared twice: \(name)")
        declared.insert(name)
        text += "# HELP \(name) \(Self.escapeHelp(help))\n# TYPE \(name) \(kind.rawValue)\n"
    }

    /// One sample of the family started last (or a histogram's `_bucket`, `_sum`, `_count`).
    public mutating func sample(_ name: String, labels: [(String, String)] = [], _ value: Double) {
        sample(name, labels: labels, valueText: Self.format(value))
    }

    public mutating func sample(_ name: String, labels: [(String, String)] = [], _ value: Int) {
        sample(name, labels: labels, valueText: String(value))
    }

    public mutating func sample(_ name: String, labels: [(String, String)] = [], _ value: UInt64) {
        sample(name, labels: labels, valueText: String(value))
    }

    private mutating func sample(_ name: String, labels: [(String, String)], valueText: String) {
        text += name
        if !labels.isEmpty {
            text += "{"
            for (index, (label, value)) in labels.enumerated() {
                precondition(Self.isValidLabelName(label), "not a Prometheus label name: \(label)")
                if index > 0 { text += "," }
                text += label + "=\"" + Self.escapeLabelValue(value) + "\""
            }
            text += "}"
        }
        text += " " + valueText + "\n"
    }

    /// A whole histogram series: cumulative `_bucket` lines (the `+Inf` one equal to `_count`),
    /// `_sum` and `_count`. `counts` holds the observations per bucket, not cumulative, with one
    /// more entry than `bounds` for the observations above the last bound.
    public mutating func histogram(_ name: String, labels: [(String, String)] = [], bounds: [Double], counts: [UInt64], sum: Double) {
        precondition(counts.count == bounds.count + 1, "\(name): \(bounds.count) bounds need \(bounds.count + 1) counts")
        var cumulative: UInt64 = 0
        for (index, bound) in bounds.enumerated() {
            cumulative += counts[index]
            sample(name + "_bucket", labels: labels + [("le", Self.format(bound))], cumulative)
        }
        cumulative += counts[bounds.count]
        sample(name + "_bucket", labels: labels + [("le", "+Inf")], cumulative)
        sample(name + "_sum", labels: labels, sum)
        sample(name + "_count", labels: labels, cumulative)
    }

    /// Go-style float text: integers without a fraction, `+Inf`, `-Inf`, `NaN`.
    public static func format(_ value: Double) -> String {
        if value.isNaN { return "NaN" }
        if value.isInfinite { return value > 0 ? "+Inf" : "-Inf" }
        if value == value.rounded(), abs(value) < 1e15 { return String(Int64(value)) }
        return String(value)
    }

    /// `\`, `"` and newline must be escaped inside a label value.
    public static func escapeLabelValue(_ value: String) -> String {
        guard value.utf8.contains(where: { $0 == UInt8(ascii: "\\") || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\n") }) else {
            return value
        }
        var escaped = ""
        for character in value.unicodeScalars {
            switch character {
            case "\\": escaped += "\\\\"
            case "\"": escaped += "\\\""
            case "\n": escaped += "\\n"
            default: escaped.unicodeScalars.append(character)
            }
        }
        return escaped
    }

    /// In HELP text only `\` and newline are escaped.
    public static func escapeHelp(_ help: String) -> String {
        help.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\n", with: "\\n")
    }

    /// `[a-zA-Z_:][a-zA-Z0-9_:]*`
    public static func isValidName(_ name: String) -> Bool {
        guard let first = name.utf8.first, isNameStart(first) || first == UInt8(ascii: ":") else { return false }
        return name.utf8.allSatisfy { isNameStart($0) || isDigit($0) || $0 == UInt8(ascii: ":") }
    }

    /// `[a-zA-Z_][a-zA-Z0-9_]*`, and not starting with `__` (reserved).
    public static func isValidLabelName(_ name: String) -> Bool {
        guard let first = name.utf8.first, isNameStart(first), !name.hasPrefix("__") else { return false }
        return name.utf8.allSatisfy { isNameStart($0) || isDigit($0) }
    }

    private static func isNameStart(_ byte: UInt8) -> Bool {
        (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z")) || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z")) || byte == UInt8(ascii: "_")
    }
    private static func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }
}
