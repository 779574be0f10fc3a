/// A subscription's endpoint, read strictly: `https://host[:port]/path[?query]`, the host a DNS
/// name or an IP address in its usual text. An endpoint reached Herald from a browser through
/// the application, so anything a browser never gives is refused rather than interpreted: user
/// information, a fragment, percent-encoded or non-ASCII host characters, a trailing dot,
/// backslashes, whitespace. A host that ends in a number is an IPv4 address as URL parsers and
/// resolvers read it (`2130706433`, `0x7f.1`, `0177.0.0.1`, `127.1` are all 127.0.0.1 to
/// getaddrinfo); only four plain decimal numbers are accepted, and the error of any other
/// spelling says which address it reads as.
public struct PushEndpoint: Sendable, Equatable {
    /// The endpoint as given.
    public let url: String
    /// The host in lower case; an IPv6 address without its brackets.
    public let host: String
    /// The port written in the URL, if any.
    public let port: Int?
    /// `https://host[:port]` (the port left out when it is 443): VAPID's `aud`, and the key of a
    /// push service's connections, tokens and pauses.
    public let origin: String
    /// The address when the host is an IP address.
    public let address: IPAddress?

    /// The longest endpoint accepted (browsers' are a few hundred bytes).
    public static let maximumLength = 2048

    /// Reads `text`; the error names `field` and what is wrong, quoting the host at most (an
    /// endpoint is a capability: whoever holds it can push to that browser).
    public init(_ text: String, field: String = "endpoint") throws(WebPushError) {
        func refuse(_ message: String) -> WebPushError { WebPushError(field: field, message) }
        let bytes = Array(text.utf8)
        guard !bytes.isEmpty else { throw refuse("is empty") }
        guard bytes.count <= Self.maximumLength else { throw refuse("is \(bytes.count) bytes; endpoints are at most \(Self.maximumLength)") }
        guard bytes.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            throw refuse("holds whitespace, control or non-ASCII characters; give the endpoint exactly as PushSubscription.toJSON() has it")
        }
        guard text.hasPrefix("https://") else {
            let scheme = text.prefix { $0 != ":" }
            throw refuse(scheme.count < text.count
                ? "must be an https:// URL (push services are reached over TLS only), not \(scheme.lowercased()):"
                : "must be an https:// URL, as PushSubscription.toJSON() gives it")
        }
        guard !bytes.contains(UInt8(ascii: "\\")) else { throw refuse("holds a backslash") }
        guard !bytes.contains(UInt8(ascii: "#")) else { throw refuse("holds a fragment (#); a push endpoint has none") }
        let rest = text.dropFirst("https://".count)
        let authority = rest.prefix { $0 != "/" && $0 != "?" }
        guard !authority.contains("@") else { throw refuse("holds user information (an @ before the host); a push endpoint has none") }
        guard !authority.isEmpty else { throw refuse("has no host") }

        var hostText: Substring
        var portText: Substring? = nil
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else { throw refuse("has an IPv6 host without its closing ]") }
            hostText = authority[authority.index(after: authority.startIndex)..<close]
            let after = authority[authority.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { throw refuse("has characters after its IPv6 host that are not a port") }
                portText = after.dropFirst()
            }
            guard !hostText.contains("%") else { throw refuse("has an IPv6 host with a zone (%); push services have none") }
            guard let v6 = IPAddress.ipv6(hostText) else { throw refuse("has a host [\(hostText)] that is not an IPv6 address") }
            address = .v6(v6)
            host = IPAddress.v6(v6).description
        } else {
            if let colon = authority.lastIndex(of: ":") {
                hostText = authority[..<colon]
                portText = authority[authority.index(after: colon)...]
            } else {
                hostText = authority
            }
            let lowered = hostText.lowercased()
            guard !lowered.isEmpty else { throw refuse("has no host") }
            guard lowered.utf8.allSatisfy({ isLetter($0) || isDigit($0) || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: ".") }) else {
                throw refuse("has a host with characters other than letters, digits, hyphens and dots (percent-encoded or international hosts are not accepted)")
            }
            guard !lowered.hasSuffix(".") else { throw refuse("has a host ending in a dot") }
            let labels = lowered.split(separator: ".", omittingEmptySubsequences: false)
            guard !labels.contains(where: \.isEmpty) else { throw refuse("has a host with an empty label (two dots in a row or a leading dot)") }
            if let last = labels.last, Self.isNumber(last) {
                guard let value = Self.liberalIPv4(labels) else {
                    throw refuse("has a host \(lowered) that ends in a number but is not an IPv4 address")
                }
                guard IPAddress.dottedDecimal(Substring(lowered)) == value else {
                    throw refuse("has a host \(lowered), which reads as the IPv4 address \(IPAddress.text(v4: value)) to resolvers "
                        + "and URL parsers; write an address as four decimal numbers, if at all")
                }
                address = .v4(value)
            } else {
                address = nil
            }
            host = lowered
        }
        if let portText {
            guard !portText.isEmpty, portText.utf8.count <= 5, portText.utf8.allSatisfy(isDigit),
                  let value = Int(portText), (1...65535).contains(value)
            else { throw refuse("has a port that is not a number from 1 to 65535") }
            port = value
        } else {
            port = nil
        }
        url = text
        var hostPart = host
        if case .v6? = address { hostPart = "[" + host + "]" }
        origin = "https://" + hostPart + (port == nil || port == 443 ? "" : ":\(port!)")
    }

    /// Whether a label is a number as URL parsers see one: decimal digits, or 0x and hex digits.
    static func isNumber(_ label: Substring) -> Bool {
        let bytes = Array(label.utf8)
        if bytes.count >= 2, bytes[0] == UInt8(ascii: "0"), bytes[1] | 0x20 == UInt8(ascii: "x") {
            return bytes.dropFirst(2).allSatisfy(isHexDigit)
        }
        return !bytes.isEmpty && bytes.allSatisfy(isDigit)
    }

    /// The address `inet_aton` (and so getaddrinfo, and the WHATWG URL parser) reads from one to
    /// four numbers, each decimal, octal (leading 0) or hex (0x): the last fills the bytes left.
    static func liberalIPv4(_ labels: [Substring]) -> UInt32? {
        guard (1...4).contains(labels.count) else { return nil }
        var numbers: [UInt64] = []
        for label in labels {
            let bytes = Array(label.utf8)
            var radix = 10
            var digits = bytes[...]
            if bytes.count >= 2, bytes[0] == UInt8(ascii: "0"), bytes[1] | 0x20 == UInt8(ascii: "x") {
                radix = 16
                digits = bytes[2...]
            } else if bytes.count >= 2, bytes[0] == UInt8(ascii: "0") {
                radix = 8
                digits = bytes[1...]
            }
            if digits.isEmpty { numbers.append(0); continue }
            guard digits.count <= 32, let value = UInt64(String(decoding: digits, as: UTF8.self), radix: radix) else { return nil }
            numbers.append(value)
        }
        let last = numbers.removeLast()
        guard numbers.allSatisfy({ $0 <= 255 }) else { return nil }
        let remainingBits = UInt64(8 * (4 - numbers.count))
        guard last < (1 << remainingBits) else { return nil }
        var value: UInt64 = 0
        for (index, number) in numbers.enumerated() { value |= number << UInt64(24 - 8 * index) }
        return UInt32(value | last)
    }
}

