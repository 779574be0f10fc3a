extension JSONValue {
    /// Compact JSON text, members in their order, numbers as written.
    public var serialized: String {
        var out: [UInt8] = []
        out.reserveCapacity(256)
        write(into: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// Appends the compact JSON text of this value to `out`.
    public func write(into out: inout [UInt8]) {
        switch self {
        case .null: out.append(contentsOf: "null".utf8)
        case .bool(let b): out.append(contentsOf: (b ? "true" : "false").utf8)
        case .number(let n): out.append(contentsOf: n.utf8)
        case .string(let s): JSONValue.writeString(s, into: &out)
        case .array(let elements):
            out.append(UInt8(ascii: "["))
            for (i, element) in elements.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                element.write(into: &out)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let object):
            out.append(UInt8(ascii: "{"))
            for (i, member) in object.members.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                JSONValue.writeString(member.key, into: &out)
                out.append(UInt8(ascii: ":"))
                member.value.write(into: &out)
            }
            out.append(UInt8(ascii: "}"))
        }
    }

    /// Appends `s` as a quoted JSON string literal.
    public static func writeString(_ s: String, into out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        var s = s
        s.withUTF8 { appendEscaped($0, into: &out) }
        out.append(UInt8(ascii: "\""))
    }

    /// Appends UTF-8 text escaped for the inside of a JSON string. Runs of bytes that need no
    /// escape (nearly all of them) are copied whole rather than byte by byte, and are found
    /// eight bytes at a time.
    public static func appendEscaped(_ bytes: UnsafeBufferPointer<UInt8>, into out: inout [UInt8]) {
        guard let base = bytes.baseAddress else { return }
        let count = bytes.count
        var runStart = 0
        var index = 0
        while index < count {
            if index + 8 <= count, !mayNeedEscape(UnsafeRawPointer(base + index).loadUnaligned(as: UInt64.self)) {
                index += 8
                continue
            }
            let end = min(index + 8, count)
            while index < end {
                let byte = bytes[index]
                index += 1
                if byte >= 0x20 && byte != UInt8(ascii: "\"") && byte != UInt8(ascii: "\\") { continue }
                if runStart < index - 1 { out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[runStart..<(index - 1)])) }
                runStart = index
                switch byte {
                case UInt8(ascii: "\""): out.append(contentsOf: [0x5C, 0x22])
                case UInt8(ascii: "\\"): out.append(contentsOf: [0x5C, 0x5C])
                case 0x0A: out.append(contentsOf: [0x5C, UInt8(ascii: "n")])
                case 0x0D: out.append(contentsOf: [0x5C, UInt8(ascii: "r")])
                case 0x09: out.append(contentsOf: [0x5C, UInt8(ascii: "t")])
                default:
                    let hex: [UInt8] = Array("0123456789abcdef".utf8)
                    out.append(contentsOf: [0x5C, UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"),
                                            hex[Int(byte >> 4)], hex[Int(byte & 0xF)]])
                }
            }
        }
        if runStart < count { out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[runStart...])) }
    }

    /// Whether any of the eight bytes of `word` may be a control character, `"` or `\`: false
    /// means none is (the usual bit tricks for "some byte is zero" and "some byte is below n").
    @inline(__always) static func mayNeedEscape(_ word: UInt64) -> Bool {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let highs: UInt64 = 0x8080_8080_8080_8080
        let control = (word &- ones &* 0x20) & ~word & highs
        let quote = word ^ (ones &* 0x22)
        let backslash = word ^ (ones &* 0x5C)
        let quotes = (quote &- ones) & ~quote & highs
        let backslashes = (backslash &- ones) & ~backslash & highs
        return control | quotes | backslashes != 0
    }

    /// Appends the decimal digits of `number`, as `String(number)` spells them, without making a String.
    public static func writeInteger(_ number: Int, into out: inout [UInt8]) {
        if number < 0 { out.append(UInt8(ascii: "-")) }
        var magnitude = number.magnitude  // a UInt, so Int.min has one too
        var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)  // room for UInt.max's 20 digits
        withUnsafeMutableBytes(of: &digits) { buffer in
            var position = buffer.count
            repeat {
                position -= 1
                buffer[position] = UInt8(ascii: "0") + UInt8(magnitude % 10)
                magnitude /= 10
            } while magnitude > 0
            out.append(contentsOf: UnsafeRawBufferPointer(rebasing: buffer[position...]))
        }
    }

    /// `s` as a quoted JSON string literal.
    public static func quoted(_ s: String) -> String {
        var out: [UInt8] = []
        writeString(s, into: &out)
        return String(decoding: out, as: UTF8.self)
    }
}

extension JSONValue: CustomStringConvertible {
    public var description: String { serialized }
}
