import Glibc
import HTTPServer

/// The address operators reach the dashboard under when a reverse proxy stands in front of it
/// (`--public-url`, `HERALD_DASHBOARD_PUBLIC_URL`): its host is accepted in `Host`, and an
/// https one makes the session cookie `Secure`.
public struct DashboardPublicURL: Sendable, Equatable {
    public var scheme: String
    /// Lowercased; an IPv6 literal without its brackets.
    public var host: String
    /// The port written in the URL, or the scheme's own (80, 443).
    public var port: Int

    public var isHTTPS: Bool { scheme == "https" }

    /// Whether `text` is an IPv4 or IPv6 address literal (what `--trusted-proxy` takes).
    public static func isIPAddress(_ text: String) -> Bool { IPAddress.canonical(text) != nil }

    /// Parses `http(s)://HOST[:PORT][/]`; the problem, in words to follow `"URL" ...`, when it is not one.
    public static func parse(_ text: String) -> Result<DashboardPublicURL, DashboardStartError> {
        func refuse(_ problem: String) -> Result<DashboardPublicURL, DashboardStartError> {
            .failure(DashboardStartError(problem + "; give the address operators open, e.g. https://herald.example.com"))
        }
        let lower = text.lowercased()
        let scheme: String
        if lower.hasPrefix("https://") { scheme = "https" } else if lower.hasPrefix("http://") { scheme = "http" } else {
            return refuse("is not an http:// or https:// URL")
        }
        var rest = Substring(lower.dropFirst(scheme.count + 3))
        if rest.hasSuffix("/") { rest = rest.dropLast() }
        if rest.contains("/") || rest.contains("?") || rest.contains("#") {
            return refuse("has a path, query or fragment: the dashboard is served at the root of its host, so give only scheme, host and port")
        }
        if rest.contains("@") { return refuse("holds a user name or password, which has no place in it") }
        guard let authority = Authority(rest), !authority.host.isEmpty else { return refuse("has no host, or a port that is not a number from 1 to 65535") }
        if let port = authority.port, !(1...65535).contains(port) { return refuse("has a port that is not a number from 1 to 65535") }
        return .success(DashboardPublicURL(scheme: scheme, host: authority.host, port: authority.port ?? (scheme == "https" ? 443 : 80)))
    }
}

/// A `Host` value split into its host (lowercased, IPv6 without brackets) and optional port.
struct Authority: Equatable {
    var host: String
    var port: Int?

    init?<S: StringProtocol>(_ text: S) {
        let text = text.lowercased()
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { return nil }
            host = String(text[text.index(after: text.startIndex)..<close])
            let rest = text[text.index(after: close)...]
            if rest.isEmpty { port = nil } else {
                guard rest.hasPrefix(":"), let number = Int(rest.dropFirst()), number >= 0 else { return nil }
                port = number
            }
        } else if let colon = text.firstIndex(of: ":") {
            host = String(text[..<colon])
            guard let number = Int(text[text.index(after: colon)...]), number >= 0 else { return nil }
            port = number
        } else {
            host = text
            port = nil
        }
        // Only characters a host name or an address literal has: no spaces, no second colon outside brackets.
        guard host.utf8.allSatisfy({ byte in
            (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z")) || (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9"))
                || byte == UInt8(ascii: "-") || byte == UInt8(ascii: ".") || byte == UInt8(ascii: ":") || byte == UInt8(ascii: "_")
        }) else { return nil }
    }
}

/// Which `Host` the dashboard answers to, and whom it believes about TLS.
///
/// The threat is DNS rebinding: a page at `attacker.example` re-points its name at 127.0.0.1, and
/// the operator's browser then sends the dashboard requests that it considers same-origin with the
/// attacker's page, so the page may read the answers. Those requests carry
/// `Host: attacker.example[:PORT]`; the dashboard answers only the names it is really reached
/// under, so such a page reads nothing but a refusal.
struct HostCheck: Sendable {
    /// The listen address (`--address`); a wildcard (0.0.0.0, ::) is no name a client uses.
    let listenHost: String
    let publicURL: DashboardPublicURL?
    /// Canonical addresses (`IPAddress.canonical`) whose `X-Forwarded-Proto` is believed.
    let trustedProxies: Set<String>

