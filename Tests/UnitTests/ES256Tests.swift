import Foundation
import Testing
import JSON
@testable import Crypto

@Suite struct ES256Tests {
    /// A P-256 key made once with `openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256`
    /// (PKCS#8, the form of Apple's .p8 files); a test key, used nowhere else.
    static let fixedKey = """
    -----BEGIN PRIVATE KEY-----
    MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgJT0BFlbUK9bUVGvD
    b5al1IX1Th9pXub/6zhDA/hRXryhRANCAAQaTQ3BkrAXoyllLvJVAoI4g7SL77aS
    ueHxf0aAZS2C/+lPbjj5btvEfe/6OcqjwnCyFQsHSjvVbFHMnXXa8shU
    -----END PRIVATE KEY-----
    """
    /// A JWT signing input (header {"alg":"ES256","kid":"ABC123DEFG"}, claims {"iss":"DEF123GHIJ","iat":1700000000}).
    static let fixedInput = "eyJhbGciOiJFUzI1NiIsImtpZCI6IkFCQzEyM0RFRkcifQ.eyJpc3MiOiJERUYxMjNHSElKIiwiaWF0IjoxNzAwMDAwMDAwfQ"
    /// r and s of the signature `openssl dgst -sha256 -sign` made of `fixedInput` with `fixedKey`
    /// (read with `openssl asn1parse`).
    static let fixedR = "2E62A99734D731EE7D04B2BC6131F71F35D79C4AC2BAF962CEE63FD02E4BB5A7"
    static let fixedS = "6F00D9D386A50F210B96D652D632450BEDB98652C1327014313060D3A6419B2D"

    static func bytes(hex: String) -> [UInt8] {
        var out: [UInt8] = []
        var iterator = hex.makeIterator()
        while let high = iterator.next(), let low = iterator.next() { out.append(UInt8(String([high, low]), radix: 16)!) }
        return out
    }

    @Test func knownAnswerFromTheOpenSSLCommandLineVerifies() throws {
        let key = try P256PrivateKey(pem: Self.fixedKey)
        let signature = Self.bytes(hex: Self.fixedR + Self.fixedS)
        let data = Array(Self.fixedInput.utf8)
        #expect(key.publicKey.verifySHA256(signature: signature, data: data))
        // The whole token, as a JWT library would see it, verifies too and yields its claims.
        let token = Self.fixedInput + "." + Base64URL.encode(signature)
        #expect(JWT.verifyES256(token, key: key.publicKey) == ["iss": "DEF123GHIJ", "iat": 1_700_000_000])
        // One bit changed in the signature, or in the signed text, and it no longer verifies.
        var flipped = signature
        flipped[40] ^= 0x01
        #expect(!key.publicKey.verifySHA256(signature: flipped, data: data))
        #expect(!key.publicKey.verifySHA256(signature: signature, data: data + [0x20]))
        // Nor with another key.
        #expect(!(try P256PrivateKey.generate()).publicKey.verifySHA256(signature: signature, data: data))
        // DER is not what ES256 sends: the raw verifier refuses it.
        let der = try #require(ES256Signature.der(fromRaw: signature))
        #expect(!key.publicKey.verifySHA256(signature: der, data: data))
        #expect(ES256Signature.raw(fromDER: der) == signature)
    }

    @Test func jwtHasTheHeaderAPNsWantsAndARawSignature() throws {
        let key = try P256PrivateKey(pem: Self.fixedKey)
        let claims: JSONValue = ["iss": "DEF123GHIJ", "iat": 1_700_000_000]
        let token = try JWT.signES256(claims: claims, keyID: "ABC123DEFG", key: key)
        let parts = token.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        #expect(parts.count == 3)
        // Same header and claims as the known answer's input, so the same signing input.
        #expect(parts[0] + "." + parts[1] == Self.fixedInput)
        #expect(try JSONValue.parse(Base64URL.decode(parts[0])!) == ["alg": "ES256", "kid": "ABC123DEFG"])
        #expect(Base64URL.decode(parts[2])?.count == 64)
        #expect(JWT.verifyES256(token, key: key.publicKey) == claims)
        #expect(JWT.verifyRS256(token, key: (try RSAPrivateKey.generate()).publicKey) == nil)
        let unverified = try #require(JWT.Unverified(token))
        #expect(unverified.header["kid"]?.stringValue == "ABC123DEFG")
    }

