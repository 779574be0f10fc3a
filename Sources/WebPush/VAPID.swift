import Crypto
import JSON

/// An application server's VAPID key pair (RFC 8292): a P-256 private key, kept as PEM, whose
/// public point a page passes to `pushManager.subscribe({applicationServerKey})` and every push
/// carries in `k=`. A subscription is bound to the key it was made with.
public final class VAPIDKey: Sendable {
    public let privateKey: P256PrivateKey
    /// The public key as an uncompressed point (65 bytes).
    public let publicPoint: [UInt8]
    /// `publicPoint` in base64url without padding: a page's `applicationServerKey`, and `k=`.
    public let publicKeyBase64URL: String

    public init(privateKey: P256PrivateKey) {
        self.privateKey = privateKey
        publicPoint = privateKey.uncompressedPublicPoint
        publicKeyBase64URL = Base64URL.encode(publicPoint)
    }

    /// Reads a P-256 private key in PEM (PKCS#8 `BEGIN PRIVATE KEY` or SEC1 `BEGIN EC PRIVATE
    /// KEY`, as `openssl ecparam -genkey` and the web-push libraries write it). The error names
    /// `field` and the kind of key found, never its content.
    public convenience init(pem: String, field: String = "vapid key") throws(WebPushError) {
        do {
            self.init(privateKey: try P256PrivateKey(pem: pem, use: "VAPID"))
        } catch {
            throw WebPushError(field: field, "\(error)")
        }
    }

    /// A fresh key pair (`herald webpush keygen`).
    public static func generate() throws(WebPushError) -> VAPIDKey {
        do { return VAPIDKey(privateKey: try P256PrivateKey.generate()) } catch {
            throw WebPushError(field: "vapid key", "P-256 key generation failed: \(error)")
        }
    }

    /// The private key as PKCS#8 PEM, to be written to a file only its owner reads.
    public var pem: String { privateKey.pemPKCS8 }
}

/// The `sub` claim of a VAPID token: how a push service's operators reach the sender. RFC 8292
/// asks for a `mailto:` or `https:` URI; Apple's service (web.push.apple.com) enforces more and
/// answers 403 `BadJwtToken` to a token whose subject breaks its rules, reported again and again
/// by senders: a `mailto:` at localhost, a space (`mailto: ops@example.com`), angle brackets
/// (`mailto:<ops@example.com>`), an address without `mailto:`. Herald holds every subject to
/// these rules, whatever service a subscription is on, so a key registered once works at all:
///
/// - `mailto:` followed by one address `local@domain`, or `https://` followed by a host;
///   schemes in lower case;
/// - no whitespace and no `<` or `>` anywhere;
/// - the domain or host a real-looking DNS name: two labels at least, letters, digits and
///   hyphens, a top-level label of letters (so no IP address), and not `localhost` or under
///   `.localhost`.
public enum VAPIDSubject {
    /// Nil when `subject` keeps the rules; otherwise the rule it breaks, in words.
    public static func problem(_ subject: String) -> String? {
        guard !subject.isEmpty else { return "is empty; give a mailto: address or an https: URL where the push services can reach you" }
        if subject.unicodeScalars.contains(where: { $0.properties.isWhitespace }) {
            return "holds whitespace; Apple's push service refuses such a subject (403 BadJwtToken): write it without spaces, as mailto:ops@example.com"
        }
        if subject.contains("<") || subject.contains(">") {
            return "holds angle brackets; Apple's push service refuses them (403 BadJwtToken): write mailto:ops@example.com, not mailto:<ops@example.com>"
        }
        let lowered = subject.lowercased()
        if subject.hasPrefix("mailto:") {
            let address = subject.dropFirst("mailto:".count)
            let parts = address.split(separator: "@", omittingEmptySubsequences: false)
            guard parts.count == 2, !parts[0].isEmpty, !parts[1].isEmpty else {
                return "must be mailto: followed by one e-mail address (name@domain), not mailto:\(address)"
            }
            if let problem = domainProblem(String(parts[1])) { return "has an address whose domain \(problem)" }
            return nil
        }
        if subject.hasPrefix("https://") {
            let rest = subject.dropFirst("https://".count)
            let authority = rest.prefix { $0 != "/" && $0 != "?" && $0 != "#" }
            guard !authority.contains("@") else { return "must be an https: URL without user information (no @ before the host)" }
            var host = Substring(authority)
            if let colon = host.lastIndex(of: ":") {
                let port = host[host.index(after: colon)...]
                guard !port.isEmpty, port.allSatisfy(\.isASCII), Int(port).map({ (1...65535).contains($0) }) == true else {
                    return "has an https: URL whose port is not a number from 1 to 65535"
                }
                host = host[..<colon]
            }
            if let problem = domainProblem(String(host)) { return "has an https: URL whose host \(problem)" }
            return nil
        }
        if lowered.hasPrefix("mailto:") || lowered.hasPrefix("https:") {
            return "must write its scheme in lower case (mailto:, https://)"
        }
        if lowered.hasPrefix("http:") { return "must be an https: URL, not http:" }
        if subject.contains("@") { return "is an e-mail address without mailto:; write mailto:\(subject)" }
        return "must be a mailto: address or an https: URL (RFC 8292), as Apple's push service requires"
    }

