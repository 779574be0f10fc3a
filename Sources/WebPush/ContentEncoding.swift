import Crypto

/// RFC 8291 message encryption over RFC 8188's `aes128gcm` content coding, in one record.
///
/// A body is `salt (16) || rs (4, big endian) || idlen (1) = 65 || keyid (65) || record`: the
/// keyid is the sender's ephemeral public point, and the record is AES-128-GCM of the plaintext,
/// the padding delimiter 0x02 and any zero padding, with its 16-byte tag. Its key and nonce come
/// from the ECDH of the ephemeral key and the browser's `p256dh`, the subscription's `auth`
/// secret and the salt, through HKDF-SHA256:
///
///     IKM   = HKDF(salt: auth, ikm: ECDH, info: "WebPush: info" 0x00 || ua_public || as_public, 32)
///     PRK   = HKDF-Extract(salt: salt, ikm: IKM)
///     CEK   = HKDF-Expand(PRK, "Content-Encoding: aes128gcm" 0x00, 16)
///     NONCE = HKDF-Expand(PRK, "Content-Encoding: nonce" 0x00, 12)
///
/// Every message gets a fresh ephemeral key pair and a fresh random salt: a key and nonce used
/// twice would let anyone who sees both bodies read them.
public enum WebPushEncryption {
    /// The record size written into every body (RFC 8188's `rs`). A body holds one record, so
    /// it is only an upper bound the receiver checks the record against.
    public static let recordSize = 4096
    /// salt, rs, idlen and the 65-byte keyid.
    public static let headerLength = 86
    /// The body a push service must accept (RFC 8030 §7.2): 4,096 bytes.
    public static let maxBodyLength = 4096
    /// What fits in that body once the header, the tag and the padding delimiter are paid for:
    /// 4,096 - 86 - 16 - 1 = 3,993 bytes.
    public static let maxPlaintextLength = maxBodyLength - headerLength - AES128GCM.tagLength - 1

    /// The body carrying `plaintext` to the browser of `keys`, with `padding` zero bytes after the
    /// delimiter (to hide the length; 0 by default), under a fresh key pair and salt.
    public static func encrypt(_ plaintext: [UInt8], for keys: WebPushSubscriptionKeys, padding: Int = 0) throws(WebPushError) -> [UInt8] {
        let ephemeral: P256PrivateKey
        do { ephemeral = try P256PrivateKey.generate() } catch {
            throw WebPushError(field: "encryption", "cannot make an ephemeral P-256 key: \(error)")
        }
        return try encrypt(plaintext, for: keys, ephemeral: ephemeral, salt: Random.bytes(16), padding: padding)
    }

    /// The same with the ephemeral key and the salt given: for known-answer tests only, since a
    /// key or salt used twice gives the message away.
    static func encrypt(_ plaintext: [UInt8], for keys: WebPushSubscriptionKeys, ephemeral: P256PrivateKey, salt: [UInt8],
                        padding: Int) throws(WebPushError) -> [UInt8] {
        guard padding >= 0 else { throw WebPushError(field: "padding", "cannot be negative (\(padding))") }
        guard plaintext.count + padding <= maxPlaintextLength else {
            throw WebPushError(field: "payload", "is \(plaintext.count) bytes\(padding > 0 ? " with \(padding) of padding" : ""); "
                + "one aes128gcm record in a 4,096-byte body carries at most \(maxPlaintextLength)")
        }
        let senderPoint = ephemeral.uncompressedPublicPoint
        let secrets: (key: [UInt8], nonce: [UInt8])
        do {
            let shared = try ephemeral.sharedSecret(with: keys.publicKey)
            secrets = try derive(shared: shared, auth: keys.auth, receiverPoint: keys.p256dh, senderPoint: senderPoint, salt: salt)
        } catch {
            throw WebPushError(field: "encryption", "key agreement failed: \(error)")
        }
        var record = plaintext
        record.reserveCapacity(plaintext.count + 1 + padding + AES128GCM.tagLength)
        record.append(0x02)
        if padding > 0 { record.append(contentsOf: repeatElement(0, count: padding)) }
        let sealed: [UInt8]
        do { sealed = try AES128GCM.seal(record, key: secrets.key, nonce: secrets.nonce) } catch {
            throw WebPushError(field: "encryption", "\(error)")
        }
        var body = salt
        body.reserveCapacity(headerLength + sealed.count)
        let rs = UInt32(recordSize)
        body += [UInt8(rs >> 24), UInt8(rs >> 16 & 0xFF), UInt8(rs >> 8 & 0xFF), UInt8(rs & 0xFF), 65]
        body += senderPoint
        body += sealed
        return body
    }

