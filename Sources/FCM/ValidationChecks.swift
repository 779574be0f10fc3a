// The checks behind the rule kinds, hand-written (no regular expressions on the hot path). Each
// mirrors its PL/pgSQL twin in Sources/Queue/SQL/functions/ (validate_message.sql, _mv_*.sql) exactly; the agreement test
// runs both over the same cases.

/// A JSON number literal as PostgreSQL's `numeric` sees it: `jsonb` keeps numbers as `numeric`
/// and prints them in plain decimal notation, so descriptions and payload sizes use that form on
/// both sides (`1e3` is `1000`, `1.50` stays `1.50`, `-0` is `0`).
struct DecimalLiteral {
    var negative: Bool
    /// Every digit of the literal, integer and fraction parts together, as ASCII.
    var digits: [UInt8]
    /// Where the decimal point falls in `digits` once the exponent is applied.
    var point: Int
    /// Digits after the point in PostgreSQL's display: max(0, fraction digits - exponent).
    var scale: Int

    init?(_ literal: String) {
        var bytes = Array(literal.utf8)[...]
        negative = bytes.first == UInt8(ascii: "-")
        if negative { bytes = bytes.dropFirst() }
        var digits: [UInt8] = []
        var integerCount = 0
        var seenPoint = false
        var exponent = 0
        while let byte = bytes.first {
            if byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") {
                digits.append(byte)
                if !seenPoint { integerCount += 1 }
            } else if byte == UInt8(ascii: ".") && !seenPoint {
                seenPoint = true
            } else if byte == UInt8(ascii: "e") || byte == UInt8(ascii: "E") {
                bytes = bytes.dropFirst()
                var sign = 1
                if bytes.first == UInt8(ascii: "-") { sign = -1; bytes = bytes.dropFirst() }
                else if bytes.first == UInt8(ascii: "+") { bytes = bytes.dropFirst() }
                guard !bytes.isEmpty else { return nil }
                var magnitude = 0
                for digit in bytes {
                    guard digit >= UInt8(ascii: "0") && digit <= UInt8(ascii: "9") else { return nil }
                    // Beyond what numeric can hold; clamping keeps the arithmetic finite.
                    magnitude = Swift.min(magnitude * 10 + Int(digit - UInt8(ascii: "0")), 1_000_000)
                }
                exponent = sign * magnitude
                bytes = bytes[bytes.endIndex...]
                break
            } else {
                return nil
            }
            bytes = bytes.dropFirst()
        }
        guard !digits.isEmpty else { return nil }
        self.digits = digits
        point = integerCount + exponent
        scale = Swift.max(0, digits.count - integerCount - exponent)
        if !digits.contains(where: { $0 != UInt8(ascii: "0") }) { negative = false }
    }

    /// Whether the value is a whole number (`1.0` and `1e3` are; `1.5` is not).
    var isIntegral: Bool {
        let start = Swift.max(0, point)
        guard start < digits.count else { return true }
        return !digits[start...].contains(where: { $0 != UInt8(ascii: "0") })
    }

    /// Significant digits before the point (at least one).
    private var integerDigits: ArraySlice<UInt8> {
        let end = Swift.min(Swift.max(0, point), digits.count)
        var slice = digits[0..<end]
        while slice.first == UInt8(ascii: "0") { slice = slice.dropFirst() }
        return slice
    }

    private var integerLength: Int {
        let significant = integerDigits.count
        return significant == 0 ? 1 : significant + Swift.max(0, point - digits.count)
    }

    /// Length of the plain decimal text, without building it.
    var canonicalLength: Int {
        (negative ? 1 : 0) + integerLength + (scale > 0 ? 1 + scale : 0)
    }

    /// The plain decimal text, or its first `limit` characters followed by `ellipsis`.
    func canonicalText(limit: Int, ellipsis: String) -> String {
        var out: [UInt8] = []
        func emit(_ byte: UInt8) -> Bool {
            guard out.count < limit else { return false }
            out.append(byte)
            return true
        }
        func finish(truncated: Bool) -> String {
            String(decoding: out, as: UTF8.self) + (truncated ? ellipsis : "")
        }
        let total = canonicalLength
        if negative && !emit(UInt8(ascii: "-")) { return finish(truncated: true) }
        let integer = integerDigits
        if integer.isEmpty {
            if !emit(UInt8(ascii: "0")) { return finish(truncated: true) }
        } else {
            for digit in integer where !emit(digit) { return finish(truncated: true) }
            if point > digits.count {
                for _ in 0..<(point - digits.count) where !emit(UInt8(ascii: "0")) { return finish(truncated: true) }
            }
        }
        if scale > 0 {
            if !emit(UInt8(ascii: ".")) { return finish(truncated: true) }
            for i in 0..<scale {
                let index = point + i
                let digit = index >= 0 && index < digits.count ? digits[index] : UInt8(ascii: "0")
                if !emit(digit) { return finish(truncated: true) }
            }
        }
        return finish(truncated: out.count < total)
    }
}