    @Test func signaturesCrossCheckWithTheOpenSSLCommandLine() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("herald-es256-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let key = try P256PrivateKey.generate()
        let data = Array("header.claims for the command line".utf8)
        try Data(data).write(to: directory.appendingPathComponent("data"))
        try key.pemPKCS8.write(to: directory.appendingPathComponent("key.p8"), atomically: true, encoding: .utf8)
        try key.publicKey.pem.write(to: directory.appendingPathComponent("pub.pem"), atomically: true, encoding: .utf8)
        func openssl(_ arguments: [String]) throws -> Int32 {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
            process.arguments = arguments
            process.currentDirectoryURL = directory
            process.standardOutput = FileHandle.nullDevice
            try process.run()
            process.waitUntilExit()
            return process.terminationStatus
        }
        // Ours, turned into DER, verified by openssl.
        let ours = try key.signSHA256(data)
        #expect(ours.count == 64)
        try Data(try #require(ES256Signature.der(fromRaw: ours))).write(to: directory.appendingPathComponent("ours.der"))
        #expect(try openssl(["dgst", "-sha256", "-verify", "pub.pem", "-signature", "ours.der", "data"]) == 0)
        // openssl's, made with the .p8 file as written, turned into r||s, verified by ours.
        #expect(try openssl(["dgst", "-sha256", "-sign", "key.p8", "-out", "theirs.der", "data"]) == 0)
        let theirs = [UInt8](try Data(contentsOf: directory.appendingPathComponent("theirs.der")))
        let raw = try #require(ES256Signature.raw(fromDER: theirs))
        #expect(key.publicKey.verifySHA256(signature: raw, data: data))
        #expect(!key.publicKey.verifySHA256(signature: raw, data: Array("other".utf8)))
    }

    @Test func everySignatureIsSixtyFourBytesEvenWithShortHalves() throws {
        // r or s below 2^248 (a half in 256, so about one signature in 128) comes out of DER
        // shorter than 32 bytes; the r||s form must pad it, or a verifier reads the halves wrong.
        // Signed until three such signatures came (some hundreds; 20,000 at most, which leaves
        // no chance worth naming of meeting none), each checked.
        let key = try P256PrivateKey.generate()
        let data = Array("padding".utf8)
        var short = 0, signed = 0
        while short < 3 && signed < 20_000 {
            let der = try key.signSHA256DER(data)
            let raw = try #require(ES256Signature.raw(fromDER: der))
            signed += 1
            #expect(raw.count == 64)
            if raw[0] == 0 || raw[32] == 0 {
                short += 1
                #expect(key.publicKey.verifySHA256(signature: raw, data: data), "a signature with a short half does not verify")
            } else if signed <= 50 {
                #expect(key.publicKey.verifySHA256(signature: raw, data: data))
            }
        }
        #expect(short == 3, "\(signed) signatures, \(short) with a short half")
    }

    @Test func refusesKeysThatAreNotP256WithoutShowingThem() throws {
        let rsa = try RSAPrivateKey.generate(bits: 2048).pemPKCS8
        let p384 = """
        -----BEGIN PRIVATE KEY-----
        MIG2AgEAMBAGByqGSM49AgEGBSuBBAAiBIGeMIGbAgEBBDAdozDad+UkQ7HydE+1
        BBJClNms5/JoAfQfwtJg3l1hLYp8Pbi8+FH00JX/vgahILOhZANiAATMSGyJ/7hw
        //kEHRpDxiXWvt/FAhbKpNCuq3v5KITSkERtR/QGjrilwce6Vf39NPvWvu9HrXZ0
        XUJVLW5vjaaKsxGsrD/Y/FvSMcBB+DqvpY3nG+wQy/BkaqGAsn9IeK4=
        -----END PRIVATE KEY-----
        """
        let cases: [(String, String, String)] = [
            ("RSA", rsa, "an RSA key"),
            ("P-384", p384, "secp384r1"),
            ("not PEM", "MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgJT0BFlbUK9bUVGvD", "not a PEM private key"),
            ("public key", (try P256PrivateKey.generate()).publicKey.pem, "not a PEM private key"),
        ]
        for (name, pem, fragment) in cases {
            do {
                _ = try P256PrivateKey(pem: pem)
                Issue.record("\(name): accepted")
            } catch {
                #expect(error.description.contains(fragment), "\(name): \(error.description)")
                // No line of the key's body appears in the error.
                for line in pem.split(separator: "\n") where !line.hasPrefix("-----") && line.count > 8 {
                    #expect(!error.description.contains(line), "\(name): the error shows the key")
                }
            }
        }
    }
}
