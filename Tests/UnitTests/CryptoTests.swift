import Foundation
import Testing
import JSON
@testable import Crypto

@Suite struct CryptoTests {
    // One key for the suite: RSA generation is the slow part.
    static let key = try! RSAPrivateKey.generate(bits: 2048)

    @Test func base64URLRoundTripsEveryLength() {
        for length in 0..<70 {
            let bytes = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) }
            let text = Base64URL.encode(bytes)
            #expect(!text.contains("=") && !text.contains("+") && !text.contains("/"))
            #expect(Base64URL.decode(text) == bytes)
        }
        #expect(Base64URL.encode(Array("any carnal pleas".utf8)) == "YW55IGNhcm5hbCBwbGVhcw")
        #expect(Base64URL.decode("a!b") == nil)
        #expect(Base64URL.decode("abcde") == nil)
    }

    @Test func jwtSignatureVerifiesWithThePublicKeyOnly() throws {
        let claims: JSONValue = ["iss": "svc@example.iam.gserviceaccount.com",
                                 "scope": "https://www.googleapis.com/auth/firebase.messaging",
                                 "aud": "https://oauth2.googleapis.com/token", "iat": 1_700_000_000, "exp": 1_700_003_600]
        let token = try JWT.signRS256(claims: claims, key: Self.key)
        let parts = token.split(separator: ".")
        #expect(parts.count == 3)
        #expect(try JSONValue.parse(Base64URL.decode(String(parts[0]))!) == ["alg": "RS256", "typ": "JWT"])
        #expect(JWT.verifyRS256(token, key: Self.key.publicKey) == claims)

        // Another key's public half, or a changed claim, must not verify.
        let other = try RSAPrivateKey.generate(bits: 2048)
        #expect(JWT.verifyRS256(token, key: other.publicKey) == nil)
        let forged = String(parts[0]) + "." + Base64URL.encode(Array(#"{"iss":"evil"}"#.utf8)) + "." + String(parts[2])
        #expect(JWT.verifyRS256(forged, key: Self.key.publicKey) == nil)
    }

    @Test func signatureMatchesOpenSSLCommandLine() throws {
        // An independent verifier: the openssl CLI checks our RS256 signature with the public key.
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("herald-crypto-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let data = Array("header.payload".utf8)
        try Data(data).write(to: directory.appendingPathComponent("data"))
        try Data(try Self.key.signSHA256(data)).write(to: directory.appendingPathComponent("sig"))
        try Self.key.publicKey.pem.write(to: directory.appendingPathComponent("pub.pem"), atomically: true, encoding: .utf8)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        process.arguments = ["dgst", "-sha256", "-verify", "pub.pem", "-signature", "sig", "data"]
        process.currentDirectoryURL = directory
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
    }

    @Test func pemRoundTripAndErrors() throws {
        let pem = Self.key.pemPKCS8
        #expect(pem.hasPrefix("-----BEGIN PRIVATE KEY-----"))
        let again = try RSAPrivateKey(pem: pem)
        #expect(again.publicKey.pem == Self.key.publicKey.pem)
        #expect(throws: CryptoError.self) { try RSAPrivateKey(pem: "-----BEGIN PRIVATE KEY-----\nnope\n-----END PRIVATE KEY-----\n") }
        do {
            _ = try RSAPrivateKey(pem: "garbage")
        } catch {
            #expect(!error.description.contains("garbage"))
        }
    }

    @Test func sha256KnownAnswer() {
        let digest = SHA256.hash(Array("abc".utf8))
        #expect(digest.map { String(format: "%02x", $0) }.joined()
            == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
    }
}