enum Text {
    /// `s` as a JSON string literal, escaped exactly as PostgreSQL's `to_json(text)` does, so the
    /// Swift and SQL descriptions of a value are the same bytes.
    static func quote(_ s: String) -> String {
        var out: [UInt8] = [UInt8(ascii: "\"")]
        out.reserveCapacity(s.utf8.count + 2)
        let hex = Array("0123456789abcdef".utf8)
        for byte in s.utf8 {
            switch byte {
            case 0x08: out += [0x5C, UInt8(ascii: "b")]
            case 0x0C: out += [0x5C, UInt8(ascii: "f")]
            case 0x0A: out += [0x5C, UInt8(ascii: "n")]
            case 0x0D: out += [0x5C, UInt8(ascii: "r")]
            case 0x09: out += [0x5C, UInt8(ascii: "t")]
            case 0x22: out += [0x5C, 0x22]
            case 0x5C: out += [0x5C, 0x5C]
            case 0..<0x20: out += [0x5C, UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"), hex[Int(byte >> 4)], hex[Int(byte & 0xF)]]
            default: out.append(byte)
            }
        }
        out.append(UInt8(ascii: "\""))
        return String(decoding: out, as: UTF8.self)
    }

    /// The first `limit` Unicode scalars of `s` (PostgreSQL counts characters the same way in a
    /// UTF-8 database), with `ellipsis` appended when something was cut.
    static func truncate(_ s: String, limit: Int, ellipsis: String) -> String {
        let scalars = s.unicodeScalars
        guard scalars.count > limit else { return s }
        var view = String.UnicodeScalarView()
        view.append(contentsOf: scalars.prefix(limit))
        return String(view) + ellipsis
    }

    /// Replaces each `{name}` of `template` with `values[name]` in one pass, so a value that
    /// itself contains `{...}` is never expanded again. Unknown names stay as written.
    static func fill(_ template: String, _ values: [(String, String)]) -> String {
        var out = ""
        var rest = Substring(template)
        while let open = rest.firstIndex(of: "{") {
            let afterOpen = rest.index(after: open)
            guard let close = rest[afterOpen...].firstIndex(of: "}") else { break }
            out += rest[..<open]
            let name = rest[afterOpen..<close]
            if let value = values.first(where: { $0.0 == name })?.1 {
                out += value
            } else {
                out += rest[open...close]
            }
            rest = rest[rest.index(after: close)...]
        }
        out += rest
        return out
    }

    /// Byte equality, as PostgreSQL compares. Swift's `==` applies Unicode canonical
    /// equivalence, but the rule side is always ASCII (checked when the rules compile), and a
    /// string canonically equal to an ASCII string of the same UTF-8 length is that string.
    @inline(__always) static func same(_ a: String, _ b: String) -> Bool {
        a.utf8.count == b.utf8.count && a == b
    }

    static func hasPrefix(_ s: String, _ prefix: String) -> Bool {
        var s = s, prefix = prefix
        return s.withUTF8 { text in
            prefix.withUTF8 { start in
                guard start.count <= text.count else { return false }
                for index in 0..<start.count where text[index] != start[index] { return false }
                return true
            }
        }
    }

    /// Byte order of the UTF-8 encodings: PostgreSQL's `COLLATE "C"` on a UTF-8 database.
    static func byteOrder(_ a: String, _ b: String) -> Bool {
        a.utf8.lexicographicallyPrecedes(b.utf8)
    }
}

enum Checks {
    enum DurationProblem { case format, range }

    /// A protobuf JSON duration `^[0-9]+(\.[0-9]{1,9})?s$` no longer than `max` seconds.
    static func duration(_ s: String, max: Int) -> DurationProblem? {
        var s = s
        return s.withUTF8 { bytes -> DurationProblem? in
            let n = bytes.count
            guard n >= 2, bytes[n - 1] == UInt8(ascii: "s") else { return .format }
            var i = 0
            var whole = 0
            var overflow = false
            while i < n - 1, isDigit(bytes[i]) {
                if !overflow {
                    let (product, o1) = whole.multipliedReportingOverflow(by: 10)
                    let (sum, o2) = product.addingReportingOverflow(Int(bytes[i] - UInt8(ascii: "0")))
                    if o1 || o2 { overflow = true } else { whole = sum }
                }
                i += 1
            }
            guard i > 0 else { return .format }
            var fractionNonZero = false
            if i < n - 1 {
                guard bytes[i] == UInt8(ascii: ".") else { return .format }
                i += 1
                let start = i
                while i < n - 1, isDigit(bytes[i]) {
                    if bytes[i] != UInt8(ascii: "0") { fractionNonZero = true }
                    i += 1
                }
                let count = i - start
                guard count >= 1, count <= 9, i == n - 1 else { return .format }
            }
            if overflow || whole > max || (whole == max && fractionNonZero) { return .range }
            return nil
        }
    }