    static let loopbackNames: Set<String> = ["localhost", "127.0.0.1", "::1"]

    init(listenHost: String, publicURL: DashboardPublicURL?, trustedProxies: [String]) {
        self.listenHost = Authority(listenHost.hasPrefix("[") || !listenHost.contains(":") ? listenHost : "[\(listenHost)]")?.host ?? listenHost.lowercased()
        self.publicURL = publicURL
        self.trustedProxies = Set(trustedProxies.compactMap(IPAddress.canonical))
    }

    /// Whether a request naming `host` (its `Host` or `:authority`) is for this dashboard, which
    /// listens on `port`.
    func allows(_ host: String?, port: Int) -> Bool {
        guard let host, let authority = Authority(host) else { return false }
        if let publicURL, authority.host == publicURL.host, (authority.port ?? (publicURL.isHTTPS ? 443 : 80)) == publicURL.port {
            return true
        }
        // The listener is plain HTTP, so a Host without a port means port 80.
        guard (authority.port ?? 80) == port else { return false }
        if Self.loopbackNames.contains(authority.host) { return true }
        return authority.host == listenHost && !["0.0.0.0", "::"].contains(listenHost)
    }

    /// The names this dashboard answers to, for the refusal.
    func names(port: Int) -> [String] {
        var names = ["127.0.0.1:\(port)", "localhost:\(port)", "[::1]:\(port)"]
        if !Self.loopbackNames.contains(listenHost) && !["0.0.0.0", "::"].contains(listenHost) {
            names.append((listenHost.contains(":") ? "[\(listenHost)]" : listenHost) + ":\(port)")
        }
        if let publicURL { names.append((publicURL.host.contains(":") ? "[\(publicURL.host)]" : publicURL.host) + ":\(publicURL.port)") }
        return names
    }

    /// Whether the browser reached the dashboard over TLS: the connection itself, an https public
    /// URL, or `X-Forwarded-Proto: https` from a trusted proxy (from anyone else it is ignored, or
    /// any client could claim it).
    func isHTTPS(_ request: HTTPServerRequest) -> Bool {
        if request.isSecure || publicURL?.isHTTPS == true { return true }
        guard !trustedProxies.isEmpty, let forwarded = request.header("x-forwarded-proto") else { return false }
        guard let peer = IPAddress.host(ofPeer: request.remoteAddress).flatMap(IPAddress.canonical), trustedProxies.contains(peer) else {
            return false
        }
        // A proxy that appends to the list puts its own value last: that is the one it vouches for.
        let last = forwarded.split(separator: ",").last.map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
        return last == "https"
    }
}

/// IP address literals, compared in one spelling.
enum IPAddress {
    /// `10.0.0.5` or `2001:db8::1` in the form inet_ntop writes (an IPv4-mapped IPv6 address as
    /// IPv4, which is how a dual-stack listener sees an IPv4 peer); nil when `text` is not an
    /// address literal.
    static func canonical(_ text: String) -> String? {
        var text = text
        if text.hasPrefix("[") && text.hasSuffix("]") { text = String(text.dropFirst().dropLast()) }
        var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
        var v4 = in_addr()
        if inet_pton(AF_INET, text, &v4) == 1 {
            inet_ntop(AF_INET, &v4, &buffer, socklen_t(buffer.count))
            return String(cString: buffer)
        }
        var v6 = in6_addr()
        guard inet_pton(AF_INET6, text, &v6) == 1 else { return nil }
        let bytes = withUnsafeBytes(of: &v6) { Array($0) }
        if bytes[0..<10].allSatisfy({ $0 == 0 }) && bytes[10] == 0xff && bytes[11] == 0xff {
            return bytes[12..<16].map(String.init).joined(separator: ".")
        }
        inet_ntop(AF_INET6, &v6, &buffer, socklen_t(buffer.count))
        return String(cString: buffer)
    }

    /// The address part of `127.0.0.1:53124` or `[::1]:53124`.
    static func host(ofPeer peer: String) -> String? {
        if peer.hasPrefix("["), let close = peer.firstIndex(of: "]") {
            return String(peer[peer.index(after: peer.startIndex)..<close])
        }
        guard let colon = peer.lastIndex(of: ":") else { return peer.isEmpty ? nil : peer }
        return String(peer[..<colon])
    }
}
