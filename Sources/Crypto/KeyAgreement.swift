import COpenSSL

// P-256 keys as raw points and the ECDH agreement between them, for Web Push (RFC 8291): a
// browser hands out its public key as an uncompressed point (`p256dh`), and a VAPID public key
// travels the same way (`k=`, a page's `applicationServerKey`).

extension P256PublicKey {
    /// The key of an uncompressed point (0x04, then x and y, 32 big-endian bytes each). Nil unless
    /// `point` is 65 such bytes naming a point on P-256: a compressed point, the point at infinity
    /// or one off the curve are all refused (an off-curve point in an ECDH is how a peer learns
    /// bits of the private key).
    public convenience init?(uncompressedPoint point: [UInt8]) {
        guard point.count == 65, point[0] == 0x04, let like = P256Curve.template,
              let key = herald_p256_from_point(like, point, point.count) else {
            ERR_clear_error()
            return nil
        }
        self.init(pkey: key)
    }

    /// The key as an uncompressed point, 65 bytes.
    public var uncompressedPoint: [UInt8] { encodedPoint(pkey) }
}

extension P256PrivateKey {
    /// The public half as an uncompressed point, 65 bytes.
    public var uncompressedPublicPoint: [UInt8] { encodedPoint(pkey) }

    /// The private scalar, 32 big-endian bytes: for the emulator, which plays a browser and keeps
    /// a subscription's key, and for tests. Never logged or stored by the product.
    public var rawScalar: [UInt8] {
        var bignum: OpaquePointer? = nil
        guard EVP_PKEY_get_bn_param(pkey, "priv", &bignum) == 1, let bignum else { return [] }
        defer { BN_clear_free(bignum) }
        var out = [UInt8](repeating: 0, count: 32)
        guard BN_bn2binpad(bignum, &out, 32) == 32 else { return [] }
        return out
    }

    /// The key pair of a raw private scalar (32 big-endian bytes), its public point computed from
    /// it. For known-answer tests and the emulator; nil when the bytes are not a valid scalar.
    public convenience init?(rawScalar scalar: [UInt8]) {
        guard scalar.count == 32, let key = herald_p256_from_scalar(scalar) else {
            ERR_clear_error()
            return nil
        }
        self.init(pkey: key)
    }

    /// ECDH (the x coordinate of this key times the peer's point, 32 bytes), as RFC 8291's
    /// shared secret.
    public func sharedSecret(with peer: P256PublicKey) throws(CryptoError) -> [UInt8] {
        guard let context = EVP_PKEY_CTX_new(pkey, nil) else { throw CryptoError("out of memory") }
        defer { EVP_PKEY_CTX_free(context) }
        // The peer is not validated again (EVP_PKEY_derive_set_peer would, at the price of a
        // second scalar multiplication, 185 against 93 µs): its point was checked on the curve
        // when it was read, and on P-256 (cofactor 1) every such point is in the group.
        guard EVP_PKEY_derive_init(context) == 1, EVP_PKEY_derive_set_peer_ex(context, peer.pkey, 0) == 1 else {
            throw CryptoError("cannot start an ECDH agreement")
        }
        var secret = [UInt8](repeating: 0, count: 32)
        var length = secret.count
        guard EVP_PKEY_derive(context, &secret, &length) == 1, length == 32 else {
            throw CryptoError("ECDH agreement failed")
        }
        return secret
    }
}

/// One P-256 key made at first use, whose curve every key read from a point or generated for a
/// message copies: read only, so threads share it.
enum P256Curve {
    nonisolated(unsafe) static let template: OpaquePointer? = herald_p256_generate()

    /// A fresh key pair, made from the template's curve.
    static func generate() -> OpaquePointer? {
        guard let template else { return herald_p256_generate() }
        return herald_p256_generate_like(template)
    }
}

/// The public point of an EC key, as OpenSSL encodes it: uncompressed unless the key says
/// otherwise, and no key made here does.
private func encodedPoint(_ pkey: OpaquePointer) -> [UInt8] {
    var point = [UInt8](repeating: 0, count: 65)
    var length = 0
    guard EVP_PKEY_get_octet_string_param(pkey, "encoded-pub-key", &point, point.count, &length) == 1, length == 65 else {
        ERR_clear_error()
        return []
    }
    return point
}

/// HKDF with SHA-256 (RFC 5869) on OpenSSL's HMAC, its context made once and copied for each
/// HMAC: a Web Push message runs five of them, and EVP_KDF's HKDF looked the digest up by name
/// at every step (5.5 µs a step against 1.7 for a copied HMAC context).
public enum HKDF {
    nonisolated(unsafe) private static let hmac: OpaquePointer? = herald_hmac_sha256_template()

    /// Extract then expand: `length` bytes (at most 255 × 32) of key from `ikm` under `salt` and `info`.
    public static func sha256(salt: [UInt8], ikm: [UInt8], info: [UInt8], length: Int) throws(CryptoError) -> [UInt8] {
        try expand(prk: try extract(salt: salt, ikm: ikm), info: info, length: length)
    }