/// Which endpoints Herald may contact. A planted endpoint must not make Herald a client of the
/// services inside its network (server-side request forgery): an endpoint whose host is, or
/// resolves to, a loopback, private, shared (CGNAT), link-local, unspecified, multicast or
/// reserved address (`IPAddress.restriction`) is refused unless its host is allowed. Only
/// https is ever contacted (`PushEndpoint` refuses anything else).
public struct EndpointPolicy: Sendable, Equatable {
    /// Allowed host names (lower case) and addresses.
    public private(set) var allowedNames: Set<String> = []
    public private(set) var allowedAddresses: Set<IPAddress> = []

    /// `allowedHosts`: names or addresses (as in an endpoint; IPv6 with or without brackets)
    /// whose endpoints may be contacted whatever their address, such as a push service run
    /// inside the network on purpose.
    public init(allowedHosts: [String] = []) {
        for host in allowedHosts {
            var text = host.lowercased()
            if text.hasPrefix("[") && text.hasSuffix("]") { text = String(text.dropFirst().dropLast()) }
            if let address = IPAddress(text) { allowedAddresses.insert(address) } else { allowedNames.insert(text) }
        }
    }

    func allows(_ endpoint: PushEndpoint) -> Bool {
        if let address = endpoint.address { return allowedAddresses.contains(address) }
        return allowedNames.contains(endpoint.host)
    }

    /// Refuses an endpoint whose host is an address it must not contact. A host name passes here;
    /// its addresses are judged by `check(_:resolvedTo:)` once resolved.
    public func check(_ endpoint: PushEndpoint, field: String = "endpoint") throws(WebPushError) {
        guard let address = endpoint.address, !allows(endpoint), let restriction = address.restriction else { return }
        throw WebPushError(field: field, "its host \(endpoint.host) is \(restriction); Herald contacts no loopback, private, "
            + "link-local or other internal address unless that host is allowed")
    }

    /// Reads and checks an endpoint in one step.
    public func endpoint(_ text: String, field: String = "endpoint") throws(WebPushError) -> PushEndpoint {
        let endpoint = try PushEndpoint(text, field: field)
        try check(endpoint, field: field)
        return endpoint
    }

    /// Refuses a host name whose resolved addresses include one it must not contact: all of
    /// them are judged, since a resolver may return an internal address beside a public one and
    /// the connection may go to either. The caller connects to an address it checked here (pins
    /// it), so a second resolution cannot swap it. An empty list is refused too.
    public func check(_ endpoint: PushEndpoint, resolvedTo addresses: [IPAddress], field: String = "endpoint") throws(WebPushError) {
        if allows(endpoint) { return }
        guard !addresses.isEmpty else { throw WebPushError(field: field, "its host \(endpoint.host) resolved to no address") }
        for address in addresses {
            if let restriction = address.restriction {
                throw WebPushError(field: field, "its host \(endpoint.host) resolves to \(address), \(restriction); Herald contacts "
                    + "no loopback, private, link-local or other internal address unless that host is allowed")
            }
        }
    }
}
