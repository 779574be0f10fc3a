import CLibPQ
import Foundation

/// A connection string (DATABASE_URL, `--database-url`) as libpq parses it, and the only form of
/// it Herald prints: rebuilt from what was parsed, with the password masked. A string that is not
/// a well-formed `postgresql://` / `postgres://` URL or `keyword=value` list is refused without
/// being echoed, by Herald or by libpq: libpq takes any other string as a database name, and a
/// scheme with a slip (`postgres//u:pw@h/db`, `postgersql://...`) would come back in its
/// "database ... does not exist" with the password in it.
public struct ConnectionString: Sendable {
    /// The keywords the string gives and their values, as libpq parsed them (percent-decoded).
    public let keywords: [(String, String)]

    /// What a valid one looks like, for messages.
    public static let examples = "postgresql://USER:PASSWORD@HOST:5432/DBNAME (a password holding @ / : ? # or a space percent-encoded: @ is %40) or keyword=value pairs such as host=HOST port=5432 dbname=DBNAME user=USER password=PASSWORD"

    public struct Malformed: Error, CustomStringConvertible, Sendable {
        /// What is wrong, naming no part of the string.
        public let problem: String
        public var description: String {
            "DATABASE_URL (--database-url) is not a well-formed PostgreSQL connection string: \(problem); it is not shown, as it may hold a password. Give \(ConnectionString.examples)"
        }
    }

    public static func parse(_ text: String) throws(Malformed) -> ConnectionString {
        if text.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) {
            throw Malformed(problem: "it holds a control character (a line break or tab?)")
        }
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        // libpq's own test: these two prefixes exactly; anything else with no = is a database name.
        let isURL = trimmed.hasPrefix("postgresql://") || trimmed.hasPrefix("postgres://")
        if !isURL && !trimmed.isEmpty && !trimmed.contains("=") {
            let lowered = trimmed.lowercased()
            if lowered.hasPrefix("postgres") || lowered.hasPrefix("pg") || lowered.contains("://") || lowered.contains("@") {
                throw Malformed(problem: "it starts like a URL, but not with postgresql:// or postgres:// (a missing colon or slash, a misspelt or capitalised scheme?)")
            }
            throw Malformed(problem: "it is neither a postgresql:// URL nor keyword=value pairs")
        }
        var keywords: [(String, String)] = []
        var failed = false
        trimmed.withCString { pointer in
            var error: UnsafeMutablePointer<CChar>? = nil
            guard let options = PQconninfoParse(pointer, &error) else {
                // libpq's message quotes the string; it is dropped unread.
                if let error { PQfreemem(error) }
                failed = true
                return
            }
            defer { PQconninfoFree(options) }
            var index = 0
            while let name = options[index].keyword {
                if let value = options[index].val { keywords.append((String(cString: name), String(cString: value))) }
                index += 1
            }
        }
        if failed {
            throw Malformed(problem: isURL ? "libpq cannot parse it as a URL (an unknown or misspelt query parameter, a bad percent-encoding?)"
                                           : "libpq cannot parse it as keyword=value pairs (a word without =, an unknown keyword, an unterminated quote?)")
        }
        let parsed = ConnectionString(keywords: keywords)
        // A password holding an unencoded @ or / spills into the host, port or database name,
        // which messages would show; such a string is refused instead.
        for name in ["host", "hostaddr", "dbname"] {
            if let value = parsed.value(name), value.contains("@") || value.contains("://") {
                throw Malformed(problem: "its \(name == "dbname" ? "database name" : name) holds an @ or ://, as when a password holding @ or / is not percent-encoded")
            }
        }
        if let port = parsed.value("port"), !port.allSatisfy({ $0.isASCII && ($0.isNumber || $0 == ",") }) {
            throw Malformed(problem: "its port is not a number (a password holding / or : not percent-encoded?)")
        }
        return parsed
    }

    init(keywords: [(String, String)]) { self.keywords = keywords }

    public func value(_ keyword: String) -> String? { keywords.last(where: { $0.0 == keyword })?.1 }

    public var password: String? { value("password") }

    /// `postgresql://user:***@host:port/dbname`: what was parsed, the password masked, in URL form
    /// whichever form was given (other keywords left out).
    public var display: String {
        let allowed = CharacterSet.alphanumerics.union(CharacterSet(charactersIn: "-._~"))
        func encoded(_ text: String) -> String { text.addingPercentEncoding(withAllowedCharacters: allowed) ?? "" }
        var result = "postgresql://"
        if let user = value("user") {
            result += encoded(user) + (password != nil ? ":***" : "") + "@"
        } else if password != nil {
            result += ":***@"
        }
        let host = value("host") ?? value("hostaddr") ?? ""
        let socket = host.hasPrefix("/")
        if !socket {
            result += host.split(separator: ",", omittingEmptySubsequences: false).map { part in
                part.contains(":") ? "[\(part)]" : String(part)
            }.joined(separator: ",")
            if let port = value("port") { result += ":" + port }
        }
        result += "/" + (value("dbname").map(encoded) ?? "")
        if socket { result += "?host=" + encoded(host) + (value("port").map { "&port=" + $0 } ?? "") }
        return result
    }

    /// The form to print of a connection string that may be malformed: `display`, or a note that
    /// it is not shown.
    public static func shown(_ text: String) -> String {
        (try? parse(text))?.display ?? "(DATABASE_URL, not shown: not a well-formed connection string)"
    }
}
