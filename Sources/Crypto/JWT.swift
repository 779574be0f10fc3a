import JSON

/// Base64 with the URL-safe alphabet and no padding (RFC 4648 §5), as JWTs use it.
public enum Base64URL {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
    private static let reverse: [UInt8] = {
        var table = [UInt8](repeating: 0xFF, count: 256)
        for (i, c) in alphabet.enumerated() { table[Int(c)] = UInt8(i) }
        return table
    }()

    public static func encode(_ bytes: [UInt8]) -> String {
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count + 2) / 3 * 4)
        var i = 0
        while i + 3 <= bytes.count {
            let n = UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8 | UInt32(bytes[i + 2])
            out.append(alphabet[Int(n >> 18 & 63)])
            out.append(alphabet[Int(n >> 12 & 63)])
            out.append(alphabet[Int(n >> 6 & 63)])
            out.append(alphabet[Int(n & 63)])
            i += 3
        }
        let rest = bytes.count - i
        if rest == 1 {
            let n = UInt32(bytes[i]) << 16
            out.append(alphabet[Int(n >> 18 & 63)])
            out.append(alphabet[Int(n >> 12 & 63)])
        } else if rest == 2 {
            let n = UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8
            out.append(alphabet[Int(n >> 18 & 63)])
            out.append(alphabet[Int(n >> 12 & 63)])
            out.append(alphabet[Int(n >> 6 & 63)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// The bytes, or nil when `text` holds a character outside the alphabet or a bad length.
    /// Trailing `=` padding is tolerated.
    public static func decode(_ text: String) -> [UInt8]? {
        var symbols = Array(text.utf8)
        while symbols.last == UInt8(ascii: "=") { symbols.removeLast() }
        guard symbols.count % 4 != 1 else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(symbols.count * 3 / 4)
        var accumulator: UInt32 = 0
        var bits = 0
        for symbol in symbols {
            let value = reverse[Int(symbol)]
            guard value != 0xFF else { return nil }
            accumulator = accumulator << 6 | UInt32(value)
            bits += 6
            if bits >= 8 {
                bits -= 8
                out.append(UInt8(truncatingIfNeeded: accumulator >> UInt32(bits)))
            }
        }
        return out
    }
}

/// JSON Web Tokens signed with RS256 (Google's OAuth2 service-account flow) or ES256 (APNs
/// provider tokens).
public enum JWT {
    private static let header = Base64URL.encode(Array(#"{"alg":"RS256","typ":"JWT"}"#.utf8))

    /// `header.claims.signature`, the claims serialized in their order.
    public static func signRS256(claims: JSONValue, key: RSAPrivateKey) throws(CryptoError) -> String {
        let signingInput = header + "." + Base64URL.encode(Array(claims.serialized.utf8))
        let signature = try key.signSHA256(Array(signingInput.utf8))
        return signingInput + "." + Base64URL.encode(signature)
    }

    /// The claims when the header says RS256 and the signature verifies with `key`; nil otherwise.
    /// Checking `exp`, `aud` and the rest is the caller's business.
    public static func verifyRS256(_ token: String, key: RSAPublicKey) -> JSONValue? {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3,
              let headerBytes = Base64URL.decode(String(parts[0])),
              let header = try? JSONValue.parse(headerBytes),
              header["alg"]?.stringValue == "RS256",
              let claimBytes = Base64URL.decode(String(parts[1])),
              let signature = Base64URL.decode(String(parts[2]))
        else { return nil }
        let signingInput = Array(token.utf8.prefix(parts[0].utf8.count + 1 + parts[1].utf8.count))
        guard key.verifySHA256(signature: signature, data: signingInput) else { return nil }
        guard let claims = try? JSONValue.parse(claimBytes), claims.objectValue != nil else { return nil }
        return claims
    }

    /// `header.claims.signature` with the header `{"alg":"ES256","kid":KEY_ID}` and the signature
    /// as r||s (64 bytes, RFC 7518 §3.4), as APNs provider tokens are made.
    public static func signES256(claims: JSONValue, keyID: String, key: P256PrivateKey) throws(CryptoError) -> String {
        let header: JSONValue = ["alg": "ES256", "kid": .string(keyID)]
        let signingInput = Base64URL.encode(Array(header.serialized.utf8)) + "." + Base64URL.encode(Array(claims.serialized.utf8))
        let signature = try key.signSHA256(Array(signingInput.utf8))
        return signingInput + "." + Base64URL.encode(signature)
    }

    /// `header.claims.signature` with the header given (VAPID's is `{"typ":"JWT","alg":"ES256"}`)
    /// and the signature as r||s.
    public static func signES256(header: JSONValue, claims: JSONValue, key: P256PrivateKey) throws(CryptoError) -> String {
        let signingInput = Base64URL.encode(Array(header.serialized.utf8)) + "." + Base64URL.encode(Array(claims.serialized.utf8))
        let signature = try key.signSHA256(Array(signingInput.utf8))
        return signingInput + "." + Base64URL.encode(signature)
    }

    /// A token's parts read without checking its signature: to learn its `kid` and pick the key
    /// that must verify it. Nil when it is not three base64url parts of which the first two are
    /// JSON objects.
    public struct Unverified: Sendable {
        public var header: JSONValue
        public var claims: JSONValue
        public var signature: [UInt8]
        /// `header.claims` as sent: what the signature covers.
        public var signingInput: [UInt8]

        public init?(_ token: String) {
            let parts = token.split(separator: ".", omittingEmptySubsequences: false)
            guard parts.count == 3,
                  let headerBytes = Base64URL.decode(String(parts[0])),
                  let header = try? JSONValue.parse(headerBytes), header.objectValue != nil,
                  let claimBytes = Base64URL.decode(String(parts[1])),
                  let claims = try? JSONValue.parse(claimBytes), claims.objectValue != nil,
                  let signature = Base64URL.decode(String(parts[2]))
            else { return nil }
            self.header = header
            self.claims = claims
            self.signature = signature
            signingInput = Array(token.utf8.prefix(parts[0].utf8.count + 1 + parts[1].utf8.count))
        }
    }

    /// The claims when the header says ES256 and the r||s signature verifies with `key`; nil
    /// otherwise. Checking `iat`, `iss` and the rest is the caller's business.
    public static func verifyES256(_ token: String, key: P256PublicKey) -> JSONValue? {
        guard let parts = Unverified(token), parts.header["alg"]?.stringValue == "ES256",
              key.verifySHA256(signature: parts.signature, data: parts.signingInput)
        else { return nil }
        return parts.claims
    }
}
