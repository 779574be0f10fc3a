import Crypto
import Glibc
import HTTPServer
import JSON
import Synchronization

/// The service accounts this emulator issued and the OAuth2 access tokens it handed out.
final class Credentials: Sendable {
    struct Account: Sendable {
        var email: String
        var projectID: String
        var publicKey: RSAPublicKey
    }

    struct AccessToken: Sendable {
        var projectID: String
        var expiresAt: Double
        /// The scopes its grant asked for (FCM's Data API takes `cloud-platform` only).
        var scopes: [String] = []
    }

    /// What an `Authorization` header amounts to.
    enum Authorization: Equatable {
        case project(String)
        case missing
        case invalid
        case expired
    }

    static let messagingScope = "https://www.googleapis.com/auth/firebase.messaging"
    /// FCM also honours the broad scope, and the Admin SDKs ask for that one; FCM's Data API takes
    /// this one only.
    static let cloudPlatformScope = "https://www.googleapis.com/auth/cloud-platform"
    static let googleTokenURI = "https://oauth2.googleapis.com/token"

    let lifetimeSeconds: Int
    /// Length of each issued access token in bytes; 0: the short default (about 50 bytes).
    /// Google's service-account tokens are about 1,000 bytes, and every send carries one in
    /// its Authorization header, so a client's per-request cost is measured with both.
    let tokenBytes: Int
    private let accounts = Mutex<[String: Account]>([:])
    private let tokens = Mutex<[String: AccessToken]>([:])
    private let issued = Atomic<Int>(0)
    private let rejected = Atomic<Int>(0)
    private let serial = Atomic<Int>(0)

    init(lifetimeSeconds: Int, tokenBytes: Int = 0) {
        self.lifetimeSeconds = lifetimeSeconds
        self.tokenBytes = tokenBytes
    }

    var tokensIssued: Int { issued.load(ordering: .relaxed) }
    var grantsRejected: Int { rejected.load(ordering: .relaxed) }

    /// Registers a service account's public key; its JWTs are accepted from now on.
    func register(email: String, projectID: String, publicKey: RSAPublicKey) {
        accounts.withLock { $0[email] = Account(email: email, projectID: projectID, publicKey: publicKey) }
    }

    /// A Google-format service-account JSON pointing at `tokenURI`, with a fresh key pair, or
    /// with `key` (accounts written by the hundred share one: a 2048-bit key takes tens of
    /// milliseconds to make, and the emulator tells accounts apart by their email).
    func createServiceAccount(projectID: String, tokenURI: String, key given: RSAPrivateKey? = nil) throws(CryptoError) -> String {
        let key: RSAPrivateKey
        if let given { key = given } else { key = try RSAPrivateKey.generate(bits: 2048) }
        let n = serial.wrappingAdd(1, ordering: .relaxed).newValue
        let email = "herald-emulator\(n == 1 ? "" : "-\(n)")@\(projectID).iam.gserviceaccount.com"
        register(email: email, projectID: projectID, publicKey: key.publicKey)
        let keyID = Random.bytes(20).map { String($0, radix: 16).leftPadded(to: 2) }.joined()
        let clientID = "1" + Random.bytes(10).map { String($0 % 100).leftPadded(to: 2) }.joined()
        let encodedEmail = email.split(separator: "@", omittingEmptySubsequences: false).joined(separator: "%40")
        let document: JSONValue = [
            "type": "service_account",
            "project_id": .string(projectID),
            "private_key_id": .string(keyID),
            "private_key": .string(key.pemPKCS8),
            "client_email": .string(email),
            "client_id": .string(clientID),
            "auth_uri": "https://accounts.google.com/o/oauth2/auth",
            "token_uri": .string(tokenURI),
            "auth_provider_x509_cert_url": "https://www.googleapis.com/oauth2/v1/certs",
            "client_x509_cert_url": .string("https://www.googleapis.com/robot/v1/metadata/x509/\(encodedEmail)"),
            "universe_domain": "googleapis.com",
        ]
        return document.serialized
    }

    // MARK: the token endpoint