    /// Throws the rule `subject` breaks, naming `field`.
    public static func check(_ subject: String, field: String = "subject") throws(WebPushError) {
        if let problem = problem(subject) { throw WebPushError(field: field, problem) }
    }

    /// Why `name` is not a real-looking DNS name, or nil.
    static func domainProblem(_ name: String) -> String? {
        let lowered = name.lowercased()
        if lowered == "localhost" || lowered.hasSuffix(".localhost") {
            return "is localhost; Apple's push service refuses it (403 BadJwtToken): give a domain where you can be reached"
        }
        let labels = lowered.split(separator: ".", omittingEmptySubsequences: false)
        guard labels.count >= 2 else { return "\(name) is not a domain name with a dot (such as example.com)" }
        for label in labels {
            guard !label.isEmpty, label.utf8.count <= 63,
                  label.utf8.allSatisfy({ isLetter($0) || isDigit($0) || $0 == UInt8(ascii: "-") }),
                  label.utf8.first != UInt8(ascii: "-"), label.utf8.last != UInt8(ascii: "-")
            else { return "\(name) is not a DNS name (labels of letters, digits and inner hyphens, joined by dots)" }
        }
        guard let top = labels.last, top.utf8.count >= 2, top.utf8.allSatisfy(isLetter) else {
            return "\(name) does not end in a top-level domain of letters (an IP address is not accepted)"
        }
        return nil
    }
}

func isLetter(_ byte: UInt8) -> Bool { (byte | 0x20) >= UInt8(ascii: "a") && (byte | 0x20) <= UInt8(ascii: "z") }
func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }

/// VAPID tokens and the `Authorization` header that carries them (RFC 8292 §2-3).
public enum VAPID {
    /// Push services refuse a token whose `exp` is more than 24 hours ahead.
    public static let maximumLifetimeSeconds: Int64 = 24 * 3600
    private static let header: JSONValue = ["typ": "JWT", "alg": "ES256"]

    /// `vapid t=<JWT>, k=<public key>`: a token for the push service at `audience` (an endpoint's
    /// origin, `https://host[:port]`), expiring at `expiresAt` (seconds since 1970), signed by
    /// `key`, with `subject` as `sub`. The subject is not checked here (see `VAPIDSubject`).
    public static func authorization(audience: String, subject: String, expiresAt: Int64, key: VAPIDKey) throws(WebPushError) -> String {
        let claims: JSONValue = ["aud": .string(audience), "exp": .number(String(expiresAt)), "sub": .string(subject)]
        do {
            return "vapid t=" + (try JWT.signES256(header: header, claims: claims, key: key.privateKey)) + ", k=" + key.publicKeyBase64URL
        } catch {
            throw WebPushError(field: "vapid key", "cannot sign a VAPID token: \(error)")
        }
    }
}

/// What a verified VAPID header said.
public struct VAPIDClaims: Sendable, Equatable {
    public var audience: String
    public var expiresAt: Int64
    public var subject: String
    /// `k=` as sent (base64url of the public point).
    public var publicKey: String
}

/// Why a push service refuses a VAPID header; `description` says it in words.
public enum VAPIDRefusal: Error, Sendable, Equatable, CustomStringConvertible {
    case missing
    /// Another scheme (`WebPush`, from the drafts, or `Bearer`): the scheme as sent.
    case notVapid(String)
    /// No `t=` or no `k=`.
    case malformed
    /// `k=` is not a base64url uncompressed P-256 point.
    case badKey
    /// `t=` is not a JWT of three base64url parts with JSON header and claims.
    case badToken
    /// The header's `alg` is not ES256.
    case badAlgorithm(String)
    case badSignature
    case missingAudience
    case wrongAudience(given: String, expected: String)
    case missingExpiry
    case expired(secondsAgo: Int64)
    case expiryTooFar(secondsAhead: Int64)
    case missingSubject
    /// The subject breaks Apple's rules (`VAPIDSubject`).
    case badSubject(String)

