import COpenSSL

/// What an OpenSSL call refused, with OpenSSL's own reason. Never carries key material.
public struct CryptoError: Error, Sendable, CustomStringConvertible {
    public var description: String

    init(_ what: String) {
        var reasons: [String] = []
        while true {
            let code = ERR_get_error()
            if code == 0 { break }
            var buffer = [CChar](repeating: 0, count: 256)
            ERR_error_string_n(code, &buffer, buffer.count)
            reasons.append(String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
        }
        description = reasons.isEmpty ? what : "\(what) (\(reasons.joined(separator: "; ")))"
    }
}

/// An RSA private key held by OpenSSL. Signing from several threads at once is safe: each
/// signature uses its own digest context and the key itself is only read.
public final class RSAPrivateKey: @unchecked Sendable {
    let pkey: OpaquePointer

    private init(pkey: OpaquePointer) { self.pkey = pkey }
    deinit { EVP_PKEY_free(pkey) }

    /// Reads a PEM private key (PKCS#8 `BEGIN PRIVATE KEY`, as Google service accounts carry, or
    /// PKCS#1 `BEGIN RSA PRIVATE KEY`).
    public init(pem: String) throws(CryptoError) {
        // The service accounts' shape first, with its own decoder (a worker carrying a thousand
        // projects reads a thousand keys); any other PEM key with the general reader.
        let pkcs8 = pem.contains("-----BEGIN PRIVATE KEY-----") ? withMemoryBIO(pem, { herald_read_pkcs8_rsa_pem($0) }) : nil
        ERR_clear_error()
        guard let key = pkcs8 ?? withMemoryBIO(pem, { PEM_read_bio_PrivateKey($0, nil, nil, nil) }) else {
            throw CryptoError("not a PEM private key")
        }
        guard EVP_PKEY_get_base_id(key) == EVP_PKEY_RSA else {
            EVP_PKEY_free(key)
            throw CryptoError("the private key is not an RSA key")
        }
        pkey = key
    }

    /// A fresh key pair.
    public static func generate(bits: Int = 2048) throws(CryptoError) -> RSAPrivateKey {
        guard let key = herald_rsa_generate(UInt32(bits)) else { throw CryptoError("RSA key generation failed") }
        return RSAPrivateKey(pkey: key)
    }

    /// The key as PKCS#8 PEM (`-----BEGIN PRIVATE KEY-----`).
    public var pemPKCS8: String {
        writeToMemoryBIO { PEM_write_bio_PrivateKey($0, pkey, nil, nil, 0, nil, nil) }
    }

    public var publicKey: RSAPublicKey {
        let pem = writeToMemoryBIO { PEM_write_bio_PUBKEY($0, pkey) }
        // A public key written by OpenSSL a moment ago always reads back.
        return try! RSAPublicKey(pem: pem)
    }

    /// An RSASSA-PKCS1-v1_5 signature over the SHA-256 digest of `data` (JWT's RS256).
    public func signSHA256(_ data: [UInt8]) throws(CryptoError) -> [UInt8] {
        try digestSignSHA256(pkey, data, algorithm: "RS256")
    }
}

/// An RSA public key held by OpenSSL.
public final class RSAPublicKey: @unchecked Sendable {
    let pkey: OpaquePointer

    deinit { EVP_PKEY_free(pkey) }

    /// Reads a PEM public key (`-----BEGIN PUBLIC KEY-----`).
    public init(pem: String) throws(CryptoError) {
        guard let key = withMemoryBIO(pem, { PEM_read_bio_PUBKEY($0, nil, nil, nil) }) else {
            throw CryptoError("not a PEM public key")
        }
        pkey = key
    }

    public var pem: String { writeToMemoryBIO { PEM_write_bio_PUBKEY($0, pkey) } }

    /// Whether `signature` is a valid RS256 signature of `data` by this key's private half.
    public func verifySHA256(signature: [UInt8], data: [UInt8]) -> Bool {
        digestVerifySHA256(pkey, signature: signature, data: data)
    }
}

/// A signature over the SHA-256 digest of `data` with `pkey`, as OpenSSL makes it for the key's
/// type (PKCS#1 v1.5 for RSA, DER ECDSA for EC); `algorithm` names it in errors.
func digestSignSHA256(_ pkey: OpaquePointer, _ data: [UInt8], algorithm: String) throws(CryptoError) -> [UInt8] {
    guard let context = EVP_MD_CTX_new() else { throw CryptoError("out of memory") }
    defer { EVP_MD_CTX_free(context) }
    guard EVP_DigestSignInit(context, nil, EVP_sha256(), nil, pkey) == 1 else {
        throw CryptoError("cannot start an \(algorithm) signature")
    }
    var length = 0
    guard EVP_DigestSign(context, nil, &length, data, data.count) == 1 else {
        throw CryptoError("cannot size an \(algorithm) signature")
    }
    var signature = [UInt8](repeating: 0, count: length)
    guard EVP_DigestSign(context, &signature, &length, data, data.count) == 1 else {
        throw CryptoError("\(algorithm) signing failed")
    }
    return Array(signature.prefix(length))
}

/// Whether `signature` (in OpenSSL's form for the key's type) verifies `data` under `pkey`.
func digestVerifySHA256(_ pkey: OpaquePointer, signature: [UInt8], data: [UInt8]) -> Bool {
    guard let context = EVP_MD_CTX_new() else { return false }
    defer {
        EVP_MD_CTX_free(context)
        ERR_clear_error()
    }
    guard EVP_DigestVerifyInit(context, nil, EVP_sha256(), nil, pkey) == 1 else { return false }
    return EVP_DigestVerify(context, signature, signature.count, data, data.count) == 1
}

func withMemoryBIO<T>(_ text: String, _ body: (OpaquePointer) -> T?) -> T? {
    var bytes = Array(text.utf8)
    return bytes.withUnsafeMutableBytes { raw -> T? in
        guard let bio = BIO_new_mem_buf(raw.baseAddress, Int32(raw.count)) else { return nil }
        defer { BIO_free(bio) }
        return body(bio)
    }
}

func writeToMemoryBIO(_ body: (OpaquePointer) -> Int32) -> String {
    guard let bio = BIO_new(BIO_s_mem()) else { return "" }
    defer { BIO_free(bio) }
    guard body(bio) == 1 else { return "" }
    var pointer: UnsafeMutablePointer<CChar>?
    let length = herald_bio_get_mem_data(bio, &pointer)
    guard let pointer, length > 0 else { return "" }
    return String(decoding: UnsafeRawBufferPointer(start: pointer, count: Int(length)), as: UTF8.self)
}

/// Cryptographically strong random bytes.
public enum Random {
    public static func bytes(_ count: Int) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: count)
        precondition(RAND_bytes(&out, Int32(count)) == 1, "OpenSSL's random generator failed")
        return out
    }
}

public enum SHA256 {
    public static func hash(_ data: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: Int(SHA256_DIGEST_LENGTH))
        _ = COpenSSL.SHA256(data, data.count, &out)
        return out
    }
}