    /// The plaintext of `body`, as the browser holding `privateKey` and `auth` reads it. The error
    /// (field `body`) says which part of the body is wrong.
    public static func decrypt(_ body: [UInt8], privateKey: P256PrivateKey, auth: [UInt8]) throws(WebPushError) -> [UInt8] {
        func refuse(_ message: String) -> WebPushError { WebPushError(field: "body", message) }
        guard body.count >= headerLength else {
            throw refuse("is \(body.count) bytes, shorter than the \(headerLength)-byte aes128gcm header")
        }
        let salt = Array(body[0..<16])
        let rs = Int(body[16]) << 24 | Int(body[17]) << 16 | Int(body[18]) << 8 | Int(body[19])
        guard rs >= 18 else { throw refuse("declares a record size of \(rs); RFC 8188 needs at least 18") }
        guard body[20] == 65 else {
            throw refuse("has a key id of \(body[20]) bytes; RFC 8291 puts the sender's 65-byte public point there")
        }
        let senderPoint = Array(body[21..<86])
        guard let sender = P256PublicKey(uncompressedPoint: senderPoint) else {
            throw refuse("its key id is not an uncompressed point on P-256")
        }
        let sealed = Array(body[86...])
        guard sealed.count >= AES128GCM.tagLength + 1 else {
            throw refuse("holds \(sealed.count) bytes after the header, too few for a record (a delimiter and a 16-byte tag)")
        }
        guard sealed.count <= rs else {
            throw refuse("holds \(sealed.count) bytes after the header, more than its record size \(rs): "
                + "RFC 8291 allows one record only")
        }
        let secrets: (key: [UInt8], nonce: [UInt8])
        do {
            let shared = try privateKey.sharedSecret(with: sender)
            secrets = try derive(shared: shared, auth: auth, receiverPoint: privateKey.uncompressedPublicPoint,
                                 senderPoint: senderPoint, salt: salt)
        } catch {
            throw refuse("key agreement failed: \(error)")
        }
        guard var record = AES128GCM.open(sealed, key: secrets.key, nonce: secrets.nonce) else {
            throw refuse("does not decrypt: the tag does not verify (encrypted for another subscription's keys, or changed on the way)")
        }
        while record.last == 0 { record.removeLast() }
        guard let delimiter = record.last else { throw refuse("decrypts to padding only, with no delimiter") }
        guard delimiter == 0x02 else {
            throw refuse(delimiter == 0x01
                ? "its record ends with the delimiter 0x01 of a record that is not the last; RFC 8291 allows one record only"
                : "its record ends with 0x\(String(delimiter, radix: 16)), not the padding delimiter 0x02")
        }
        record.removeLast()
        return record
    }

    private static let keyInfoLabel = Array("WebPush: info".utf8) + [0]
    private static let contentKeyInfo = Array("Content-Encoding: aes128gcm".utf8) + [0]
    private static let nonceInfo = Array("Content-Encoding: nonce".utf8) + [0]

    /// The content-encryption key and nonce of one message.
    static func derive(shared: [UInt8], auth: [UInt8], receiverPoint: [UInt8], senderPoint: [UInt8],
                       salt: [UInt8]) throws(CryptoError) -> (key: [UInt8], nonce: [UInt8]) {
        let ikm = try HKDF.sha256(salt: auth, ikm: shared, info: keyInfoLabel + receiverPoint + senderPoint, length: 32)
        let prk = try HKDF.extract(salt: salt, ikm: ikm)
        return (try HKDF.expand(prk: prk, info: contentKeyInfo, length: 16), try HKDF.expand(prk: prk, info: nonceInfo, length: 12))
    }
}