    /// The extract step alone: the 32-byte pseudorandom key, HMAC(salt, ikm).
    public static func extract(salt: [UInt8], ikm: [UInt8]) throws(CryptoError) -> [UInt8] {
        // RFC 5869: no salt is a salt of 32 zero bytes.
        try authenticate(key: salt.isEmpty ? [UInt8](repeating: 0, count: 32) : salt, ikm, [])
    }

    /// The expand step alone: `length` bytes from the pseudorandom key `prk` and `info`:
    /// T(1) || T(2) || ..., T(i) = HMAC(prk, T(i-1) || info || i).
    public static func expand(prk: [UInt8], info: [UInt8], length: Int) throws(CryptoError) -> [UInt8] {
        guard length > 0, length <= 255 * 32 else { throw CryptoError("HKDF cannot make \(length) bytes (1 to 8160)") }
        var out: [UInt8] = []
        out.reserveCapacity(length)
        var previous: [UInt8] = []
        var counter: UInt8 = 1
        while out.count < length {
            previous = try authenticate(key: prk, previous + info, [counter])
            out += previous.prefix(length - out.count)
            counter &+= 1
        }
        return out
    }

    private static func authenticate(key: [UInt8], _ first: [UInt8], _ second: [UInt8]) throws(CryptoError) -> [UInt8] {
        guard let hmac else { throw CryptoError("this OpenSSL has no HMAC-SHA256") }
        var out = [UInt8](repeating: 0, count: 32)
        guard herald_hmac_sha256(hmac, key, key.count, first, first.count, second, second.count, &out) == 1 else {
            throw CryptoError("HMAC-SHA256 failed")
        }
        return out
    }
}

/// AES-128-GCM (16-byte key, 12-byte nonce, 16-byte tag, no associated data), as RFC 8188's
/// records use it.
public enum AES128GCM {
    nonisolated(unsafe) private static let cipher: OpaquePointer? = EVP_CIPHER_fetch(nil, "AES-128-GCM", nil)
    public static let tagLength = 16

    /// The ciphertext followed by the 16-byte tag.
    public static func seal(_ plaintext: [UInt8], key: [UInt8], nonce: [UInt8]) throws(CryptoError) -> [UInt8] {
        guard key.count == 16, nonce.count == 12 else { throw CryptoError("AES-128-GCM needs a 16-byte key and a 12-byte nonce") }
        guard let cipher, let context = EVP_CIPHER_CTX_new() else { throw CryptoError("this OpenSSL has no AES-128-GCM") }
        defer { EVP_CIPHER_CTX_free(context) }
        var out = [UInt8](repeating: 0, count: plaintext.count + tagLength)
        var written: Int32 = 0
        var final: Int32 = 0
        let ok = out.withUnsafeMutableBufferPointer { buffer -> Bool in
            guard let base = buffer.baseAddress,
                  EVP_EncryptInit_ex2(context, cipher, key, nonce, nil) == 1,
                  EVP_EncryptUpdate(context, base, &written, plaintext, Int32(plaintext.count)) == 1,
                  EVP_EncryptFinal_ex(context, base + Int(written), &final) == 1
            else { return false }
            return herald_gcm_get_tag(context, base + Int(written + final), Int32(tagLength)) == 1
        }
        guard ok, Int(written + final) == plaintext.count else { throw CryptoError("AES-128-GCM encryption failed") }
        return out
    }

    /// The plaintext of `sealed` (ciphertext then tag), or nil when the tag does not verify: a
    /// wrong key or nonce, or bytes changed on the way.
    public static func open(_ sealed: [UInt8], key: [UInt8], nonce: [UInt8]) -> [UInt8]? {
        guard key.count == 16, nonce.count == 12, sealed.count >= tagLength,
              let cipher, let context = EVP_CIPHER_CTX_new() else { return nil }
        defer {
            EVP_CIPHER_CTX_free(context)
            ERR_clear_error()
        }
        let length = sealed.count - tagLength
        var out = [UInt8](repeating: 0, count: max(length, 1))
        var written: Int32 = 0
        var final: Int32 = 0
        let ok = sealed.withUnsafeBufferPointer { input -> Bool in
            out.withUnsafeMutableBufferPointer { buffer -> Bool in
                guard let base = buffer.baseAddress, let inputBase = input.baseAddress,
                      EVP_DecryptInit_ex2(context, cipher, key, nonce, nil) == 1,
                      EVP_DecryptUpdate(context, base, &written, inputBase, Int32(length)) == 1,
                      herald_gcm_set_tag(context, inputBase + length, Int32(tagLength)) == 1
                else { return false }
                return EVP_DecryptFinal_ex(context, base + Int(written), &final) == 1
            }
        }
        guard ok, Int(written + final) == length else { return nil }
        return Array(out.prefix(length))
    }
}