    /// Answers `POST /token` (jwt-bearer grant) with an access token or an OAuth2 error.
    func exchange(_ request: HTTPServerRequest, tokenURI: String, now: Double) -> HTTPServerResponse {
        let form = FormDecoding.pairs(String(decoding: request.body, as: UTF8.self))
        func value(_ name: String) -> String? { form.first { $0.name == name }?.value }
        func reject(_ error: String, _ description: String) -> HTTPServerResponse {
            rejected.wrappingAdd(1, ordering: .relaxed)
            return FCMResponses.oauthError(error, description)
        }
        guard let grantType = value("grant_type") else {
            return reject("invalid_request", "Missing required parameter: grant_type")
        }
        guard grantType == "urn:ietf:params:oauth:grant-type:jwt-bearer" else {
            return reject("unsupported_grant_type", "Invalid grant_type: \(grantType)")
        }
        guard let assertion = value("assertion"), !assertion.isEmpty else {
            return reject("invalid_request", "Missing required parameter: assertion")
        }
        let parts = assertion.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let claimBytes = Base64URL.decode(String(parts[1])),
              let unverified = try? JSONValue.parse(claimBytes), let issuer = unverified["iss"]?.stringValue
        else {
            return reject("invalid_grant", "Invalid JWT: the assertion is not a JWT with an iss claim.")
        }
        guard let account = accounts.withLock({ $0[issuer] }) else {
            return reject("invalid_grant", "Invalid grant: account not found")
        }
        guard let claims = JWT.verifyRS256(assertion, key: account.publicKey) else {
            return reject("invalid_grant", "Invalid JWT Signature.")
        }
        guard let expiry = claims["exp"]?.doubleValue, let issuedAt = claims["iat"]?.doubleValue,
              expiry > now, expiry - issuedAt <= 3600, issuedAt <= now + 300, expiry > issuedAt
        else {
            return reject("invalid_grant",
                          "Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe. Check your iat and exp values in the JWT claim.")
        }
        let audience = claims["aud"]?.stringValue ?? ""
        guard audience == tokenURI || audience == Credentials.googleTokenURI || audience == "https://www.googleapis.com/oauth2/v4/token" else {
            return reject("invalid_grant", "Invalid JWT: Failed audience check. The expected audience is \(tokenURI).")
        }
        let scopes = (claims["scope"]?.stringValue ?? "").split(separator: " ").map(String.init)
        guard !scopes.isEmpty else {
            return reject("invalid_scope", "Invalid OAuth scope or ID token audience provided.")
        }
        guard scopes.contains(Credentials.messagingScope) || scopes.contains(Credentials.cloudPlatformScope) else {
            return reject("invalid_scope",
                          "Invalid OAuth scope: FCM sends need \(Credentials.messagingScope) (or \(Credentials.cloudPlatformScope)), got \(scopes.joined(separator: " ")).")
        }
        var token = "ya29.e." + Base64URL.encode(Random.bytes(32))
        if tokenBytes > token.utf8.count {
            // Padded as Google pads its tokens: more base64url text after a separator.
            let padding = tokenBytes - token.utf8.count - 1
            token += "." + String(Base64URL.encode(Random.bytes(padding * 3 / 4 + 3)).prefix(padding))
        }
        let count = issued.wrappingAdd(1, ordering: .relaxed).newValue
        tokens.withLock { table in
            table[token] = AccessToken(projectID: account.projectID, expiresAt: now + Double(lifetimeSeconds), scopes: scopes)
            if count % 1024 == 0 { table = table.filter { $0.value.expiresAt > now } }
        }
        return FCMResponses.json(200, [
            "access_token": .string(token),
            "expires_in": JSONValue(lifetimeSeconds),
            "token_type": "Bearer",
        ])
    }

    // MARK: checking bearer tokens

    func authorize(_ header: String?, now: Double) -> Authorization {
        authorizeWithScopes(header, now: now).authorization
    }

    /// What the header amounts to, and the scopes its token was granted.
    func authorizeWithScopes(_ header: String?, now: Double) -> (authorization: Authorization, scopes: [String]) {
        guard let header, header.utf8.count > 7 else { return (.missing, []) }
        let scheme = header.prefix(7)
        guard scheme == "Bearer " || scheme.lowercased() == "bearer " else { return (.invalid, []) }
        let token = String(header.dropFirst(7))
        guard let entry = tokens.withLock({ $0[token] }) else { return (.invalid, []) }
        return (entry.expiresAt > now ? .project(entry.projectID) : .expired, entry.scopes)
    }
}

/// Wall-clock seconds since 1970.
func realtimeSeconds() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_REALTIME, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

extension String {
    func leftPadded(to width: Int) -> String {
        count >= width ? self : String(repeating: "0", count: width - count) + self
    }
}
