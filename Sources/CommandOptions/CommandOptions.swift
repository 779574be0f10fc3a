// The command-line vocabulary every herald command shares: options with an environment
// variable each, `--flag value` and `--flag=value`, errors that name the flag or variable and
// say what to give, and one help layout.
import Foundation

/// A command-line error: what is wrong and what to do, naming the flag or variable.
public struct UsageError: Error, Sendable, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// One flag of a command, optionally also read from an environment variable.
public struct Option: Sendable {
    public var name: String
    public var env: String? = nil
    /// Placeholder of the value (e.g. "N"); nil for a switch without a value.
    public var value: String? = nil
    public var repeatable = false
    public var help: String
    public var defaultText: String? = nil

    public init(name: String, env: String? = nil, value: String? = nil, repeatable: Bool = false, help: String,
                defaultText: String? = nil) {
        self.name = name; self.env = env; self.value = value; self.repeatable = repeatable
        self.help = help; self.defaultText = defaultText
    }
}

public struct ParsedOptions: Sendable {
    public let command: String
    public var values: [String: [String]] = [:]
    public var switches: Set<String> = []
    public var positional: [String] = []
    public let options: [Option]

    public func option(_ name: String) -> Option {
        guard let option = options.first(where: { $0.name == name }) else { fatalError("unknown option \(name)") }
        return option
    }

    /// The flag's last value, or its environment variable, or nil. Also says where it came from.
    public func lookup(_ name: String) -> (value: String, source: String)? {
        if let value = values[name]?.last { return (value, "--\(name)") }
        if let env = option(name).env, let value = ProcessInfo.processInfo.environment[env], !value.isEmpty {
            return (value, env)
        }
        return nil
    }
    public func string(_ name: String) -> String? { lookup(name)?.value }
    /// Whether this command has the option at all (commands share some code paths).
    public func accepts(_ name: String) -> Bool { options.contains { $0.name == name } }
    public func all(_ name: String) -> [String] { values[name] ?? [] }
    public func has(_ name: String) -> Bool {
        if switches.contains(name) { return true }
        if let env = option(name).env, let value = ProcessInfo.processInfo.environment[env] {
            return ["1", "true", "yes", "on"].contains(value.lowercased())
        }
        return false
    }

    public func int(_ name: String, default fallback: Int, minimum: Int = 0) throws(UsageError) -> Int {
        guard let (text, source) = lookup(name) else { return fallback }
        guard let value = Int(text), value >= minimum else {
            throw UsageError("herald \(command): \(source) \"\(text)\" is not a whole number of at least \(minimum); give e.g. \(example(source, String(max(minimum, fallback))))")
        }
        return value
    }

    /// An http or https URL with a host: FCM's base URL, the Instance ID URL. `http://` is
    /// allowed (HTTP/1.1, for a local emulator); anything else is refused
    /// naming the flag or variable, before anything is sent.
    public func httpURL(_ name: String) throws(UsageError) -> String? {
        guard let (text, source) = lookup(name) else { return nil }
        if let problem = httpURLProblem(text) {
            throw UsageError("herald \(command): \(source) \"\(text)\" \(problem); give e.g. \(example(source, "https://fcm.googleapis.com")) or, for a local emulator, \(example(source, "http://127.0.0.1:8080"))")
        }
        return text
    }

    /// A rate per second: a number of at least 0 (0: no limit).
    public func rate(_ name: String, default fallback: Double) throws(UsageError) -> Double {
        guard let (text, source) = lookup(name) else { return fallback }
        guard let value = Double(text), value.isFinite, value >= 0 else {
            throw UsageError("herald \(command): \(source) \"\(text)\" is not a rate; give messages per second, e.g. 10000, or 0 for no limit")
        }
        return value
    }

    /// A duration: plain seconds ("90", "0.5") or with a unit ("500ms", "30s", "15m", "24h", "7d").
    public func seconds(_ name: String, default fallback: Double) throws(UsageError) -> Double {
        guard let (text, source) = lookup(name) else { return fallback }
        guard let value = parseDuration(text) else {
            throw UsageError("herald \(command): \(source) \"\(text)\" is not a duration; give seconds (\"60\") or a number with ms, s, m, h or d (\"24h\")")
        }
        return value
    }
}

/// How to give `value` to a flag (`--name value`) or an environment variable (`NAME=value`).
func example(_ source: String, _ value: String) -> String {
    source.hasPrefix("--") ? "\(source) \(value)" : "\(source)=\(value)"
}

/// Why `text` is not an http(s) URL with a host, or nil when it is one.
public func httpURLProblem(_ text: String) -> String? {
    guard let schemeEnd = text.range(of: "://") else { return "is not a URL" }
    let scheme = text[..<schemeEnd.lowerBound].lowercased()
    guard scheme == "http" || scheme == "https" else { return "has scheme \(scheme.isEmpty ? "(none)" : scheme), not http or https" }
    guard let components = URLComponents(string: text), let host = components.host, !host.isEmpty,
          !text.contains(where: { $0 == " " || $0.isNewline }) else {
        return "is not a URL with a host"
    }
    if components.query != nil || components.fragment != nil { return "has a query or fragment; give only scheme, host, port and path" }
    return nil
}

/// The candidate nearest to `word` by edit distance, when it is near enough to be a slip of the
/// keyboard (at most a third of the word, and at least one edit allowed).
public func nearest(_ word: String, among candidates: [String]) -> String? {
    let limit = max(1, word.count / 3)
    var best: (String, Int)? = nil
    for candidate in candidates {
        let distance = editDistance(word, candidate)
        if distance <= limit, distance < (best?.1 ?? Int.max) { best = (candidate, distance) }
    }
    return best?.0
}

/// Levenshtein distance, with a swap of two neighbours counted as one edit.
public func editDistance(_ a: String, _ b: String) -> Int {
    let x = Array(a), y = Array(b)
    if x.isEmpty { return y.count }
    if y.isEmpty { return x.count }
    var previous2 = [Int](repeating: 0, count: y.count + 1)
    var previous = Array(0...y.count)
    var current = [Int](repeating: 0, count: y.count + 1)
    for i in 1...x.count {
        current[0] = i
        for j in 1...y.count {
            let cost = x[i - 1] == y[j - 1] ? 0 : 1
            current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost)
            if i > 1, j > 1, x[i - 1] == y[j - 2], x[i - 2] == y[j - 1] {
                current[j] = min(current[j], previous2[j - 2] + 1)
            }
        }
        (previous2, previous, current) = (previous, current, previous2)
    }
    return previous[y.count]
}

