import Testing
import JSON
@testable import Crypto
@testable import WebPush

@Suite struct VAPIDTests {
    static let key = try! VAPIDKey.generate()
    static let origin = "https://push.example.net"
    static let now: Int64 = 1_700_000_000

    static func parts(_ authorization: String) -> (token: String, k: String)? {
        guard authorization.hasPrefix("vapid t="), let comma = authorization.firstIndex(of: ",") else { return nil }
        let token = String(authorization[authorization.index(authorization.startIndex, offsetBy: 8)..<comma])
        let rest = authorization[comma...]
        guard rest.hasPrefix(", k=") else { return nil }
        return (token, String(rest.dropFirst(4)))
    }

    @Test func theHeaderCarriesAnES256TokenForTheOriginAndThePublicKey() throws {
        let header = try VAPID.authorization(audience: Self.origin, subject: "mailto:ops@example.com", expiresAt: Self.now + 43200, key: Self.key)
        let (token, k) = try #require(Self.parts(header))
        #expect(k == Self.key.publicKeyBase64URL)
        #expect(Base64URL.decode(k)?.count == 65 && Base64URL.decode(k)?.first == 0x04)
        let jwt = try #require(JWT.Unverified(token))
        #expect(jwt.header == ["typ": "JWT", "alg": "ES256"])
        #expect(jwt.claims == ["aud": .string(Self.origin), "exp": 1_700_043_200, "sub": "mailto:ops@example.com"])
        #expect(jwt.signature.count == 64)
        // The public key in k= alone verifies it, as a push service does.
        let publicKey = try #require(P256PublicKey(uncompressedPoint: Base64URL.decode(k)!))
        #expect(publicKey.verifySHA256(signature: jwt.signature, data: jwt.signingInput))
        // And the service's check accepts it.
        let claims = try VAPID.verify(authorization: header, audience: Self.origin, now: Self.now, appleSubjectRules: true).get()
        #expect(claims == VAPIDClaims(audience: Self.origin, expiresAt: Self.now + 43200, subject: "mailto:ops@example.com", publicKey: k))
    }

    @Test func theServicesCheckRefusesEachFault() throws {
        func header(aud: String = VAPIDTests.origin, sub: String? = "mailto:ops@example.com", exp: Int64? = VAPIDTests.now + 3600,
                    alg: String = "ES256", signer: VAPIDKey = VAPIDTests.key, k: String? = nil) throws -> String {
            var claims = JSONObject(["aud": .string(aud)])
            if let exp { claims["exp"] = .number(String(exp)) }
            if let sub { claims["sub"] = .string(sub) }
            let token = try JWT.signES256(header: ["typ": "JWT", "alg": .string(alg)], claims: .object(claims), key: signer.privateKey)
            return "vapid t=\(token), k=\(k ?? signer.publicKeyBase64URL)"
        }
        func refusal(_ authorization: String?, apple: Bool = false) -> VAPIDRefusal? {
            if case .failure(let refusal) = VAPID.verify(authorization: authorization, audience: Self.origin, now: Self.now, appleSubjectRules: apple) {
                return refusal
            }
            return nil
        }
        let other = try VAPIDKey.generate()
        #expect(refusal(nil) == .missing)
        #expect(refusal("") == .missing)
        #expect(refusal("WebPush eyJ0eXAi.x.y") == .notVapid("WebPush"))
        #expect(refusal("Bearer abc") == .notVapid("Bearer"))
        #expect(refusal("vapid t=abc") == .malformed)
        #expect(refusal("vapid k=\(Self.key.publicKeyBase64URL)") == .malformed)
        #expect(refusal("vapid t=abc, k=\(Self.key.publicKeyBase64URL)") == .badToken)
        #expect(refusal(try header(k: "AAAA")) == .badKey)
        #expect(refusal(try header(alg: "HS256")) == .badAlgorithm("HS256"))
        #expect(refusal(try header(k: other.publicKeyBase64URL)) == .badSignature)
        #expect(refusal(try header(aud: "https://push.example.net:443")) == .wrongAudience(given: "https://push.example.net:443", expected: Self.origin))
        #expect(refusal(try header(aud: "https://push.example.net/")) != nil)
        #expect(refusal(try header(exp: nil)) == .missingExpiry)
        #expect(refusal(try header(exp: Self.now - 5)) == .expired(secondsAgo: 5))
        #expect(refusal(try header(exp: Self.now)) == .expired(secondsAgo: 0))
        #expect(refusal(try header(exp: Self.now + 86401)) == .expiryTooFar(secondsAhead: 86401))
        #expect(refusal(try header(exp: Self.now + 86400)) == nil)
        #expect(refusal(try header(sub: nil)) == .missingSubject)
        #expect(refusal(try header(sub: "")) == .missingSubject)
        // A subject only Apple refuses.
        #expect(refusal(try header(sub: "mailto:ops@localhost")) == nil)
        guard case .badSubject(let words)? = refusal(try header(sub: "mailto:ops@localhost"), apple: true) else {
            Issue.record("Apple's rules let mailto:ops@localhost through")
            return
        }
        #expect(words.contains("localhost"))
        // Parameters in another order, quoted, with spaces: still read.
        let good = try header()
        let (token, k) = try #require(Self.parts(good))
        #expect(refusal("vapid k=\"\(k)\" ,  t=\(token)") == nil)
        #expect(refusal("VAPID t=\(token),k=\(k)") == nil)
        // Every refusal says what to fix in words.
        #expect(VAPIDRefusal.expiryTooFar(secondsAhead: 90000).description.contains("24 hours"))
    }

