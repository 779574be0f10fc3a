import Crypto
import Foundation
import HTTPClient
import JSON
import Synchronization

/// OAuth2 access tokens for a service account (the jwt-bearer grant), cached and renewed
/// before they expire. Thread-safe: callers that find the token stale wait for one renewal.
public final class AccessTokenProvider: @unchecked Sendable {
    public let account: ServiceAccount
    private let caFile: String?
    private let scope: String
    private let now: @Sendable () -> Date
    private let state = Mutex<State>(State())
    /// How much earlier than the 5 minutes (10 % of the lifetime) this provider starts its
    /// background renewal, as a share of that window (0 to 1, drawn once): a worker carrying a
    /// thousand projects fetched their first tokens within a second, and without this spread
    /// their renewals would all fall in one second an hour later.
    public let renewalSpread: Double

    private struct State {
        var header: String?
        var expiresAt = Date.distantPast
        var lifetime: Double = 0
        var renewals = 0
        var client: HTTPClient?
        /// A renewal runs on a background thread while the cached token still serves.
        var renewing = false
        /// After a failed fetch, callers get `lastError` at once until then (no pile-up of
        /// blocking fetches against a token endpoint that is down).
        var failedUntil = Date.distantPast
        var lastError: AuthError?
    }

    /// `caFile` is trusted for an https `token_uri`; `now` is injectable for tests.
    public init(account: ServiceAccount, caFile: String? = nil, scope: String = "https://www.googleapis.com/auth/firebase.messaging",
                now: @escaping @Sendable () -> Date = Date.init, renewalSpread: Double = Double.random(in: 0..<1),
                client: HTTPClient? = nil) {
        self.renewalSpread = min(1, max(0, renewalSpread))
        if let client { state.withLock { $0.client = client } }
        self.account = account
        self.caFile = caFile
        self.scope = scope
        self.now = now
    }

    /// `Bearer <token>`. From the cache while more than 5 minutes (or 10 % of the token's
    /// lifetime, whichever is smaller; up to twice that, by `renewalSpread`) remain. Inside that window the cached token is still
    /// returned and one renewal runs in the background; only in the last minute (or 7.5 % of the
    /// lifetime), or with no token at all, does the caller wait for a fetch. A failed fetch is
    /// remembered for 2 seconds, so a token endpoint that is down costs one wait, not one per job.
    public func authorizationHeader() throws(AuthError) -> String {
        let result: Result<String, AuthError> = state.withLock { state in
            let moment = now()
            if let header = state.header {
                let remaining = state.expiresAt.timeIntervalSince(moment)
                if remaining > min(300, state.lifetime * 0.1) * (1 + renewalSpread) { return .success(header) }
                if remaining > min(60, state.lifetime * 0.075) {
                    if !state.renewing && state.failedUntil <= moment {
                        state.renewing = true
                        startBackgroundRenewal()
                    }
                    return .success(header)
                }
            }
            if state.failedUntil > moment {
                // A fetch just failed: keep using a token that is still valid, else say why.
                if let header = state.header, state.expiresAt.timeIntervalSince(moment) > 1 { return .success(header) }
                if let error = state.lastError { return .failure(error) }
            }
            do throws(AuthError) {
                let (token, lifetime) = try fetch(client: try client(&state), at: moment)
                store(&state, token: token, lifetime: lifetime, at: moment)
                return .success("Bearer " + token)
            } catch {
                state.failedUntil = moment.addingTimeInterval(2)
                state.lastError = error
                return .failure(error)
            }
        }
        return try result.get()
    }

    private func client(_ state: inout State) throws(AuthError) -> HTTPClient {
        if let client = state.client { return client }
        do {
            let client = try Self.tokenClient(caFile: caFile)
            state.client = client
            return client
        } catch {
            throw AuthError("cannot create an HTTP client for the token endpoint \(account.tokenURI): \(error)")
        }
    }

    /// An HTTP client for token endpoints. Providers may share one (`init(client:)`): its
    /// `perform` serialises their fetches on one connection, so a worker carrying a thousand
    /// projects keeps one connection to the token endpoint, not a thousand.
    public static func tokenClient(caFile: String?) throws(HTTPClientError) -> HTTPClient {
        var configuration = HTTPClientConfiguration()
        configuration.caFile = caFile
        configuration.maxConnections = 1
        configuration.connectTimeoutMilliseconds = 5_000
        configuration.requestTimeoutMilliseconds = 15_000
        return try HTTPClient(configuration: configuration)
    }

