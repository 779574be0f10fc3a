/// Why a text is not JSON, and where.
public struct JSONParseError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Byte offset of the problem in the input.
    public var offset: Int
    public var reason: String
    public var description: String { "invalid JSON at byte \(offset): \(reason)" }
}

extension JSONValue {
    /// Parses one JSON document (RFC 8259). Nesting deeper than `maxDepth` is refused so hostile
    /// input cannot exhaust the stack.
    public static func parse(_ text: String, maxDepth: Int = 128) throws(JSONParseError) -> JSONValue {
        var text = text
        let result = text.withUTF8 { bytes in
            Result { () throws(JSONParseError) -> JSONValue in try parse(bytes: UnsafeRawBufferPointer(bytes), maxDepth: maxDepth) }
        }
        return try result.get()
    }

    public static func parse(_ bytes: [UInt8], maxDepth: Int = 128) throws(JSONParseError) -> JSONValue {
        let result = bytes.withUnsafeBytes { raw in
            Result { () throws(JSONParseError) -> JSONValue in try parse(bytes: raw, maxDepth: maxDepth) }
        }
        return try result.get()
    }

    public static func parse(bytes: UnsafeRawBufferPointer, maxDepth: Int = 128) throws(JSONParseError) -> JSONValue {
        var parser = Parser(bytes: bytes, maxDepth: maxDepth)
        parser.skipSpace()
        let value = try parser.parseValue(depth: 0)
        parser.skipSpace()
        guard parser.index == bytes.count else { throw parser.fail("unexpected text after the document") }
        return value
    }
}

private struct Parser {
    let bytes: UnsafeRawBufferPointer
    let maxDepth: Int
    var index = 0

    init(bytes: UnsafeRawBufferPointer, maxDepth: Int) {
        self.bytes = bytes
        self.maxDepth = maxDepth
    }

    func fail(_ reason: String) -> JSONParseError { JSONParseError(offset: index, reason: reason) }

    @inline(__always) var current: UInt8? { index < bytes.count ? bytes[index] : nil }