    @Test(arguments: [
        "mailto:ops@example.com", "mailto:first.last+push@mail.example.co.uk", "https://example.com", "https://push.example.com/contact",
        "https://example.com:8443/about", "mailto:a@b-c.io",
    ])
    func subjectsAppleAccepts(_ subject: String) {
        #expect(VAPIDSubject.problem(subject) == nil, "\(subject): \(VAPIDSubject.problem(subject) ?? "")")
    }

    @Test(arguments: [
        ("", "is empty"),
        ("mailto:ops@localhost", "localhost"),
        ("mailto:ops@LOCALHOST", "localhost"),
        ("mailto:ops@app.localhost", "localhost"),
        ("mailto: ops@example.com", "whitespace"),
        ("mailto:ops@example.com ", "whitespace"),
        ("mailto:<ops@example.com>", "angle brackets"),
        ("<mailto:ops@example.com>", "angle brackets"),
        ("ops@example.com", "without mailto:"),
        ("mailto:", "one e-mail address"),
        ("mailto:ops", "one e-mail address"),
        ("mailto:a@b@example.com", "one e-mail address"),
        ("mailto:ops@example", "not a domain name with a dot"),
        ("mailto:ops@10.0.0.1", "top-level domain of letters"),
        ("mailto:ops@exa_mple.com", "not a DNS name"),
        ("mailto:ops@-example.com", "not a DNS name"),
        ("MAILTO:ops@example.com", "lower case"),
        ("http://example.com", "not http:"),
        ("http://localhost:8080", "not http:"),
        ("https://localhost", "localhost"),
        ("https://127.0.0.1", "top-level domain of letters"),
        ("https://user@example.com", "without user information"),
        ("https://example.com:0", "port"),
        ("https://example.com:99999", "port"),
        ("https://", "not a domain name"),
        ("tel:+15550100", "mailto: address or an https: URL"),
    ])
    func subjectsAppleRefusesAreNamedWithTheRule(_ subject: String, _ words: String) {
        let error = #expect(throws: WebPushError.self, "\(subject)") { try VAPIDSubject.check(subject) }
        #expect(error?.field == "subject")
        #expect(error?.message.contains(words) == true, "\(subject): \(error?.message ?? "")")
    }

    @Test func keygenWritesAPEMThatReadsBackToTheSamePublicKey() throws {
        let key = try VAPIDKey.generate()
        #expect(key.pem.hasPrefix("-----BEGIN PRIVATE KEY-----"))
        // 65 bytes in base64url without padding: 87 characters, what applicationServerKey takes.
        #expect(key.publicKeyBase64URL.count == 87 && !key.publicKeyBase64URL.contains("="))
        let read = try VAPIDKey(pem: key.pem)
        #expect(read.publicKeyBase64URL == key.publicKeyBase64URL)
        // A SEC1 key as `openssl ecparam -name prime256v1 -genkey -noout` writes it (a test key,
        // used nowhere else), and its public key as `openssl ec -pubout` gives the point.
        let sec1 = """
        -----BEGIN EC PRIVATE KEY-----
        MHcCAQEEIJJ4+mKLpp+jQtV+pax+sGUVhAVqbUv4qtAUGIOEFodEoAoGCCqGSM49
        AwEHoUQDQgAE8LkbFD/jLwbWcKCP5XvEKpx+eHKshimYQ+fBAvIXrqQj4AZh2WFh
        wI03l8f7A1JJWAgVikWHBxHciTlSrojiHw==
        -----END EC PRIVATE KEY-----
        """
        #expect(try VAPIDKey(pem: sec1).publicKeyBase64URL == "BPC5GxQ_4y8G1nCgj-V7xCqcfnhyrIYpmEPnwQLyF66kI-AGYdlhYcCNN5fH-wNSSVgIFYpFhwcR3Ik5Uq6I4h8")
        // Another kind of key is named, never quoted.
        let rsa = try RSAPrivateKey.generate(bits: 1024).pemPKCS8
        let error = #expect(throws: WebPushError.self) { try VAPIDKey(pem: rsa, field: "--vapid-key") }
        #expect(error?.field == "--vapid-key")
        #expect(error?.message.contains("an RSA key, not a P-256 (ES256) key as VAPID uses") == true, "\(error?.message ?? "")")
        #expect(error?.message.contains("PRIVATE KEY") == false)
        let garbage = #expect(throws: WebPushError.self) { try VAPIDKey(pem: "not a key") }
        #expect(garbage?.message.contains("VAPID key files start with -----BEGIN PRIVATE KEY-----") == true)
    }
}