    /// `#rrggbb` with hexadecimal digits of either case.
    static func isColor(_ s: String) -> Bool {
        var s = s
        return s.withUTF8 { bytes in
            guard bytes.count == 7, bytes[0] == UInt8(ascii: "#") else { return false }
            for byte in bytes[1...] {
                switch byte {
                case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "f"),
                     UInt8(ascii: "A")...UInt8(ascii: "F"): continue
                default: return false
                }
            }
            return true
        }
    }

    /// `https://` (scheme in any case), a non-empty host part before the first `/`, `?` or `#`,
    /// and no space or control character anywhere.
    static func isHTTPSURL(_ s: String) -> Bool {
        var s = s
        return s.withUTF8 { bytes in
            guard bytes.count > 8 else { return false }
            let scheme = Array("https://".utf8)
            for i in 0..<8 {
                let byte = bytes[i]
                let lower = byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") ? byte + 32 : byte
                guard lower == scheme[i] else { return false }
            }
            switch bytes[8] {
            case UInt8(ascii: "/"), UInt8(ascii: "?"), UInt8(ascii: "#"): return false
            default: break
            }
            for byte in bytes where byte <= 0x20 || byte == 0x7F { return false }
            return true
        }
    }

    @inline(__always) static func isDigit(_ byte: UInt8) -> Bool {
        byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")
    }
}

/// Checks an FCM topic condition such as `'dogs' in topics && !('cats' in topics)`.
///
/// The language is: operands `'name' in topics`, prefix `!`, infix `&&` and `||`, parentheses,
/// whitespace (space, tab, CR, LF) between tokens. Precedence does not matter for validity, so
/// a left-to-right automaton (expecting an operand or an operator) with a stack of open
/// parentheses decides it, and names the first offending position (1-based, in characters).
enum ConditionChecker {
    enum Problem: Equatable {
        case empty
        /// `position` nil means the end of the condition.
        case operand(position: Int?)
        case unterminated(position: Int)
        case topic(name: String, position: Int)
        case inTopics(position: Int?)
        case `operator`(position: Int?)
        case unmatched(position: Int)
        case unclosed(position: Int)
        case tooManyTopics(position: Int)
    }

    static func check(_ condition: String, maxTopics: Int, charset: Charset) -> Problem? {
        let chars = Array(condition.unicodeScalars)
        let n = chars.count
        var i = 0
        func skipSpace() {
            while i < n, chars[i] == " " || chars[i] == "\t" || chars[i] == "\n" || chars[i] == "\r" { i += 1 }
        }
        func isWordCharacter(_ c: Unicode.Scalar) -> Bool {
            (c >= "a" && c <= "z") || (c >= "A" && c <= "Z") || (c >= "0" && c <= "9") || c == "_"
        }
        /// Reads the word at `i` (maybe empty) without moving.
        func word() -> String {
            var j = i
            while j < n, isWordCharacter(chars[j]) { j += 1 }
            var view = String.UnicodeScalarView()
            view.append(contentsOf: chars[i..<j])
            return String(view)
        }
        skipSpace()
        if i == n { return .empty }
        var expectOperand = true
        var open: [Int] = []
        var topics = 0
        while true {
            skipSpace()
            if i == n { break }
            let c = chars[i]
            if expectOperand {
                if c == "!" { i += 1; continue }
                if c == "(" { open.append(i + 1); i += 1; continue }
                guard c == "'" else { return .operand(position: i + 1) }
                let start = i
                var close = i + 1
                while close < n, chars[close] != "'" { close += 1 }
                guard close < n else { return .unterminated(position: start + 1) }
                var view = String.UnicodeScalarView()
                view.append(contentsOf: chars[(start + 1)..<close])
                let name = String(view)
                guard !name.isEmpty, charset.containsAll(name) else { return .topic(name: name, position: start + 1) }
                topics += 1
                if topics > maxTopics { return .tooManyTopics(position: start + 1) }
                i = close + 1
                skipSpace()
                guard word() == "in" else { return .inTopics(position: i < n ? i + 1 : nil) }
                i += 2
                skipSpace()
                guard word() == "topics" else { return .inTopics(position: i < n ? i + 1 : nil) }
                i += 6
                expectOperand = false
            } else {
                if (c == "&" || c == "|"), i + 1 < n, chars[i + 1] == c {
                    i += 2
                    expectOperand = true
                    continue
                }
                if c == ")" {
                    guard !open.isEmpty else { return .unmatched(position: i + 1) }
                    open.removeLast()
                    i += 1
                    continue
                }
                return .operator(position: i + 1)
            }
        }
        if expectOperand { return .operand(position: nil) }
        if let last = open.last { return .unclosed(position: last) }
        return nil
    }
}

