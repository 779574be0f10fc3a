import HTTPClient
import JSON

/// What Herald does about one APNs answer (docs/apns.md has the table and its sources).
public enum APNsAction: Sendable, Equatable {
    /// 200: delivered; `apnsID` is the `apns-id` Apple answered with.
    case delivered(apnsID: String?)
    /// 410 Unregistered / ExpiredToken: the token is dead; prune it unless it was registered again
    /// after `invalidSinceMilliseconds` (Apple's `timestamp`, milliseconds since 1970).
    case pruneToken(reason: String, invalidSinceMilliseconds: Int64?)
    /// The message can never be delivered as it is: dead-letter it with `reason`.
    case deadLetter(reason: String)
    /// 403 ExpiredProviderToken: renew the provider token and send again without using an attempt.
    case renewProviderToken
    /// A fault of the app's key, team or topic that every job of the app would meet: pause the app.
    case pauseApp(reason: String)
    /// 429 TooManyRequests: too many pushes to this device; back the device off (growing, durable).
    case deviceBackoff(reason: String)
    /// 429 TooManyProviderTokenUpdates: keep the current provider token, renew none for a while,
    /// and send the job again later.
    case holdTokenRenewals(reason: String)
    /// 500, 503 and the like: try again after a backoff, or after `retryAfterSeconds` when Apple gave one.
    case retry(reason: String, retryAfterSeconds: Int?)
    /// The request never reached an answer (refused connection, TLS, timeout): the app's endpoint
    /// counts as down (its outage circuit).
    case outage(reason: String)
    /// The request was not processed or never sent (REFUSED_STREAM, a GOAWAY above it, a client
    /// queue timeout): send it again without using an attempt.
    case resend(reason: String)
}

/// Apple's answers read into `APNsAction`s: pure, no state.
public enum APNsAnswer {
    /// The answer to an APNs request: its status, body (`{"reason": ..., "timestamp": ...}`) and
    /// the headers Herald reads (`apns-id`, `retry-after`).
    public static func action(status: Int, body: [UInt8], apnsID: String? = nil, retryAfter: String? = nil) -> APNsAction {
        if status == 200 { return .delivered(apnsID: apnsID) }
        let document = try? JSONValue.parse(body)
        let reason = document?["reason"]?.stringValue ?? ""
        let named = reason.isEmpty ? "HTTP \(status) without a reason" : reason
        switch (status, reason) {
        case (410, _):
            let timestamp = document?["timestamp"].flatMap { value -> Int64? in
                if let n = value.doubleValue { return Int64(n) }
                if let s = value.stringValue { return Int64(s) }
                return nil
            }
            return .pruneToken(reason: reason.isEmpty ? "Unregistered" : reason, invalidSinceMilliseconds: timestamp)
        case (400, "BadDeviceToken"):
            return .deadLetter(reason: "BadDeviceToken: APNs refused the device token; it may belong to the other environment (a sandbox token sent to production, or the reverse) or not be a device token at all")
        case (400, "DeviceTokenNotForTopic"):
            return .deadLetter(reason: "DeviceTokenNotForTopic: the device token belongs to another app or push type than the topic sent")
        case (_, "TopicDisallowed"):
            return .pauseApp(reason: "TopicDisallowed: APNs does not allow this app's key to push to its topic")
        case (400, "IdleTimeout"):
            return .resend(reason: "IdleTimeout: APNs closed an idle connection")
        case (400, _), (413, _):
            return .deadLetter(reason: named)
        case (403, "ExpiredProviderToken"):
            return .renewProviderToken
        case (403, _):
            return .pauseApp(reason: named + providerHint(reason))
        case (404, _), (405, _):
            return .pauseApp(reason: "\(named): the APNs URL does not lead to APNs's /3/device/ endpoint")
        case (429, "TooManyProviderTokenUpdates"):
            return .holdTokenRenewals(reason: named)
        case (429, _):
            return .deviceBackoff(reason: named)
        case (500...599, _):
            return .retry(reason: named, retryAfterSeconds: retryAfter.flatMap(retryAfterSeconds))
        default:
            return .deadLetter(reason: "HTTP \(status)" + (reason.isEmpty ? "" : " " + reason))
        }
    }

    /// An `HTTPResponse` from the client.
    public static func action(_ response: HTTPResponse) -> APNsAction {
        action(status: response.status, body: response.body, apnsID: response.header("apns-id"), retryAfter: response.header("retry-after"))
    }

    /// A request that got no answer.
    public static func action(_ failure: HTTPClientError) -> APNsAction {
        switch failure.kind {
        case .unprocessed: return .resend(reason: failure.description)
        case .timeout, .connection, .tls, .other: return .outage(reason: failure.description)
        }
    }

    /// What decided a `pauseApp`, as herald stats, the dashboard and
    /// herald_project_paused_jobs{cause} name it: `apns_topic` for TopicDisallowed, `apns_url` for a
    /// URL that is not the provider API (BadPath, MethodNotAllowed), `apns_auth` for Apple's
    /// refusal of the provider token (InvalidProviderToken and the other 403s).
    public static func pauseCause(reason: String) -> String {
        if reason.hasPrefix("TopicDisallowed") { return "apns_topic" }
        if reason.hasPrefix("BadPath") || reason.hasPrefix("MethodNotAllowed") || reason.hasPrefix("HTTP 404") || reason.hasPrefix("HTTP 405") {
            return "apns_url"
        }
        return "apns_auth"
    }

    /// What an operator should look at for a 403 that is not an expired token.
    static func providerHint(_ reason: String) -> String {
        switch reason {
        case "InvalidProviderToken": return ": the key, key ID or team ID does not match what Apple holds"
        case "BadEnvironmentKeyIdInToken": return ": the key is not enabled for this environment (sandbox or production)"
        case "MissingProviderToken": return ": no provider token was sent"
        case "BadCertificateEnvironment", "BadCertificate": return ": the connection's credentials are for another environment or invalid"
        case "Forbidden": return ": APNs forbids this action for the app's key"
        default: return ""
        }
    }

    /// Delta-seconds of a Retry-After header (HTTP dates are not used by APNs and are ignored).
    static func retryAfterSeconds(_ text: String) -> Int? {
        let trimmed = text.trimmingSpaces
        guard let seconds = Int(trimmed), seconds >= 0 else { return nil }
        return min(seconds, 86_400)
    }
}

extension String {
    var trimmingSpaces: String {
        var slice = Substring(self)
        while slice.first == " " || slice.first == "\t" { slice.removeFirst() }
        while slice.last == " " || slice.last == "\t" { slice.removeLast() }
        return String(slice)
    }
}
