import Crypto

/// The two keys of a browser's push subscription, as `PushSubscription.toJSON()` gives them
/// (`keys.p256dh`, `keys.auth`), decoded and checked: `p256dh` the browser's P-256 public key as
/// an uncompressed point (65 bytes, on the curve), `auth` its 16-byte authentication secret.
///
/// Both arrive base64url without padding from every browser. Trailing `=` padding is accepted
/// too (encoders in several server languages add it, and it changes nothing); the standard
/// alphabet's `+` and `/` are refused with a word on how to fix it, since a subscription that
/// went through `btoa` lost nothing but its alphabet.
public struct WebPushSubscriptionKeys: Sendable {
    /// The browser's public key, 65 bytes (0x04, x, y).
    public let p256dh: [UInt8]
    /// The authentication secret, 16 bytes.
    public let auth: [UInt8]
    /// `p256dh` as OpenSSL holds it, read once for every message to this subscription.
    public let publicKey: P256PublicKey

    /// Decodes and checks the two keys; the error names the field (`keys.p256dh`, `keys.auth`).
    public init(p256dh: String, auth: String) throws(WebPushError) {
        let point = try Self.decode(p256dh, field: "keys.p256dh")
        guard point.count == 65 else {
            throw WebPushError(field: "keys.p256dh", "must decode to 65 bytes (an uncompressed P-256 point), not \(point.count); "
                + "give the value of the browser's PushSubscription.toJSON().keys.p256dh")
        }
        guard point[0] == 0x04 else {
            throw WebPushError(field: "keys.p256dh", "must be an uncompressed P-256 point (first byte 0x04), not one starting 0x"
                + String(point[0], radix: 16))
        }
        guard let key = P256PublicKey(uncompressedPoint: point) else {
            throw WebPushError(field: "keys.p256dh", "is not a point on the P-256 curve; the subscription's key is damaged")
        }
        let secret = try Self.decode(auth, field: "keys.auth")
        guard secret.count == 16 else {
            throw WebPushError(field: "keys.auth", "must decode to 16 bytes, not \(secret.count); "
                + "give the value of the browser's PushSubscription.toJSON().keys.auth")
        }
        self.p256dh = point
        self.auth = secret
        publicKey = key
    }

    /// The bytes of `text`, base64url with or without padding; the error names `field`.
    static func decode(_ text: String, field: String) throws(WebPushError) -> [UInt8] {
        guard !text.isEmpty else { throw WebPushError(field: field, "is empty") }
        let bytes = Array(text.utf8)
        if bytes.contains(where: { $0 == UInt8(ascii: "+") || $0 == UInt8(ascii: "/") }) {
            throw WebPushError(field: field, "is standard base64 (it holds + or /); Web Push keys are base64url: "
                + "write - for + and _ for /, as PushSubscription.toJSON() does")
        }
        // Padding only at the end, and only as much as the length needs.
        let unpadded = bytes.prefix { $0 != UInt8(ascii: "=") }
        let padding = bytes.count - unpadded.count
        guard bytes[unpadded.count...].allSatisfy({ $0 == UInt8(ascii: "=") }), padding == 0 || (unpadded.count + padding) % 4 == 0,
              let decoded = Base64URL.decode(String(decoding: unpadded, as: UTF8.self))
        else {
            throw WebPushError(field: field, "is not base64url (only A-Z, a-z, 0-9, - and _, as PushSubscription.toJSON() gives it)")
        }
        return decoded
    }
}
