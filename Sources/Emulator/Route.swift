/// The emulator's endpoints, told apart by method and path alone.
public enum Route: Sendable, Equatable {
    /// `POST /token`: the OAuth2 jwt-bearer exchange.
    case token
    /// `POST /v1/projects/{project}/messages:send`.
    case send(project: String)
    /// `POST /fcm/notification`: create, add or remove a device group.
    case manageDeviceGroup
    /// `GET /fcm/notification?notification_key_name=...`.
    case lookUpDeviceGroup
    /// `POST /iid/v1:batchAdd` (add) or `POST /iid/v1:batchRemove`: topic subscriptions.
    case topicBatch(add: Bool)
    /// `GET /emulator/messages[?token=|topic=|condition=][&limit=N]`.
    case listMessages
    /// `DELETE /emulator/messages`: forget messages, counters and fault attempts.
    case reset
    /// `GET /emulator/apns/messages[?token=HEX][&limit=N]`: what the APNs side accepted.
    case listAPNsMessages
    /// `GET /emulator/stats`.
    case stats
    /// `GET /emulator/refusals[?limit=N]`: the quota answers given (QUOTA_EXCEEDED), oldest first.
    case listRefusals
    /// `GET /emulator/health`: 200 once listening, for scripts waiting on start-up.
    case health
    /// `GET /v1beta1/projects/{project}/androidApps/{app}/deliveryData`: FCM's Data API.
    case deliveryData(project: String, app: String)
    /// `GET|POST /emulator/delivery-data`: what the Data API is told to answer, and its counts.
    case deliveryDataControl
    /// A known path with a method it does not take; `allowed` lists the ones it does.
    case methodNotAllowed(allowed: String)
    /// `POST /3/device/{token}`: APNs's provider API (any method; the APNs side answers 405 itself).
    case apnsSend(deviceToken: String)
    /// Any other path under `/3/`: APNs's 404 BadPath.
    case apnsBadPath
    /// `POST /webpush/subscriptions`: a subscription issued as a browser would.
    case webPushSubscribe
    /// `POST /webpush/push/{id}`: a push to an issued subscription (any method; the Web Push side answers 405 itself).
    case webPushSend(subscriptionID: String)
    /// `GET /emulator/webpush/messages[?subscription=ID][&limit=N]`.
    case webPushMessages
    case notFound

    public static func match(method: String, path: String) -> Route {
        switch path {
        case "/token":
            return method == "POST" ? .token : .methodNotAllowed(allowed: "POST")
        case "/fcm/notification":
            switch method {
            case "POST": return .manageDeviceGroup
            case "GET": return .lookUpDeviceGroup
            default: return .methodNotAllowed(allowed: "GET, POST")
            }
        case "/iid/v1:batchAdd", "/iid/v1:batchRemove":
            return method == "POST" ? .topicBatch(add: path.hasSuffix("batchAdd")) : .methodNotAllowed(allowed: "POST")
        case "/emulator/messages":
            switch method {
            case "GET": return .listMessages
            case "DELETE": return .reset
            default: return .methodNotAllowed(allowed: "GET, DELETE")
            }
        case "/emulator/apns/messages":
            return method == "GET" ? .listAPNsMessages : .methodNotAllowed(allowed: "GET")
        case "/emulator/stats":
            return method == "GET" ? .stats : .methodNotAllowed(allowed: "GET")
        case "/emulator/refusals":
            return method == "GET" ? .listRefusals : .methodNotAllowed(allowed: "GET")
        case "/emulator/health":
            return method == "GET" ? .health : .methodNotAllowed(allowed: "GET")
        case "/webpush/subscriptions":
            return method == "POST" ? .webPushSubscribe : .methodNotAllowed(allowed: "POST")
        case "/emulator/webpush/messages":
            return method == "GET" ? .webPushMessages : .methodNotAllowed(allowed: "GET")
        case "/emulator/delivery-data":
            return method == "GET" || method == "POST" ? .deliveryDataControl : .methodNotAllowed(allowed: "GET, POST")
        default:
            break
        }
        // APNs: /3/device/{token}, the token up to the end (a slash in it is a bad path)
        if path.hasPrefix("/3/") {
            let prefix = "/3/device/"
            guard path.hasPrefix(prefix) else { return .apnsBadPath }
            let token = String(path.dropFirst(prefix.count))
            guard !token.utf8.contains(UInt8(ascii: "/")) else { return .apnsBadPath }
            return .apnsSend(deviceToken: token)
        }
        // Web Push: /webpush/push/{id}, the id up to the end
        let pushPrefix = "/webpush/push/"
        if path.hasPrefix(pushPrefix) {
            let id = String(path.dropFirst(pushPrefix.count))
            guard !id.isEmpty, !id.utf8.contains(UInt8(ascii: "/")) else { return .notFound }
            return .webPushSend(subscriptionID: id)
        }
        // /v1beta1/projects/{project}/androidApps/{app}/deliveryData
        if path.hasPrefix("/v1beta1/projects/") && path.hasSuffix("/deliveryData") {
            let parts = path.split(separator: "/", omittingEmptySubsequences: false)
            guard parts.count == 7, parts[4] == "androidApps", !parts[3].isEmpty, !parts[5].isEmpty else { return .notFound }
            return method == "GET" ? .deliveryData(project: String(parts[3]), app: String(parts[5])) : .methodNotAllowed(allowed: "GET")
        }
        // /v1/projects/{project}/messages:send
        let prefix = "/v1/projects/"
        let suffix = "/messages:send"
        guard path.hasPrefix(prefix), path.hasSuffix(suffix), path.utf8.count > prefix.utf8.count + suffix.utf8.count else {
            return .notFound
        }
        let start = path.utf8.index(path.utf8.startIndex, offsetBy: prefix.utf8.count)
        let end = path.utf8.index(path.utf8.endIndex, offsetBy: -suffix.utf8.count)
        let project = String(path[start..<end])
        // By byte: with Foundation imported, String.contains(String) is a locale-aware search,
        // and this runs for every send the emulator answers.
        guard !project.utf8.contains(UInt8(ascii: "/")) else { return .notFound }
        return method == "POST" ? .send(project: project) : .methodNotAllowed(allowed: "POST")
    }
}
