import Dispatch
import Synchronization
import Testing
@testable import Crypto
@testable import WebPush

/// RFC 8291's worked example (section 5, intermediate values in appendix A), every value as the
/// RFC prints it (base64url).
enum RFC8291Example {
    static let plaintext = "When I grow up, I want to be a watermelon"
    static let applicationServerPrivate = "yfWPiYE-n46HLnH0KqZOF1fJJU3MYrct3AELtAQ-oRw"
    static let applicationServerPublic = "BP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A8"
    static let userAgentPrivate = "q1dXpw3UpT5VOmu_cf_v6ih07Aems3njxI-JWgLcM94"
    static let userAgentPublic = "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4"
    static let authSecret = "BTBZMqHH6r4Tts7J_aSIgg"
    static let salt = "DGv6ra1nlYgDCS1FRnbzlw"
    static let sharedECDHSecret = "kyrL1jIIOHEzg3sM2ZWRHDRB62YACZhhSlknJ672kSs"
    static let contentEncryptionKey = "oIhVW04MRdy2XN9CiKLxTg"
    static let nonce = "4h_95klXJ5E_qnoN"
    static let body = "DGv6ra1nlYgDCS1FRnbzlwAAEABBBP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A_yl95bQpu6cVPTpK4Mqgkf1CXztLVBSt2Ks3oZwbuwXPXLWyouBWLVWGNWQexSgSxsj_Qulcy4a-fN"

    static func bytes(_ text: String) -> [UInt8] { Base64URL.decode(text)! }
    static var keys: WebPushSubscriptionKeys { try! WebPushSubscriptionKeys(p256dh: userAgentPublic, auth: authSecret) }
    static var userAgentKey: P256PrivateKey { P256PrivateKey(rawScalar: bytes(userAgentPrivate))! }
    static var applicationServerKey: P256PrivateKey { P256PrivateKey(rawScalar: bytes(applicationServerPrivate))! }
}

@Suite struct WebPushEncryptionTests {
    typealias Example = RFC8291Example

    @Test func decryptsTheRFCExampleBodyExactly() throws {
        let plaintext = try WebPushEncryption.decrypt(Example.bytes(Example.body), privateKey: Example.userAgentKey,
                                                      auth: Example.bytes(Example.authSecret))
        #expect(String(decoding: plaintext, as: UTF8.self) == Example.plaintext)
    }

    @Test func encryptsTheRFCExampleToItsBytesWithItsKeyAndSalt() throws {
        // The published keys read back to the published points.
        #expect(Base64URL.encode(Example.applicationServerKey.uncompressedPublicPoint) == Example.applicationServerPublic)
        #expect(Base64URL.encode(Example.userAgentKey.uncompressedPublicPoint) == Example.userAgentPublic)
        let body = try WebPushEncryption.encrypt(Array(Example.plaintext.utf8), for: Example.keys, ephemeral: Example.applicationServerKey,
                                                 salt: Example.bytes(Example.salt), padding: 0)
        #expect(Base64URL.encode(body) == Example.body)
    }

    @Test func intermediateValuesMatchAppendixA() throws {
        let shared = try Example.applicationServerKey.sharedSecret(with: Example.keys.publicKey)
        #expect(Base64URL.encode(shared) == Example.sharedECDHSecret)
        // Both sides of the agreement reach the same secret.
        let otherSide = try Example.userAgentKey.sharedSecret(with: Example.applicationServerKey.publicKey)
        #expect(otherSide == shared)
        let derived = try WebPushEncryption.derive(shared: shared, auth: Example.bytes(Example.authSecret),
                                                   receiverPoint: Example.bytes(Example.userAgentPublic),
                                                   senderPoint: Example.bytes(Example.applicationServerPublic), salt: Example.bytes(Example.salt))
        #expect(Base64URL.encode(derived.key) == Example.contentEncryptionKey)
        #expect(Base64URL.encode(derived.nonce) == Example.nonce)
    }

