/// An IPv4 or IPv6 address, read from text and judged: is it one a push to the public internet
/// may reach, or a loopback, private, link-local, unspecified, multicast or reserved one?
public enum IPAddress: Sendable, Hashable, CustomStringConvertible {
    case v4(UInt32)
    /// 16 bytes, network order.
    case v6([UInt8])

    /// Reads an address in its usual text: dotted decimal IPv4 (four numbers 0-255, no leading
    /// zeros) or IPv6 (RFC 4291, `::` once at most, a dotted IPv4 tail allowed, no zone). Nil for
    /// anything else, other spellings of IPv4 included (see `PushEndpoint` for those).
    public init?(_ text: String) {
        if let v4 = IPAddress.dottedDecimal(Substring(text)) {
            self = .v4(v4)
        } else if let v6 = IPAddress.ipv6(Substring(text)) {
            self = .v6(v6)
        } else {
            return nil
        }
    }

    public var description: String {
        switch self {
        case .v4(let value): return IPAddress.text(v4: value)
        case .v6(let bytes):
            // Hex groups with the longest run of two or more zero groups written as ::.
            var groups: [UInt16] = []
            for index in stride(from: 0, to: 16, by: 2) { groups.append(UInt16(bytes[index]) << 8 | UInt16(bytes[index + 1])) }
            var best = (start: -1, length: 0)
            var run = (start: -1, length: 0)
            for (index, group) in groups.enumerated() {
                if group == 0 {
                    if run.start < 0 { run = (index, 0) }
                    run.length += 1
                    if run.length > best.length { best = run }
                } else {
                    run = (-1, 0)
                }
            }
            func hex(_ slice: ArraySlice<UInt16>) -> String { slice.map { String($0, radix: 16) }.joined(separator: ":") }
            guard best.length >= 2 else { return hex(groups[...]) }
            return hex(groups[..<best.start]) + "::" + hex(groups[(best.start + best.length)...])
        }
    }

    /// Nil when the address is an ordinary public one; otherwise what it is, in words
    /// ("a loopback address (127.0.0.0/8)"). Addresses that carry an IPv4 address inside an IPv6
    /// one (IPv4-mapped, IPv4-compatible, NAT64, 6to4) are judged by the IPv4 address they carry.
    public var restriction: String? {
        switch self {
        case .v4(let value): return IPAddress.restriction(v4: value)
        case .v6(let b):
            let zeroPrefix = b[0..<10].allSatisfy { $0 == 0 }
            let embedded = UInt32(b[12]) << 24 | UInt32(b[13]) << 16 | UInt32(b[14]) << 8 | UInt32(b[15])
            if b.allSatisfy({ $0 == 0 }) { return "the unspecified address (::)" }
            if zeroPrefix && b[10] == 0 && b[11] == 0 && b[12...14].allSatisfy({ $0 == 0 }) && b[15] == 1 { return "the loopback address (::1)" }
            if zeroPrefix && b[10] == 0xFF && b[11] == 0xFF {
                return IPAddress.restriction(v4: embedded).map { "an IPv4-mapped address of \(IPAddress.text(v4: embedded)), \($0)" }
            }
            if zeroPrefix && b[10] == 0 && b[11] == 0 {
                return IPAddress.restriction(v4: embedded).map { "an IPv4-compatible address of \(IPAddress.text(v4: embedded)), \($0)" }
                    ?? "an IPv4-compatible address (::/96, deprecated)"
            }
            if b[0] == 0x00 && b[1] == 0x64 && b[2] == 0xFF && b[3] == 0x9B {
                if b[4...11].allSatisfy({ $0 == 0 }) {
                    return IPAddress.restriction(v4: embedded).map { "a NAT64 address of \(IPAddress.text(v4: embedded)), \($0)" }
                }
                if b[4] == 0 && b[5] == 1 { return "a local-use NAT64 address (64:ff9b:1::/48)" }
            }
            if b[0] == 0x20 && b[1] == 0x02 {
                let carried = UInt32(b[2]) << 24 | UInt32(b[3]) << 16 | UInt32(b[4]) << 8 | UInt32(b[5])
                return IPAddress.restriction(v4: carried).map { "a 6to4 address of \(IPAddress.text(v4: carried)), \($0)" }
            }
            if b[0] == 0x20 && b[1] == 0x01 && b[2] == 0 && b[3] == 0 { return "a Teredo tunnel address (2001::/32)" }
            if b[0] & 0xFE == 0xFC { return "a unique local (private) address (fc00::/7)" }
            if b[0] == 0xFE && b[1] & 0xC0 == 0x80 { return "a link-local address (fe80::/10)" }
            if b[0] == 0xFE && b[1] & 0xC0 == 0xC0 { return "a site-local (private) address (fec0::/10)" }
            if b[0] == 0xFF { return "a multicast address (ff00::/8)" }
            if b[0] == 0x01 && b[1] == 0 && b[2...7].allSatisfy({ $0 == 0 }) { return "a discard-only address (100::/64)" }
            return nil
        }
    }

