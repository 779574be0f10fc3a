import Crypto
import WebPush

/// What the wire of one Web Push message costs a sender's CPU, part by part, on one thread: the
/// price the worker pays per message beyond an FCM message (a fresh P-256 key pair, an ECDH, four
/// HKDF steps and AES-128-GCM; the VAPID header is a cache hit). Figures are the thread's own CPU
/// time (CLOCK_THREAD_CPUTIME_ID), so other processes on the machine stretch them less than wall
/// time, though a shared core's caches still do.
public enum WebPushCost {
    /// Microseconds of CPU per operation, by name, in the order measured.
    public struct Figures: Sendable {
        public var rows: [(name: String, microseconds: Double)] = []
        public var payloadBytes: Int = 0

        public func microseconds(_ name: String) -> Double? { rows.first { $0.name == name }?.microseconds }

        /// One line per operation, `name  12.3 µs`.
        public var text: String {
            let width = rows.map(\.name.count).max() ?? 0
            return rows.map { row in
                let padded = row.name + String(repeating: " ", count: width - row.name.count)
                let value = (row.microseconds * 10).rounded() / 10
                return "\(padded)  \(value) µs"
            }.joined(separator: "\n")
        }
    }

    /// Measures `iterations` operations of each kind, in `rounds` rounds, and keeps each kind's
    /// median round (the rounds of a shared machine differ; the median is the steady figure).
    public static func measure(payloadBytes: Int = 200, iterations: Int = 2000, rounds: Int = 5) throws -> Figures {
        let browser = try P256PrivateKey.generate()
        let auth = Random.bytes(16)
        let p256dh = Base64URL.encode(browser.uncompressedPublicPoint)
        let authText = Base64URL.encode(auth)
        let keys = try WebPushSubscriptionKeys(p256dh: p256dh, auth: authText)
        let payload = [UInt8](repeating: 0x61, count: payloadBytes)
        let vapid = try VAPIDKey.generate()
        var cache = try VAPIDTokenCache(key: vapid, subject: "mailto:ops@example.com")
        let origin = "https://fcm.googleapis.com"
        let now: Int64 = 1_700_000_000
        _ = try cache.authorization(origin: origin, now: now)
        let ephemeral = try P256PrivateKey.generate()
        let shared = try ephemeral.sharedSecret(with: P256PublicKey(uncompressedPoint: keys.p256dh)!)
        let salt = Random.bytes(16)
        var sink = 0

        var figures = Figures()
        figures.payloadBytes = payloadBytes
        func row(_ name: String, _ body: () throws -> Int) rethrows {
            var perRound: [Double] = []
            for _ in 0..<rounds {
                let start = threadCPUSeconds()
                for _ in 0..<iterations { sink &+= try body() }
                perRound.append((threadCPUSeconds() - start) / Double(iterations) * 1e6)
            }
            figures.rows.append((name, perRound.sorted()[perRound.count / 2]))
        }

        // What every message costs anyway: its header lines put together (the authorization
        // line of a token already made).
        let made = try cache.authorization(origin: origin, now: now)
        row("nothing (the request's header lines)") {
            ["ttl: 3600", "content-encoding: aes128gcm", "authorization: " + made].count
        }
        try row("subscription keys read (base64url, point on the curve)") {
            try WebPushSubscriptionKeys(p256dh: p256dh, auth: authText).p256dh.count
        }
        try row("P-256 key pair generated") { try P256PrivateKey.generate().uncompressedPublicPoint.count }
        try row("ECDH") { try ephemeral.sharedSecret(with: keys.publicKey).count }
        try row("HKDF (IKM, PRK, key, nonce)") {
            try WebPushEncryptionCost.derive(shared: shared, auth: auth, receiver: keys.p256dh, sender: ephemeral.uncompressedPublicPoint,
                                             salt: salt)
        }
        try row("AES-128-GCM of the record") {
            try AES128GCM.seal(payload + [2], key: Array(salt.prefix(16)), nonce: Array(salt.prefix(12))).count
        }
        try row("VAPID header, cached") { try cache.authorization(origin: origin, now: now).utf8.count }
        try row("VAPID header, signed anew (once per origin per 11 h)") {
            try VAPID.authorization(audience: origin, subject: "mailto:ops@example.com", expiresAt: now + 3600, key: vapid).utf8.count
        }
        try row("encryption + cached VAPID header (per message)") {
            let body = try WebPushEncryption.encrypt(payload, for: try WebPushSubscriptionKeys(p256dh: p256dh, auth: authText))
            return body.count + (try cache.authorization(origin: origin, now: now)).utf8.count
        }
        if sink == 42 { print("") }  // keeps the work from being optimised away
        return figures
    }
}

/// HKDF's four steps as `WebPushEncryption` runs them, measured on their own.
enum WebPushEncryptionCost {
    static let keyInfo = Array("WebPush: info".utf8) + [0]
    static let contentKeyInfo = Array("Content-Encoding: aes128gcm".utf8) + [0]
    static let nonceInfo = Array("Content-Encoding: nonce".utf8) + [0]

    static func derive(shared: [UInt8], auth: [UInt8], receiver: [UInt8], sender: [UInt8], salt: [UInt8]) throws -> Int {
        let ikm = try HKDF.sha256(salt: auth, ikm: shared, info: keyInfo + receiver + sender, length: 32)
        let prk = try HKDF.extract(salt: salt, ikm: ikm)
        return try HKDF.expand(prk: prk, info: contentKeyInfo, length: 16).count + HKDF.expand(prk: prk, info: nonceInfo, length: 12).count
    }
}
