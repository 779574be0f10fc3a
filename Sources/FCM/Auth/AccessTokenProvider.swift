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

    private struct State {
        var header: String?
        var expiresAt = Date.distantPast
        var lifetime: Double = 0
        var renewals = 0
        var client: HTTPClient?
    }

    /// `caFile` is trusted for an https `token_uri`; `now` is injectable for tests.
    public init(account: ServiceAccount, caFile: String? = nil, scope: String = "https://www.googleapis.com/auth/firebase.messaging",
                now: @escaping @Sendable () -> Date = Date.init) {
        self.account = account
        self.caFile = caFile
        self.scope = scope
        self.now = now
    }

    /// `Bearer <token>`, from the cache while more than 5 minutes (or 10 % of the token's
    /// lifetime, whichever is smaller) remain, else freshly fetched.
    public func authorizationHeader() throws(AuthError) -> String {
        let result: Result<String, AuthError> = state.withLock { state in
            let moment = now()
            if let header = state.header {
                let margin = min(300, state.lifetime * 0.1)
                if state.expiresAt.timeIntervalSince(moment) > margin { return .success(header) }
            }
            do throws(AuthError) {
                if state.client == nil {
                    var configuration = HTTPClientConfiguration()
                    configuration.caFile = caFile
                    configuration.maxConnections = 1
                    do {
                        state.client = try HTTPClient(configuration: configuration)
                    } catch {
                        throw AuthError("cannot create an HTTP client for the token endpoint \(account.tokenURI): \(error)")
                    }
                }
                let (token, lifetime) = try fetch(client: state.client!, at: moment)
                state.header = "Bearer " + token
                state.lifetime = lifetime
                state.expiresAt = moment.addingTimeInterval(lifetime)
                state.renewals += 1
                return .success("Bearer " + token)
            } catch {
                return .failure(error)
            }
        }
        return try result.get()
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
            throw AuthError("cannot sign the token grant for \(account.clientEmail): \(error)")
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
            throw AuthError("token endpoint \(account.tokenURI) answered \(response.status): \(detail.prefix(300))")
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
    public init(_ description: String) { self.description = description }
}