    @Test func hkdfKnownAnswerOfRFC5869() throws {
        // RFC 5869 test case 1.
        let ikm = [UInt8](repeating: 0x0b, count: 22)
        let salt: [UInt8] = Array(0x00...0x0c)
        let info: [UInt8] = Array(0xf0...0xf9)
        let okm = try HKDF.sha256(salt: salt, ikm: ikm, info: info, length: 42)
        #expect(okm.map { String(format2: $0) }.joined()
            == "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865")
        let prk = try HKDF.extract(salt: salt, ikm: ikm)
        #expect(prk.map { String(format2: $0) }.joined() == "077709362c2e32df0ddc3f0dc47bba6390b6c73bb50f9c3122ec844ad7c2b3e5")
        #expect(try HKDF.expand(prk: prk, info: info, length: 42) == okm)
    }

    @Test func aTrueRoundTripUsesAFreshKeyAndSaltEachTime() throws {
        let browser = try P256PrivateKey.generate()
        let auth = Random.bytes(16)
        let keys = try WebPushSubscriptionKeys(p256dh: Base64URL.encode(browser.uncompressedPublicPoint), auth: Base64URL.encode(auth))
        let message = Array(#"{"title":"Order 42 shipped","body":"Ünïcode ✓"}"#.utf8)
        let first = try WebPushEncryption.encrypt(message, for: keys)
        let second = try WebPushEncryption.encrypt(message, for: keys)
        #expect(try WebPushEncryption.decrypt(first, privateKey: browser, auth: auth) == message)
        #expect(try WebPushEncryption.decrypt(second, privateKey: browser, auth: auth) == message)
        // Salt (0..<16) and sender key (21..<86) differ between two messages of the same text.
        #expect(first[0..<16] != second[0..<16])
        #expect(first[21..<86] != second[21..<86])
        #expect(first.count == WebPushEncryption.headerLength + message.count + 1 + 16)
        // The header: rs 4096, idlen 65.
        #expect(Array(first[16..<21]) == [0, 0, 0x10, 0, 65])
        // Padding is hidden after the delimiter and removed on reading.
        let padded = try WebPushEncryption.encrypt(message, for: keys, padding: 100)
        #expect(padded.count == first.count + 100)
        #expect(try WebPushEncryption.decrypt(padded, privateKey: browser, auth: auth) == message)
        // An empty message is a valid message.
        #expect(try WebPushEncryption.decrypt(try WebPushEncryption.encrypt([], for: keys), privateKey: browser, auth: auth) == [])
    }

    /// The worker encrypts on several threads at once; the curve template and the HMAC context
    /// they share are only read.
    @Test func threadsEncryptingAtOnceEachGetTheirOwnMessageBack() throws {
        let browsers = try (0..<4).map { _ in try P256PrivateKey.generate() }
        let auths = (0..<4).map { _ in Random.bytes(16) }
        let failures = Mutex(0)
        DispatchQueue.concurrentPerform(iterations: 4) { thread in
            for index in 0..<50 {
                let message = Array("thread \(thread) message \(index)".utf8)
                do {
                    let keys = try WebPushSubscriptionKeys(p256dh: Base64URL.encode(browsers[thread].uncompressedPublicPoint),
                                                           auth: Base64URL.encode(auths[thread]))
                    let body = try WebPushEncryption.encrypt(message, for: keys)
                    if try WebPushEncryption.decrypt(body, privateKey: browsers[thread], auth: auths[thread]) != message {
                        failures.withLock { $0 += 1 }
                    }
                } catch {
                    failures.withLock { $0 += 1 }
                }
            }
        }
        #expect(failures.withLock { $0 } == 0)
    }

    @Test func theLargestPayloadFillsA4096ByteBodyAndOneMoreByteIsRefused() throws {
        let keys = Example.keys
        let largest = [UInt8](repeating: 0x41, count: 3993)
        #expect(WebPushEncryption.maxPlaintextLength == 3993)
        let body = try WebPushEncryption.encrypt(largest, for: keys)
        #expect(body.count == 4096)
        #expect(try WebPushEncryption.decrypt(body, privateKey: Example.userAgentKey, auth: Example.bytes(Example.authSecret)) == largest)
        let error = #expect(throws: WebPushError.self) { try WebPushEncryption.encrypt(largest + [0x41], for: keys) }
        #expect(error?.field == "payload")
        #expect(error?.message.contains("3994 bytes") == true)
        #expect(error?.message.contains("3993") == true)
        let padded = #expect(throws: WebPushError.self) { try WebPushEncryption.encrypt([1, 2, 3], for: keys, padding: 3991) }
        #expect(padded?.message.contains("padding") == true)
    }

    @Test func aBodyForOtherKeysOrChangedOnTheWayDoesNotDecrypt() throws {
        let body = Example.bytes(Example.body)
        let auth = Example.bytes(Example.authSecret)
        func reason(_ body: [UInt8], key: P256PrivateKey = Example.userAgentKey, auth: [UInt8] = Example.bytes(Example.authSecret)) -> String? {
            do {
                _ = try WebPushEncryption.decrypt(body, privateKey: key, auth: auth)
                return nil
            } catch {
                #expect(error.field == "body")
                return error.message
            }
        }
        #expect(reason(body, key: try P256PrivateKey.generate())?.contains("tag does not verify") == true)
        var otherAuth = auth
        otherAuth[0] ^= 1
        #expect(reason(body, auth: otherAuth)?.contains("tag does not verify") == true)
        var flipped = body
        flipped[100] ^= 0x80
        #expect(reason(flipped)?.contains("tag does not verify") == true)
        var saltChanged = body
        saltChanged[3] ^= 1
        #expect(reason(saltChanged)?.contains("tag does not verify") == true)
        #expect(reason(Array(body.prefix(50)))?.contains("shorter than the 86-byte") == true)
        #expect(reason(Array(body.prefix(90)))?.contains("too few for a record") == true)
        var idlen = body
        idlen[20] = 64
        #expect(reason(idlen)?.contains("key id of 64 bytes") == true)
        var smallRecord = body
        smallRecord[16...19] = [0, 0, 0, 17]
        #expect(reason(smallRecord)?.contains("at least 18") == true)
        var twoRecords = body
        twoRecords[16...19] = [0, 0, 0, 30]
        #expect(reason(twoRecords)?.contains("one record only") == true)
        var offCurve = body
        offCurve[84] ^= 1
        #expect(reason(offCurve)?.contains("not an uncompressed point on P-256") == true)
    }

    @Test func aRecordWithoutTheLastDelimiterIsRefused() throws {
        // Sealed by hand with the example's key and nonce: the delimiter 0x01 of a record that
        // is not the last, and a record of padding alone.
        let header = Array(Example.bytes(Example.body).prefix(86))
        let key = Example.bytes(Example.contentEncryptionKey)
        let nonce = Example.bytes(Example.nonce)
        for (record, expected) in [(Array("hi".utf8) + [0x01], "0x01"), (Array("hi".utf8) + [0x03, 0, 0], "not the padding delimiter"),
                                   ([0, 0, 0], "padding only")] {
            let body = header + (try AES128GCM.seal(record, key: key, nonce: nonce))
            let error = #expect(throws: WebPushError.self) {
                try WebPushEncryption.decrypt(body, privateKey: Example.userAgentKey, auth: Example.bytes(Example.authSecret))
            }
            #expect(error?.message.contains(expected) == true, "\(error?.message ?? "")")
        }
    }
}