/// The member names of a closed object, and the nearest of them to a name that is not one.
/// A class: a rule's check hands it over with one retain instead of one per list.
final class KnownFields: Sendable {
    let names: [String]
    /// Every name's UTF-8 bytes, one after another, and where each one ends: a name is found by
    /// comparing lengths and bytes, which for a dozen names costs less than hashing the key.
    private let bytes: [UInt8]
    private let ends: [Int]
    /// Each name's Unicode scalars, ASCII letters in lower case, for suggestions.
    private let folded: [[Unicode.Scalar]]

    init(_ names: [String]) {
        self.names = names
        bytes = names.flatMap { Array($0.utf8) }
        var end = 0
        ends = names.map { name in
            end += name.utf8.count
            return end
        }
        folded = names.map(Self.fold)
    }

    /// Whether `key` is one of the names, byte for byte.
    func contains(_ key: String) -> Bool {
        var key = key
        return key.withUTF8 { wanted in
            bytes.withUnsafeBufferPointer { all in
                var start = 0
                for end in ends {
                    defer { start = end }
                    guard end - start == wanted.count else { continue }
                    var offset = 0
                    while offset < wanted.count && all[start + offset] == wanted[offset] { offset += 1 }
                    if offset == wanted.count { return true }
                }
                return false
            }
        }
    }

    /// The known name nearest to `key` if it is close enough to be the one meant (see
    /// message-rules.json's `about`), else nil.
    func suggestion(for key: String) -> String? {
        // A lowerCamelCase name (proto JSON's spelling) whose snake_case form is known: that form,
        // however many words it has (`useAsV1DataMessage` is 4 edits from `use_as_v1_data_message`).
        let snake = Self.snakeCased(key)
        if snake != key, contains(snake) { return snake }
        let typed = Self.fold(key)
        var best: (distance: Int, index: Int)? = nil
        for (index, name) in folded.enumerated() {
            let limit = name.count <= 3 ? 1 : name.count <= 6 ? 2 : 3
            guard abs(typed.count - name.count) <= limit else { continue }
            let distance = Self.distance(typed, name)
            if distance <= limit, distance < (best?.distance ?? Int.max) { best = (distance, index) }
        }
        return best.map { names[$0.index] }
    }

    /// `useAsV1DataMessage` as `use_as_v1_data_message`: each ASCII capital after the first
    /// character becomes `_` and its lower case, a first one only its lower case; digits and
    /// everything else stay. The SQL validator's `_mv_suggest` does the same.
    static func snakeCased(_ key: String) -> String {
        var out = ""
        for (offset, scalar) in key.unicodeScalars.enumerated() {
            if scalar >= "A" && scalar <= "Z" {
                if offset > 0 { out.unicodeScalars.append("_") }
                out.unicodeScalars.append(Unicode.Scalar(scalar.value + 32)!)
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    static func fold(_ s: String) -> [Unicode.Scalar] {
        s.unicodeScalars.map { $0 >= "A" && $0 <= "Z" ? Unicode.Scalar($0.value + 32)! : $0 }
    }

    /// Edits between `a` and `b`: insertions, deletions, substitutions and swaps of two
    /// adjacent characters (the optimal string alignment distance).
    static func distance(_ a: [Unicode.Scalar], _ b: [Unicode.Scalar]) -> Int {
        let n = a.count, m = b.count
        if n == 0 { return m }
        if m == 0 { return n }
        var previous2 = [Int](repeating: 0, count: m + 1)
        var previous = Array(0...m)
        var current = [Int](repeating: 0, count: m + 1)
        for i in 1...n {
            current[0] = i
            for j in 1...m {
                let cost = a[i - 1] == b[j - 1] ? 0 : 1
                var best = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost)
                if i > 1, j > 1, a[i - 1] == b[j - 2], a[i - 2] == b[j - 1] {
                    best = min(best, previous2[j - 2] + 1)
                }
                current[j] = best
            }
            (previous2, previous, current) = (previous, current, previous2)
        }
        return previous[m]
    }
}