    static func restriction(v4 value: UInt32) -> String? {
        func within(_ network: UInt32, _ bits: UInt32) -> Bool { value >> (32 - bits) == network >> (32 - bits) }
        if within(0x0000_0000, 8) { return "an unspecified address (0.0.0.0/8)" }
        if within(0x7F00_0000, 8) { return "a loopback address (127.0.0.0/8)" }
        if within(0x0A00_0000, 8) { return "a private address (10.0.0.0/8)" }
        if within(0xAC10_0000, 12) { return "a private address (172.16.0.0/12)" }
        if within(0xC0A8_0000, 16) { return "a private address (192.168.0.0/16)" }
        if within(0x6440_0000, 10) { return "a shared (carrier-grade NAT) address (100.64.0.0/10)" }
        if within(0xA9FE_0000, 16) { return "a link-local address (169.254.0.0/16)" }
        if within(0xC000_0000, 24) { return "a reserved address (192.0.0.0/24)" }
        if within(0xC612_0000, 15) { return "a reserved address (198.18.0.0/15)" }
        if within(0xE000_0000, 4) { return "a multicast address (224.0.0.0/4)" }
        if within(0xF000_0000, 4) { return "a reserved or broadcast address (240.0.0.0/4)" }
        return nil
    }

    static func text(v4 value: UInt32) -> String {
        "\(value >> 24).\(value >> 16 & 0xFF).\(value >> 8 & 0xFF).\(value & 0xFF)"
    }

    /// Four decimal numbers 0-255 without leading zeros, joined by dots.
    static func dottedDecimal(_ text: Substring) -> UInt32? {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 4 else { return nil }
        var value: UInt32 = 0
        for part in parts {
            guard (1...3).contains(part.utf8.count), part.utf8.allSatisfy(isDigit),
                  part.utf8.count == 1 || part.utf8.first != UInt8(ascii: "0"), let number = UInt32(part), number <= 255
            else { return nil }
            value = value << 8 | number
        }
        return value
    }

    static func ipv6(_ text: Substring) -> [UInt8]? {
        guard text.utf8.count >= 2, text.utf8.count <= 45 else { return nil }
        /// Hex groups joined by single colons, the last one possibly a dotted IPv4 address.
        func groups(_ part: Substring, tailMayBeIPv4: Bool) -> [UInt16]? {
            if part.isEmpty { return [] }
            let pieces = part.split(separator: ":", omittingEmptySubsequences: false)
            var out: [UInt16] = []
            for (index, piece) in pieces.enumerated() {
                if tailMayBeIPv4, index == pieces.count - 1, piece.contains(".") {
                    guard let v4 = dottedDecimal(piece) else { return nil }
                    out += [UInt16(v4 >> 16), UInt16(v4 & 0xFFFF)]
                } else {
                    guard (1...4).contains(piece.utf8.count), piece.utf8.allSatisfy(isHexDigit),
                          let group = UInt16(piece, radix: 16) else { return nil }
                    out.append(group)
                }
            }
            return out
        }
        let all: [UInt16]
        if let gap = text.firstRange(of: "::") {
            let left = text[..<gap.lowerBound]
            let right = text[gap.upperBound...]
            // One "::" only, and no third colon beside it.
            guard !right.contains("::"), !right.hasPrefix(":"), !left.hasSuffix(":"),
                  let head = groups(left, tailMayBeIPv4: false), let tail = groups(right, tailMayBeIPv4: true),
                  head.count + tail.count <= 7
            else { return nil }
            all = head + [UInt16](repeating: 0, count: 8 - head.count - tail.count) + tail
        } else {
            guard let every = groups(text, tailMayBeIPv4: true), every.count == 8 else { return nil }
            all = every
        }
        return all.flatMap { [UInt8($0 >> 8), UInt8($0 & 0xFF)] }
    }
}

func isHexDigit(_ byte: UInt8) -> Bool { isDigit(byte) || ((byte | 0x20) >= UInt8(ascii: "a") && (byte | 0x20) <= UInt8(ascii: "f")) }