public func parseDuration(_ text: String) -> Double? {
    let units: [(String, Double)] = [("ms", 0.001), ("s", 1), ("m", 60), ("h", 3600), ("d", 86_400)]
    for (suffix, scale) in units where text.hasSuffix(suffix) {
        let number = text.dropLast(suffix.count)
        if let value = Double(number), value >= 0, value.isFinite { return value * scale }
    }
    if let value = Double(text), value >= 0, value.isFinite { return value }
    return nil
}

public func parse(command: String, arguments: [String], options: [Option], positional allowed: Bool = false) throws(UsageError) -> ParsedOptions {
    var parsed = ParsedOptions(command: command, options: options)
    var index = 0
    while index < arguments.count {
        let argument = arguments[index]
        index += 1
        guard argument.hasPrefix("--") else {
            if allowed { parsed.positional.append(argument); continue }
            throw UsageError("herald \(command): unexpected argument \"\(argument)\"; see herald \(command) --help")
        }
        var name = String(argument.dropFirst(2))
        var inline: String? = nil
        if let equals = name.firstIndex(of: "=") {
            inline = String(name[name.index(after: equals)...])
            name = String(name[..<equals])
        }
        guard let option = options.first(where: { $0.name == name }) else {
            let hint = nearest(name, among: options.map(\.name)).map { " (did you mean --\($0)?)" } ?? ""
            throw UsageError("herald \(command): unknown option --\(name)\(hint); see herald \(command) --help")
        }
        if option.value == nil {
            if inline != nil { throw UsageError("herald \(command): --\(name) takes no value") }
            parsed.switches.insert(name)
            continue
        }
        let value: String
        if let inline {
            value = inline
        } else {
            guard index < arguments.count else {
                throw UsageError("herald \(command): --\(name) needs a value (\(option.value!))")
            }
            value = arguments[index]
            index += 1
        }
        if !option.repeatable, parsed.values[name] != nil {
            throw UsageError("herald \(command): --\(name) is given twice; give it once")
        }
        parsed.values[name, default: []].append(value)
    }
    return parsed
}

public func helpText(command: String, summary: String, usage: String, options: [Option], footer: String = "") -> String {
    var lines = [summary, "", "Usage: herald \(command) \(usage)", "", "Options:"]
    for option in options {
        var left = "  --\(option.name)"
        if let value = option.value { left += " \(value)" }
        var right = option.help
        if let defaultText = option.defaultText { right += " (default: \(defaultText))" }
        if option.repeatable { right += " Repeatable." }
        if let env = option.env { right += " [env \(env)]" }
        let pad = left.count < 30 ? String(repeating: " ", count: 30 - left.count) : "\n" + String(repeating: " ", count: 30)
        lines.append(left + pad + right)
    }
    lines.append("  --help                      Show this help.")
    if !footer.isEmpty { lines += ["", footer] }
    return lines.joined(separator: "\n")
}