    mutating func skipSpace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x09, 0x0A, 0x0D: index += 1
            default: return
            }
        }
    }

    mutating func parseValue(depth: Int) throws(JSONParseError) -> JSONValue {
        guard let byte = current else { throw fail("unexpected end of input") }
        switch byte {
        case UInt8(ascii: "{"):
            guard depth < maxDepth else { throw fail("nested deeper than \(maxDepth) levels") }
            return .object(try parseObject(depth: depth + 1))
        case UInt8(ascii: "["):
            guard depth < maxDepth else { throw fail("nested deeper than \(maxDepth) levels") }
            return .array(try parseArray(depth: depth + 1))
        case UInt8(ascii: "\""):
            return .string(try parseString())
        case UInt8(ascii: "t"):
            try expectWord("true")
            return .bool(true)
        case UInt8(ascii: "f"):
            try expectWord("false")
            return .bool(false)
        case UInt8(ascii: "n"):
            try expectWord("null")
            return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            return .number(try parseNumber())
        default:
            throw fail("unexpected character '\(Character(Unicode.Scalar(byte)))'")
        }
    }

    mutating func expectWord(_ word: StaticString) throws(JSONParseError) {
        let count = word.utf8CodeUnitCount
        guard index + count <= bytes.count else { throw fail("unexpected end of input") }
        let start = word.utf8Start
        for offset in 0..<count where bytes[index + offset] != start[offset] {
            throw fail("expected '\(word)'")
        }
        index += count
    }

    mutating func parseObject(depth: Int) throws(JSONParseError) -> JSONObject {
        index += 1  // {
        var members: [JSONObject.Member] = []
        skipSpace()
        if current == UInt8(ascii: "}") {
            index += 1
            return JSONObject(members)
        }
        // Room for the few members most objects of a message have, in one allocation instead of
        // one per doubling.
        members.reserveCapacity(4)
        while true {
            skipSpace()
            guard current == UInt8(ascii: "\"") else { throw fail("expected a member name in quotes") }
            let key = try parseString()
            skipSpace()
            guard current == UInt8(ascii: ":") else { throw fail("expected ':' after a member name") }
            index += 1
            skipSpace()
            let value = try parseValue(depth: depth)
            members.append(JSONObject.Member(key: key, value: value))
            skipSpace()
            switch current {
            case UInt8(ascii: ","): index += 1
            case UInt8(ascii: "}"):
                index += 1
                return JSONObject(members)
            default: throw fail("expected ',' or '}' in an object")
            }
        }
    }

    mutating func parseArray(depth: Int) throws(JSONParseError) -> [JSONValue] {
        index += 1  // [
        var elements: [JSONValue] = []
        skipSpace()
        if current == UInt8(ascii: "]") {
            index += 1
            return elements
        }
        while true {
            skipSpace()
            elements.append(try parseValue(depth: depth))
            skipSpace()
            switch current {
            case UInt8(ascii: ","): index += 1
            case UInt8(ascii: "]"):
                index += 1
                return elements
            default: throw fail("expected ',' or ']' in an array")
            }
        }
    }

    mutating func parseNumber() throws(JSONParseError) -> String {
        let start = index
        if current == UInt8(ascii: "-") { index += 1 }
        guard let first = current, isDigit(first) else { throw fail("expected a digit") }
        if first == UInt8(ascii: "0") {
            index += 1
            if let next = current, isDigit(next) { throw fail("a number may not start with 0") }
        } else {
            while let c = current, isDigit(c) { index += 1 }
        }
        if current == UInt8(ascii: ".") {
            index += 1
            guard let c = current, isDigit(c) else { throw fail("expected a digit after '.'") }
            while let c = current, isDigit(c) { index += 1 }
        }
        if current == UInt8(ascii: "e") || current == UInt8(ascii: "E") {
            index += 1
            if current == UInt8(ascii: "+") || current == UInt8(ascii: "-") { index += 1 }
            guard let c = current, isDigit(c) else { throw fail("expected a digit in the exponent") }
            while let c = current, isDigit(c) { index += 1 }
        }
        return String(decoding: UnsafeRawBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
    }

    @inline(__always) func isDigit(_ c: UInt8) -> Bool { c >= UInt8(ascii: "0") && c <= UInt8(ascii: "9") }

    mutating func parseString() throws(JSONParseError) -> String {
        index += 1  // opening quote
        let start = index
        // Fast path: no escapes, the bytes are the string.
        var highBits: UInt8 = 0
        while index < bytes.count {
            let c = bytes[index]
            if c == UInt8(ascii: "\"") {
                let slice = UnsafeRawBufferPointer(rebasing: bytes[start..<index])
                index += 1
                if highBits & 0x80 == 0 {
                    // ASCII needs no validation; one memcpy skips the generic decoding path.
                    return String(unsafeUninitializedCapacity: slice.count) { buffer in
                        if let source = slice.baseAddress, let target = buffer.baseAddress {
                            UnsafeMutableRawPointer(target).copyMemory(from: source, byteCount: slice.count)
                        }
                        return slice.count
                    }
                }
                guard let s = String(validating: slice, as: UTF8.self) else {
                    throw JSONParseError(offset: start, reason: "string is not valid UTF-8")
                }
                return s
            }
            highBits |= c
            if c == UInt8(ascii: "\\") { break }
            if c < 0x20 { throw fail("control character in a string") }
            index += 1
        }
        var buffer = Array(UnsafeRawBufferPointer(rebasing: bytes[start..<index]))
        while true {
            guard let c = current else { throw fail("unterminated string") }
            switch c {
            case UInt8(ascii: "\""):
                index += 1
                guard let s = String(validating: buffer, as: UTF8.self) else {
                    throw JSONParseError(offset: start, reason: "string is not valid UTF-8")
                }
                return s
            case UInt8(ascii: "\\"):
                index += 1
                guard let e = current else { throw fail("unterminated escape") }
                index += 1
                switch e {
                case UInt8(ascii: "\""): buffer.append(0x22)
                case UInt8(ascii: "\\"): buffer.append(0x5C)
                case UInt8(ascii: "/"): buffer.append(0x2F)
                case UInt8(ascii: "b"): buffer.append(0x08)
                case UInt8(ascii: "f"): buffer.append(0x0C)
                case UInt8(ascii: "n"): buffer.append(0x0A)
                case UInt8(ascii: "r"): buffer.append(0x0D)
                case UInt8(ascii: "t"): buffer.append(0x09)
                case UInt8(ascii: "u"):
                    var scalar = try parseHex4()
                    if (0xD800...0xDBFF).contains(scalar) {
                        guard current == UInt8(ascii: "\\"), index + 1 < bytes.count, bytes[index + 1] == UInt8(ascii: "u")
                        else { throw fail("lone surrogate in \\u escape") }
                        index += 2
                        let low = try parseHex4()
                        guard (0xDC00...0xDFFF).contains(low) else { throw fail("invalid surrogate pair") }
                        scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                    } else if (0xDC00...0xDFFF).contains(scalar) {
                        throw fail("lone surrogate in \\u escape")
                    }
                    guard let unicode = Unicode.Scalar(scalar) else { throw fail("invalid \\u escape") }
                    buffer.append(contentsOf: UTF8.encode(unicode)!)
                default:
                    throw fail("unknown escape '\\\(Character(Unicode.Scalar(e)))'")
                }
            default:
                if c < 0x20 { throw fail("control character in a string") }
                buffer.append(c)
                index += 1
            }
        }
    }

    mutating func parseHex4() throws(JSONParseError) -> UInt32 {
        guard index + 4 <= bytes.count else { throw fail("short \\u escape") }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let c = bytes[index]
            let digit: UInt32
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = UInt32(c - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = UInt32(c - UInt8(ascii: "a") + 10)
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = UInt32(c - UInt8(ascii: "A") + 10)
            default: throw fail("invalid hex digit in \\u escape")
            }
            value = value << 4 | digit
            index += 1
        }
        return value
    }
}
