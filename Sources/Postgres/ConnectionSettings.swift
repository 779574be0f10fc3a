/// What every connection Herald opens asks of libpq and of the server, so a network path that
/// goes silent (packets dropped, no reset: a partition, a NAT or firewall that forgot the flow)
/// is noticed in about 30 seconds instead of the kernel's default of two hours.
///
/// Any of these set in DATABASE_URL wins: `?keepalives_idle=60&tcp_user_timeout=0`, or for the
/// server's side `?options=-c%20tcp_keepalives_idle%3D60` (a setting named in `options` is not
/// sent again).
public enum ConnectionDefaults {
    /// libpq keywords, given before the connection string (which overrides them): give up on a
    /// connection attempt after 10 s; probe an idle connection after 10 s, every 5 s, 3 times;
    /// drop the connection when sent data stays unacknowledged for 25 s.
    public static let client: [(String, String)] = [
        ("connect_timeout", "10"),
        ("keepalives", "1"),
        ("keepalives_idle", "10"),
        ("keepalives_interval", "5"),
        ("keepalives_count", "3"),
        ("tcp_user_timeout", "25000"),
    ]

    /// The keywords of `client` to give: all but `connect_timeout` when PGCONNECT_TIMEOUT is set
    /// (libpq reads the variable only for a keyword not given).
    public static func clientKeywords(environment: [String: String]) -> [(String, String)] {
        client.filter { !($0.0 == "connect_timeout" && environment["PGCONNECT_TIMEOUT"] != nil) }
    }

    /// The search_path of every connection Herald opens: only the system catalog and the
    /// session's own temporary schema, which no other role can create in. Herald's statements
    /// name every object of schema herald with its schema.
    public static let searchPath = ("search_path", "pg_catalog, pg_temp")

    /// Server settings for the session (SET after connecting): the backend probes the client the
    /// same way, so a client gone silent releases its backend, its locks and its transaction.
    public static let server: [(String, String)] = [
        ("tcp_keepalives_idle", "10"),
        ("tcp_keepalives_interval", "5"),
        ("tcp_keepalives_count", "3"),
        ("tcp_user_timeout", "25000"),
    ]
}

/// Passwords in connection strings, found without parsing: a string that libpq or Foundation
/// would refuse (`postgresql://u:pw@host:notaport/db`, an unterminated quote) is masked too.
public enum ConnectionSecrets {
    static let mask = "***"

    /// `text` with every password of every connection string in it replaced by `***`:
    /// - in a URL (`scheme://`), what lies between the first `:` of the user part and the last
    ///   `@` before the next space or quote (so a password holding `@`, `/` or `:` is covered);
    /// - after `password` and `=` (a URL's query or the keyword form, spaces allowed around
    ///   `=`), a single-quoted value (with `\'` escapes) or anything up to a space, `&` or quote.
    public static func mask(_ text: String) -> String {
        masking(masking(text, urlPasswordRanges), keywordPasswordRanges)
    }

    /// Every password `connectionString` holds, as written and percent-decoded (so a message
    /// that quotes one in either form can be masked).
    public static func passwords(in connectionString: String) -> [String] {
        let scalars = Array(connectionString.unicodeScalars)
        let found = urlPasswordRanges(scalars).map { String(String.UnicodeScalarView(scalars[$0])) }
            + keywordPasswordValues(connectionString)
        var result: [String] = []
        for secret in found where !secret.isEmpty {
            result.append(secret)
            if let decoded = secret.removingPercentEncodingLeniently(), decoded != secret { result.append(decoded) }
        }
        return result
    }

    // MARK: URL user parts

    private static func isURLEnd(_ scalar: Unicode.Scalar) -> Bool {
        scalar == " " || scalar == "\"" || scalar == "'" || scalar == "\n" || scalar == "\t" || scalar == "\r"
    }

