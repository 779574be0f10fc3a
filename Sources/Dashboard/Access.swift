import Crypto
import Foundation
import HTTPServer

/// Who may do what. With a token, the API wants `Authorization: Bearer TOKEN` and the pages a
/// session cookie from `/login`; forms carry a CSRF token derived from the session. Without a
/// token, everything is readable and nothing can be changed.
///
/// The cookie is not the token: it is `EXPIRY.NONCE.MAC`, where MAC is an HMAC of the rest under
/// a key derived from the token. A stolen cookie expires, cannot be turned back into the token,
/// and every session ends when the token changes. Nothing is kept in memory, so a restart keeps
/// operators logged in.
struct Access: Sendable {
    static let cookieName = "herald_session"
    static let csrfField = "csrf"

    /// SHA-256 of the token: compared in constant time against the digest of what a client sent.
    private let tokenDigest: [UInt8]?
    private let sessionKey: [UInt8]?
    let sessionLifetime: Double

    init(token: String?, sessionLifetime: Double) {
        if let token, !token.isEmpty {
            tokenDigest = SHA256.hash(Array(token.utf8))
            sessionKey = HMACSHA256.authenticate(Array("herald dashboard sessions v1".utf8), key: Array(token.utf8))
        } else {
            tokenDigest = nil
            sessionKey = nil
        }
        self.sessionLifetime = sessionLifetime
    }

    /// True when a token is configured (actions possible, everything needs it).
    var isProtected: Bool { tokenDigest != nil }

    func tokenMatches(_ candidate: String) -> Bool {
        guard let tokenDigest else { return false }
        return ConstantTime.equal(SHA256.hash(Array(candidate.utf8)), tokenDigest)
    }

    /// What an `Authorization` header says: nil when absent, else whether it carries the token.
    func bearerMatches(_ request: HTTPServerRequest) -> Bool? {
        guard let header = request.header("authorization") else { return nil }
        let parts = header.split(separator: " ", maxSplits: 1)
        guard parts.count == 2, parts[0].lowercased() == "bearer" else { return false }
        return tokenMatches(String(parts[1]).trimmingCharacters(in: .whitespaces))
    }

    // MARK: sessions

    /// A new session cookie value, valid for `sessionLifetime` from `now`.
    func newSession(now: Double) -> String {
        let payload = "\(Int(now + sessionLifetime)).\(Base64URL.encode(Random.bytes(16)))"
        return payload + "." + mac(payload)
    }

    /// The session a cookie value proves, or nil (forged, expired, or no token configured).
    func session(fromCookie value: String, now: Double) -> Session? {
        guard sessionKey != nil else { return nil }
        let parts = value.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let expiry = Int(parts[0]), Double(expiry) > now else { return nil }
        let payload = parts[0] + "." + parts[1]
        guard ConstantTime.equal(Array(mac(String(payload)).utf8), Array(parts[2].utf8)) else { return nil }
        return Session(csrfToken: mac("csrf:" + payload))
    }

    /// The session the request's cookie proves.
    func session(_ request: HTTPServerRequest, now: Double) -> Session? {
        guard let value = Self.cookie(Self.cookieName, in: request) else { return nil }
        return session(fromCookie: value, now: now)
    }

    private func mac(_ text: String) -> String {
        Base64URL.encode(HMACSHA256.authenticate(Array(text.utf8), key: sessionKey ?? []))
    }

    func csrfMatches(_ session: Session, _ submitted: String?) -> Bool {
        guard let submitted else { return false }
        return ConstantTime.equal(Array(session.csrfToken.utf8), Array(submitted.utf8))
    }

    /// `Set-Cookie` for a session: HttpOnly (no script reads it), SameSite=Strict (no other site's
    /// page sends it), Secure when served over TLS.
    func sessionCookie(_ value: String, secure: Bool) -> HTTPHeader {
        HTTPHeader(name: "set-cookie", value: "\(Self.cookieName)=\(value); Path=/; Max-Age=\(Int(sessionLifetime)); HttpOnly; SameSite=Strict"
                   + (secure ? "; Secure" : ""))
    }

    static func clearedCookie(secure: Bool) -> HTTPHeader {
        HTTPHeader(name: "set-cookie", value: "\(cookieName)=; Path=/; Max-Age=0; HttpOnly; SameSite=Strict" + (secure ? "; Secure" : ""))
    }

    static func cookie(_ name: String, in request: HTTPServerRequest) -> String? {
        // HTTP/2 may split cookies over several headers.
        for header in request.headers where header.name == "cookie" {
            for pair in header.value.split(separator: ";") {
                let trimmed = pair.trimmingCharacters(in: .whitespaces)
                if trimmed.hasPrefix(name + "=") { return String(trimmed.dropFirst(name.count + 1)) }
            }
        }
        return nil
    }

    /// Whether a browser says the request comes from another site: an `Origin` naming another
    /// host, or `Sec-Fetch-Site: cross-site`. Requests without either (older clients, curl) pass
    /// here and still need the CSRF token. Only the host is compared, not the scheme, so a
    /// dashboard behind a TLS-terminating proxy (Origin https://, served as http://) still works.
    static func isCrossSite(_ request: HTTPServerRequest) -> Bool {
        if request.header("sec-fetch-site") == "cross-site" { return true }
        guard let origin = request.header("origin") else { return false }
        guard let host = request.header("host") ?? request.header(":authority") else { return true }
        var named = Substring(origin.lowercased())
        if let scheme = named.range(of: "://") { named = named[scheme.upperBound...] } else { return true }  // "null", opaque origins
        return named != Substring(host.lowercased())
    }
}

/// A logged-in browser: the CSRF token its forms carry.
struct Session: Sendable {
    var csrfToken: String
}