@Suite struct VAPIDTokenCacheTests {
    static let key = try! VAPIDKey.generate()

    static func expiry(_ authorization: String) -> Int64? {
        guard let token = VAPIDTests.parts(authorization)?.token else { return nil }
        return JWT.Unverified(token)?.claims["exp"]?.doubleValue.map { Int64($0) }
    }

    @Test func oneTokenPerOriginReusedUntilAnHourBeforeItsEnd() throws {
        var cache = try VAPIDTokenCache(key: Self.key, subject: "mailto:ops@example.com")
        let start: Int64 = 1_700_000_000
        let fcm = "https://fcm.googleapis.com"
        let mozilla = "https://updates.push.services.mozilla.com"
        let first = try cache.authorization(origin: fcm, now: start)
        #expect(Self.expiry(first) == start + 12 * 3600)
        // The same header for every push to that origin for 11 hours.
        for minutes in [1, 60, 600, 659] {
            #expect(try cache.authorization(origin: fcm, now: start + Int64(minutes) * 60) == first)
        }
        #expect(cache.tokensMade == 1)
        // Another origin has its own token, with its own aud.
        let other = try cache.authorization(origin: mozilla, now: start + 60)
        #expect(other != first)
        #expect(try VAPID.verify(authorization: other, audience: mozilla, now: start + 60, appleSubjectRules: true).get().audience == mozilla)
        #expect(cache.tokensMade == 2)
        // An hour before the first one's exp, it is replaced.
        let renewed = try cache.authorization(origin: fcm, now: start + 11 * 3600)
        #expect(renewed != first)
        #expect(Self.expiry(renewed) == start + 23 * 3600)
        #expect(cache.tokensMade == 3)
        // Whenever it is asked, the token it gives a service is accepted there.
        for offset: Int64 in [0, 3599, 7200, 39599, 39600, 80000] {
            let header = try cache.authorization(origin: fcm, now: start + offset)
            #expect(throws: Never.self) { try VAPID.verify(authorization: header, audience: fcm, now: start + offset, appleSubjectRules: true).get() }
        }
    }

    @Test func refusesASubjectAppleRefusesAndALifetimeOver24Hours() {
        let subject = #expect(throws: WebPushError.self) { try VAPIDTokenCache(key: Self.key, subject: "mailto:me@localhost") }
        #expect(subject?.field == "subject")
        let lifetime = #expect(throws: WebPushError.self) {
            try VAPIDTokenCache(key: Self.key, subject: "mailto:ops@example.com", lifetime: 86401)
        }
        #expect(lifetime?.field == "lifetime")
        #expect(throws: WebPushError.self) { try VAPIDTokenCache(key: Self.key, subject: "mailto:ops@example.com", lifetime: 3600, renewBefore: 3600) }
    }

    @Test func holdsABoundedNumberOfOrigins() throws {
        var cache = try VAPIDTokenCache(key: Self.key, subject: "https://example.com", maximumOrigins: 3)
        let now: Int64 = 1_700_000_000
        for index in 0..<10 { _ = try cache.authorization(origin: "https://push\(index).example.net", now: now + Int64(index)) }
        #expect(cache.origins == 3)
        // The newest stay: asking for the last origin again signs nothing new.
        let made = cache.tokensMade
        _ = try cache.authorization(origin: "https://push9.example.net", now: now + 20)
        #expect(cache.tokensMade == made)
    }
}
