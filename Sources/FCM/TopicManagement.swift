import Foundation
import HTTPClient
import JSON

/// Instance ID topic management, the calls the Admin SDKs make for `subscribe_to_topic` and
/// `unsubscribe_from_topic`: `POST {base}/iid/v1:batchAdd` (or `:batchRemove`) with
/// `{"to": "/topics/NAME", "registration_tokens": [...]}`, `Authorization: Bearer`, and
/// `access_token_auth: true`. The answer holds one result per token, in order: `{}` for done,
/// `{"error": "NOT_FOUND"}` for a token refused.
public enum TopicManagement {
    /// The most tokens one request carries.
    public static let maxTokensPerRequest = 1000
    /// The most requests a second FCM takes per project; Herald stays under it.
    public static let maxRequestsPerSecond = 3000.0
    /// Instance ID's public base URL (HERALD_IID_URL overrides it).
    public static let defaultBaseURL = "https://iid.googleapis.com"

    public enum Action: String, Sendable {
        case add = "batchAdd"
        case remove = "batchRemove"
    }

    /// Per-token error codes that may go away by asking again.
    public static let retryableTokenErrors: Set<String> = ["INTERNAL", "UNAVAILABLE", "RESOURCE_EXHAUSTED", "DEADLINE_EXCEEDED", "UNKNOWN"]

    public static func url(base: String, action: Action) -> String {
        var base = base
        while base.hasSuffix("/") { base.removeLast() }
        return "\(base)/iid/v1:\(action.rawValue)"
    }

    public static func request(base: String, action: Action, topic: String, tokens: [String], authorization: String) -> HTTPRequest {
        let body: JSONValue = ["to": .string("/topics/" + topic), "registration_tokens": .array(tokens.map { .string($0) })]
        return HTTPRequest(method: "POST", url: url(base: base, action: action),
                           headers: ["Content-Type: application/json", "access_token_auth: true", "Authorization: \(authorization)"],
                           body: Array(body.serialized.utf8))
    }

    /// What one request's answer means for each of its tokens.
    public enum Answer: Sendable, Equatable {
        /// 200: one entry per token, nil for done, else the error code.
        case perToken([String?])
        /// The whole request should be tried again (429, 5xx, our access token refused, a
        /// transport failure, a malformed 200); `retryAfter` in seconds when the answer gave one.
        case retry(reason: String, retryAfter: Double?, quota: Bool, authentication: Bool)
        /// The whole request was refused for good (another 4xx): every token fails with `reason`.
        case refused(reason: String)
    }

    /// What `response` means; `secrets` (the access token sent) never appear in a reason.
    public static func interpret(_ response: HTTPResponse, tokenCount: Int, now: Date = Date(), secrets: [String] = []) -> Answer {
        let raw = String(decoding: response.body.prefix(1024), as: UTF8.self)
            .split(whereSeparator: { $0.isWhitespace }).joined(separator: " ")
        let text = Redact.secrets(in: raw, limit: 1024, also: secrets)
        let retryAfter = response.header("retry-after").flatMap { RetryAfter.parse($0, now: now) }
        switch response.status {
        case 200:
            guard let results = (try? JSONValue.parse(response.body))?["results"]?.arrayValue, results.count == tokenCount else {
                return .retry(reason: "HTTP 200 without one result per token: \(text)", retryAfter: nil, quota: false, authentication: false)
            }
            return .perToken(results.map { result in
                guard let error = result["error"] else { return nil }
                return error.stringValue ?? error.serialized
            })
        case 401:
            return .retry(reason: "HTTP 401 (the access token was refused): \(text)", retryAfter: retryAfter, quota: false, authentication: true)
        case 429:
            return .retry(reason: "RESOURCE_EXHAUSTED: HTTP 429: \(text)", retryAfter: retryAfter, quota: true, authentication: false)
        case 500...599:
            return .retry(reason: "HTTP \(response.status): \(text)", retryAfter: retryAfter, quota: false, authentication: false)
        default:
            return .refused(reason: "HTTP \(response.status): \(text)")
        }
    }
}