    public var description: String {
        switch self {
        case .missing: return "no Authorization header; Web Push needs `vapid t=<JWT>, k=<public key>`"
        case .notVapid(let scheme): return "the Authorization scheme is \(scheme), not vapid (RFC 8292)"
        case .malformed: return "the vapid Authorization lacks t= or k="
        case .badKey: return "k= is not a base64url uncompressed P-256 public key (65 bytes on the curve)"
        case .badToken: return "t= is not a JWT (three base64url parts, the first two JSON objects)"
        case .badAlgorithm(let alg): return "the JWT's alg is \(alg.isEmpty ? "missing" : alg), not ES256"
        case .badSignature: return "the JWT's signature does not verify with the key in k="
        case .missingAudience: return "the JWT has no aud claim"
        case .wrongAudience(let given, let expected): return "the JWT's aud is \(given), not this push service's origin \(expected)"
        case .missingExpiry: return "the JWT has no numeric exp claim"
        case .expired(let ago): return "the JWT expired \(ago) s ago"
        case .expiryTooFar(let ahead): return "the JWT's exp is \(ahead) s ahead, more than 24 hours (86400 s)"
        case .missingSubject: return "the JWT has no sub claim (a mailto: or https: contact)"
        case .badSubject(let problem): return "the JWT's sub \(problem)"
        }
    }
}

extension VAPID {
    /// Checks an `Authorization` header as a push service at `audience` does at time `now`
    /// (seconds since 1970): the scheme, `k=` a P-256 point, `t=` an ES256 JWT signed by it, `aud`
    /// the origin exactly, `exp` ahead and at most 24 hours ahead, `sub` present and, with
    /// `appleSubjectRules`, keeping `VAPIDSubject`'s rules.
    public static func verify(authorization: String?, audience: String, now: Int64,
                              appleSubjectRules: Bool) -> Result<VAPIDClaims, VAPIDRefusal> {
        guard let authorization, !authorization.isEmpty else { return .failure(.missing) }
        let trimmed = authorization.drop { $0 == " " }
        let scheme = trimmed.prefix { $0 != " " }
        guard scheme.lowercased() == "vapid" else { return .failure(.notVapid(String(scheme))) }
        var token: String? = nil
        var key: String? = nil
        for parameter in trimmed.dropFirst(scheme.count).split(separator: ",") {
            let pair = parameter.trimmingSpaces
            guard let equals = pair.firstIndex(of: "=") else { continue }
            let name = pair[..<equals].trimmingSpaces.lowercased()
            var value = pair[pair.index(after: equals)...].trimmingSpaces
            if value.count >= 2, value.hasPrefix("\""), value.hasSuffix("\"") { value = value.dropFirst().dropLast() }
            if name == "t" { token = String(value) } else if name == "k" { key = String(value) }
        }
        guard let token, let key else { return .failure(.malformed) }
        guard let point = Base64URL.decode(key), let publicKey = P256PublicKey(uncompressedPoint: point) else {
            return .failure(.badKey)
        }
        guard let jwt = JWT.Unverified(token) else { return .failure(.badToken) }
        let alg = jwt.header["alg"]?.stringValue ?? ""
        guard alg == "ES256" else { return .failure(.badAlgorithm(alg)) }
        guard publicKey.verifySHA256(signature: jwt.signature, data: jwt.signingInput) else { return .failure(.badSignature) }
        guard let aud = jwt.claims["aud"]?.stringValue else { return .failure(.missingAudience) }
        guard aud == audience else { return .failure(.wrongAudience(given: aud, expected: audience)) }
        guard let expiry = jwt.claims["exp"]?.doubleValue else { return .failure(.missingExpiry) }
        let exp = Int64(expiry)
        guard exp > now else { return .failure(.expired(secondsAgo: now - exp)) }
        guard exp - now <= maximumLifetimeSeconds else { return .failure(.expiryTooFar(secondsAhead: exp - now)) }
        guard let sub = jwt.claims["sub"]?.stringValue, !sub.isEmpty else { return .failure(.missingSubject) }
        if appleSubjectRules, let problem = VAPIDSubject.problem(sub) { return .failure(.badSubject(problem)) }
        return .success(VAPIDClaims(audience: aud, expiresAt: exp, subject: sub, publicKey: key))
    }
}

extension Substring {
    var trimmingSpaces: Substring {
        var text = self
        while text.first == " " || text.first == "\t" { text = text.dropFirst() }
        while text.last == " " || text.last == "\t" { text = text.dropLast() }
        return text
    }
}