    /// The ranges (in scalars) of the passwords of every `scheme://user:password@` in `scalars`.
    private static func urlPasswordRanges(_ scalars: [Unicode.Scalar]) -> [Range<Int>] {
        var ranges: [Range<Int>] = []
        var index = 0
        while index + 2 < scalars.count {
            guard scalars[index] == ":", scalars[index + 1] == "/", scalars[index + 2] == "/" else {
                index += 1
                continue
            }
            let start = index + 3
            var end = start
            while end < scalars.count && !isURLEnd(scalars[end]) { end += 1 }
            // The user part ends at the last @ of the URL; its password starts after its first :.
            if let at = (start..<end).last(where: { scalars[$0] == "@" }),
               let colon = (start..<at).first(where: { scalars[$0] == ":" }) {
                ranges.append((colon + 1)..<at)
            }
            index = max(end, start)
        }
        return ranges
    }

    // MARK: password= values

    /// For every `password` followed by `=` (spaces allowed around it): the range of its value.
    private static func keywordPasswordRanges(_ scalars: [Unicode.Scalar]) -> [Range<Int>] {
        let word = Array("password".unicodeScalars)
        var ranges: [Range<Int>] = []
        var index = 0
        while index + word.count <= scalars.count {
            // In any case: an ASCII capital compared as its small letter (no String per scalar).
            let matches = (0..<word.count).allSatisfy {
                let value = scalars[index + $0].value
                return (value >= 0x41 && value <= 0x5A ? value + 0x20 : value) == word[$0].value
            }
            guard matches else {
                index += 1
                continue
            }
            var cursor = index + word.count
            while cursor < scalars.count && scalars[cursor] == " " { cursor += 1 }
            guard cursor < scalars.count, scalars[cursor] == "=" else {
                index += word.count
                continue
            }
            cursor += 1
            while cursor < scalars.count && scalars[cursor] == " " { cursor += 1 }
            let start = cursor
            if cursor < scalars.count && scalars[cursor] == "'" {
                cursor += 1
                while cursor < scalars.count && scalars[cursor] != "'" {
                    cursor += scalars[cursor] == "\\" ? 2 : 1
                }
                cursor = min(scalars.count, cursor + 1)
            } else {
                while cursor < scalars.count && !isURLEnd(scalars[cursor]) && scalars[cursor] != "&" { cursor += 1 }
            }
            if cursor > start { ranges.append(start..<cursor) }
            index = max(cursor, index + word.count)
        }
        return ranges
    }

    private static func keywordPasswordValues(_ text: String) -> [String] {
        let scalars = Array(text.unicodeScalars)
        return keywordPasswordRanges(scalars).map { range in
            var value = String(String.UnicodeScalarView(scalars[range]))
            if value.hasPrefix("'") {
                value = String(value.dropFirst())
                if value.hasSuffix("'") { value = String(value.dropLast()) }
                value = value.replacingOccurrences(of: "\\'", with: "'").replacingOccurrences(of: "\\\\", with: "\\")
            }
            return value
        }
    }

    /// `text` with every range `find` reports in its scalars replaced by `***`.
    private static func masking(_ text: String, _ find: ([Unicode.Scalar]) -> [Range<Int>]) -> String {
        let scalars = Array(text.unicodeScalars)
        let ranges = find(scalars)
        guard !ranges.isEmpty else { return text }
        var result = String.UnicodeScalarView()
        var position = 0
        for range in ranges {
            result.append(contentsOf: scalars[position..<range.lowerBound])
            result.append(contentsOf: mask.unicodeScalars)
            position = range.upperBound
        }
        result.append(contentsOf: scalars[position...])
        return String(result)
    }
}

extension String {
    /// Percent-decoding that keeps a malformed escape as it is instead of failing.
    func removingPercentEncodingLeniently() -> String? {
        guard contains("%") else { return nil }
        var bytes: [UInt8] = []
        let utf8 = Array(self.utf8)
        var index = 0
        func hex(_ byte: UInt8) -> UInt8? {
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
            default: nil
            }
        }
        while index < utf8.count {
            if utf8[index] == UInt8(ascii: "%"), index + 2 < utf8.count, let high = hex(utf8[index + 1]), let low = hex(utf8[index + 2]) {
                bytes.append(high << 4 | low)
                index += 3
            } else {
                bytes.append(utf8[index])
                index += 1
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