    private func store(_ state: inout State, token: String, lifetime: Double, at moment: Date) {
        state.header = "Bearer " + token
        state.lifetime = lifetime
        state.expiresAt = moment.addingTimeInterval(lifetime)
        state.renewals += 1
        state.failedUntil = .distantPast
        state.lastError = nil
    }

    private func startBackgroundRenewal() {
        let thread = Thread { [self] in
            let moment = now()
            let outcome: Result<(String, Double), AuthError>
            do throws(AuthError) {
                let client = try state.withLock { (state) throws(AuthError) -> HTTPClient in try self.client(&state) }
                outcome = .success(try fetch(client: client, at: moment))
            } catch {
                outcome = .failure(error)
            }
            state.withLock { state in
                state.renewing = false
                switch outcome {
                case .success(let (token, lifetime)):
                    store(&state, token: token, lifetime: lifetime, at: moment)
                case .failure(let error):
                    state.failedUntil = moment.addingTimeInterval(2)
                    state.lastError = error
                }
            }
        }
        thread.name = "herald-oauth2"
        thread.start()
    }

    /// After a 401: forgets the cached token if it is still `header`, so concurrent 401s for the
    /// same token cause one renewal.
    public func invalidate(ifHeader header: String) {
        state.withLock { state in
            if state.header == header {
                state.header = nil
                state.expiresAt = .distantPast
            }
        }
    }

    /// Tokens fetched so far.
    public var renewals: Int { state.withLock { $0.renewals } }

    private func fetch(client: HTTPClient, at moment: Date) throws(AuthError) -> (token: String, lifetime: Double) {
        let issuedAt = Int(moment.timeIntervalSince1970)
        let claims: JSONValue = [
            "iss": .string(account.clientEmail),
            "scope": .string(scope),
            "aud": .string(account.tokenURI),
            "iat": JSONValue(issuedAt),
            "exp": JSONValue(issuedAt + 3600),
        ]
        let assertion: String
        do {
            assertion = try JWT.signRS256(claims: claims, key: account.privateKey)
        } catch {
            throw AuthError("cannot sign the token grant for \(account.clientEmail): \(error)", refused: true)
        }
        // The assertion is base64url and dots: nothing in it needs percent-encoding.
        let body = "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=" + assertion
        let response: HTTPResponse
        do {
            response = try client.perform(HTTPRequest(method: "POST", url: account.tokenURI,
                                                      headers: ["Content-Type: application/x-www-form-urlencoded", "Accept: application/json"],
                                                      body: Array(body.utf8)))
        } catch {
            throw AuthError("token endpoint \(account.tokenURI) could not be reached: \(error)")
        }
        let document = try? JSONValue.parse(response.body)
        guard response.status == 200 else {
            var detail = ""
            if let error = document?["error"]?.stringValue { detail = error }
            if let description = document?["error_description"]?.stringValue { detail += (detail.isEmpty ? "" : " ") + description }
            if detail.isEmpty { detail = String(decoding: response.body.prefix(200), as: UTF8.self) }
            detail = detail.replacingOccurrences(of: assertion, with: "<assertion>")
            // 4xx: the endpoint refuses this key or grant; 5xx and others: its own trouble, a blip.
            throw AuthError("token endpoint \(account.tokenURI) answered \(response.status): \(detail.prefix(300))",
                            refused: (400..<500).contains(response.status) && response.status != 408 && response.status != 429)
        }
        guard let token = document?["access_token"]?.stringValue, !token.isEmpty else {
            throw AuthError("token endpoint \(account.tokenURI) answered 200 without an access_token")
        }
        let lifetime = document?["expires_in"]?.doubleValue ?? 3600
        guard lifetime > 0 else {
            throw AuthError("token endpoint \(account.tokenURI) answered an expires_in of \(lifetime) seconds")
        }
        return (token, lifetime)
    }
}

/// Why no access token could be had; never holds the grant assertion or a token.
public struct AuthError: Error, Sendable, CustomStringConvertible {
    public var description: String
    /// True when the token endpoint answered and refused the grant (a 4xx such as
    /// `invalid_grant`: a revoked or wrong key), or the key cannot sign: trying again cannot
    /// help. False when the endpoint could not be reached or failed on its side (a blip).
    public var refused: Bool
    public init(_ description: String, refused: Bool = false) {
        self.description = description
        self.refused = refused
    }
}
