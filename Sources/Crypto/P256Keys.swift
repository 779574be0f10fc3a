import COpenSSL

/// An ECDSA private key on the P-256 curve (prime256v1), as Apple hands out APNs signing keys:
/// a `.p8` file holding PKCS#8 PEM. Signing from several threads at once is safe: each signature
/// uses its own digest context and the key itself is only read.
public final class P256PrivateKey: @unchecked Sendable {
    let pkey: OpaquePointer

    init(pkey: OpaquePointer) { self.pkey = pkey }
    deinit { EVP_PKEY_free(pkey) }

    /// Reads a PEM private key (PKCS#8 `BEGIN PRIVATE KEY`, as in Apple's `.p8` files, or SEC1
    /// `BEGIN EC PRIVATE KEY`) and refuses any key that is not on P-256. The errors say what kind
    /// of key it was, never what it holds, and name `use` (`APNs`, `VAPID`): what the key is for.
    public init(pem: String, use: String = "APNs") throws(CryptoError) {
        guard let key = withMemoryBIO(pem, { PEM_read_bio_PrivateKey($0, nil, nil, nil) }) else {
            throw CryptoError("not a PEM private key (\(use) key files start with -----BEGIN PRIVATE KEY-----)")
        }
        if let problem = P256PrivateKey.curveProblem(key, use: use) {
            EVP_PKEY_free(key)
            ERR_clear_error()
            throw CryptoError(problem)
        }
        pkey = key
    }

    /// A fresh key pair: a VAPID key, a Web Push message's ephemeral key, the emulator's keys.
    public static func generate() throws(CryptoError) -> P256PrivateKey {
        guard let key = P256Curve.generate() else { throw CryptoError("P-256 key generation failed") }
        return P256PrivateKey(pkey: key)
    }

    /// Why `key` is not a P-256 key, or nil when it is one.
    static func curveProblem(_ key: OpaquePointer, what: String = "private key", use: String = "APNs") -> String? {
        let type = EVP_PKEY_get_base_id(key)
        guard type == EVP_PKEY_EC else {
            let kind: String
            switch type {
            case EVP_PKEY_RSA: kind = "an RSA key"
            case EVP_PKEY_ED25519: kind = "an Ed25519 key"
            case EVP_PKEY_DSA: kind = "a DSA key"
            default: kind = "not an elliptic-curve key"
            }
            return "the \(what) is \(kind), not a P-256 (ES256) key as \(use) uses"
        }
        let curve = groupName(key)
        guard curve == "prime256v1" || curve == "P-256" else {
            return "the \(what) is on the curve \(curve ?? "unknown"), not P-256 (prime256v1) as \(use) uses"
        }
        return nil
    }

    static func groupName(_ key: OpaquePointer) -> String? {
        var buffer = [CChar](repeating: 0, count: 64)
        var length = 0
        guard EVP_PKEY_get_group_name(key, &buffer, buffer.count, &length) == 1 else { return nil }
        return String(decoding: buffer.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// The key as PKCS#8 PEM (`-----BEGIN PRIVATE KEY-----`), the form of Apple's `.p8` files.
    public var pemPKCS8: String {
        writeToMemoryBIO { PEM_write_bio_PrivateKey($0, pkey, nil, nil, 0, nil, nil) }
    }

    public var publicKey: P256PublicKey {
        let pem = writeToMemoryBIO { PEM_write_bio_PUBKEY($0, pkey) }
        // A public key written by OpenSSL a moment ago always reads back.
        return try! P256PublicKey(pem: pem)
    }

    /// An ECDSA signature over the SHA-256 digest of `data` as JOSE's ES256 wants it: r and s,
    /// 32 big-endian bytes each (64 bytes), not the DER that OpenSSL produces.
    public func signSHA256(_ data: [UInt8]) throws(CryptoError) -> [UInt8] {
        guard let raw = ES256Signature.raw(fromDER: try signSHA256DER(data)) else {
            throw CryptoError("cannot turn an ES256 signature into r||s")
        }
        return raw
    }

    /// The same signature in DER (ASN.1 SEQUENCE of r and s), as `openssl dgst -sign` writes it.
    public func signSHA256DER(_ data: [UInt8]) throws(CryptoError) -> [UInt8] {
        try digestSignSHA256(pkey, data, algorithm: "ES256")
    }
}

/// A P-256 public key held by OpenSSL.
public final class P256PublicKey: @unchecked Sendable {
    let pkey: OpaquePointer

    init(pkey: OpaquePointer) { self.pkey = pkey }
    deinit { EVP_PKEY_free(pkey) }

    /// Reads a PEM public key (`-----BEGIN PUBLIC KEY-----`) on P-256.
    public init(pem: String) throws(CryptoError) {
        guard let key = withMemoryBIO(pem, { PEM_read_bio_PUBKEY($0, nil, nil, nil) }) else {
            throw CryptoError("not a PEM public key")
        }
        if let problem = P256PrivateKey.curveProblem(key, what: "public key") {
            EVP_PKEY_free(key)
            ERR_clear_error()
            throw CryptoError(problem)
        }
        pkey = key
    }

    public var pem: String { writeToMemoryBIO { PEM_write_bio_PUBKEY($0, pkey) } }

    /// Whether `signature` (64 bytes, r||s) is a valid ES256 signature of `data` by this key's
    /// private half. Any other length is refused, DER included.
    public func verifySHA256(signature: [UInt8], data: [UInt8]) -> Bool {
        guard let der = ES256Signature.der(fromRaw: signature) else { return false }
        return verifySHA256(derSignature: der, data: data)
    }

    /// Whether `derSignature` (DER, as `openssl dgst -sign` writes) verifies.
    public func verifySHA256(derSignature: [UInt8], data: [UInt8]) -> Bool {
        digestVerifySHA256(pkey, signature: derSignature, data: data)
    }
}


/// The two forms of a P-256 ECDSA signature: DER (an ASN.1 SEQUENCE of the integers r and s, as
/// OpenSSL and `openssl dgst` write it) and JOSE's r||s (32 big-endian bytes each).
public enum ES256Signature {
    /// r||s from DER; nil when `der` is not one DER signature whose r and s fit 32 bytes.
    public static func raw(fromDER der: [UInt8]) -> [UInt8]? {
        var raw = [UInt8](repeating: 0, count: 64)
        guard herald_ecdsa_der_to_raw(der, der.count, &raw, 32) == 1 else {
            ERR_clear_error()
            return nil
        }
        return raw
    }

    /// DER from r||s; nil unless `raw` is 64 bytes.
    public static func der(fromRaw raw: [UInt8]) -> [UInt8]? {
        guard raw.count == 64 else { return nil }
        var der = [UInt8](repeating: 0, count: 80)
        let length = herald_ecdsa_raw_to_der(raw, 32, &der, Int32(der.count))
        guard length > 0 else {
            ERR_clear_error()
            return nil
        }
        return Array(der.prefix(Int(length)))
    }
}