@Suite struct WebPushSubscriptionKeysTests {
    typealias Example = RFC8291Example

    @Test func acceptsABrowsersKeysWithOrWithoutPadding() throws {
        let keys = try WebPushSubscriptionKeys(p256dh: Example.userAgentPublic, auth: Example.authSecret)
        #expect(keys.p256dh.count == 65 && keys.auth.count == 16)
        // 65 bytes encode to 87 characters: one = of padding; 16 bytes to 22: two.
        let padded = try WebPushSubscriptionKeys(p256dh: Example.userAgentPublic + "=", auth: Example.authSecret + "==")
        #expect(padded.p256dh == keys.p256dh && padded.auth == keys.auth)
    }

    @Test(arguments: [
        ("p256dh empty", "", RFC8291Example.authSecret, "keys.p256dh", "is empty"),
        ("p256dh standard base64", RFC8291Example.userAgentPublic.replacingAll("_", "/").replacingAll("-", "+"), RFC8291Example.authSecret,
         "keys.p256dh", "standard base64"),
        ("p256dh bad character", "BCVx*r7N", RFC8291Example.authSecret, "keys.p256dh", "not base64url"),
        ("p256dh too much padding", RFC8291Example.userAgentPublic + "==", RFC8291Example.authSecret, "keys.p256dh", "not base64url"),
        ("p256dh padding inside", "BCVx=r7N", RFC8291Example.authSecret, "keys.p256dh", "not base64url"),
        ("p256dh 64 bytes", Base64URL.encode([UInt8](repeating: 4, count: 64)), RFC8291Example.authSecret, "keys.p256dh", "not 64"),
        ("p256dh compressed", Base64URL.encode([0x02] + Array(Base64URL.decode(RFC8291Example.userAgentPublic)![1..<33])),
         RFC8291Example.authSecret, "keys.p256dh", "not 33"),
        ("p256dh 65 bytes not uncompressed", Base64URL.encode([0x03] + [UInt8](repeating: 1, count: 64)), RFC8291Example.authSecret,
         "keys.p256dh", "first byte 0x04"),
        ("p256dh off the curve", Base64URL.encode([0x04] + [UInt8](repeating: 1, count: 64)), RFC8291Example.authSecret,
         "keys.p256dh", "not a point on the P-256 curve"),
        ("auth 15 bytes", RFC8291Example.userAgentPublic, Base64URL.encode([UInt8](repeating: 7, count: 15)), "keys.auth", "not 15"),
        ("auth 17 bytes", RFC8291Example.userAgentPublic, Base64URL.encode([UInt8](repeating: 7, count: 17)), "keys.auth", "not 17"),
        ("auth empty", RFC8291Example.userAgentPublic, "", "keys.auth", "is empty"),
        ("auth standard base64", RFC8291Example.userAgentPublic, "BTBZMqHH6r4Tts7J/aSIgg", "keys.auth", "standard base64"),
    ])
    func refusesBadKeysNamingTheField(_ name: String, _ p256dh: String, _ auth: String, _ field: String, _ words: String) {
        let error = #expect(throws: WebPushError.self, "\(name)") { try WebPushSubscriptionKeys(p256dh: p256dh, auth: auth) }
        #expect(error?.field == field, "\(name)")
        #expect(error?.message.contains(words) == true, "\(name): \(error?.message ?? "")")
    }

    @Test func aPointOneBitOffTheBrowsersKeyIsOffTheCurve() {
        var point = Base64URL.decode(RFC8291Example.userAgentPublic)!
        point[64] ^= 1
        #expect(P256PublicKey(uncompressedPoint: point) == nil)
        #expect(P256PublicKey(uncompressedPoint: Base64URL.decode(RFC8291Example.userAgentPublic)!) != nil)
    }
}

extension String {
    init(format2 byte: UInt8) { self = byte < 16 ? "0" + String(byte, radix: 16) : String(byte, radix: 16) }

    func replacingAll(_ target: Character, _ replacement: Character) -> String {
        String(map { $0 == target ? replacement : $0 })
    }
}
