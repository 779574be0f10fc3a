import FCM
import Foundation
import HTTPServer
import JSON
import Synchronization

/// What the emulator's FCM Data API is told (`EmulatorConfiguration.deliveryData`,
/// `EmulatorServer.updateDeliveryData`, `POST /emulator/delivery-data`).
public struct DeliveryDataOptions: Sendable {
    /// The day messages accepted from now on count for; nil: today, an America/Los_Angeles day.
    public var day: DeliveryDataDay?
    /// Entries a page holds at most; nil: as many as asked (FCM's default 1,000, at most 10,000).
    public var pageSize: Int?
    /// Each entry's `data` beside `countMessagesAccepted`, in FCM's shape; empty: all delivered without delay.
    public var data = JSONObject()
    /// The same for one label ("" for the messages without one).
    public var labelData: [String: JSONObject] = [:]
    /// FCM project ids whose keys may not read the data: 403 IAM_PERMISSION_DENIED.
    public var denied: Set<String> = []
    /// FCM project ids where the Data API is not enabled: 403 SERVICE_DISABLED.
    public var disabled: Set<String> = []

    public init() {}
}

/// FCM's Data API as the emulator serves it (`GET /v1beta1/projects/{p}/androidApps/{app}/deliveryData`),
/// from what it received: every message it accepted for a device (a token, a topic's subscriber,
/// a device group's member, an installation id; validate_only ones are not delivered) counts once
/// for its project, day and analytics label (`android.fcm_options.analytics_label`, else
/// `fcm_options.analytics_label`, else none). The emulator does not know which app a token is of,
/// nor whether its device opted in to usage statistics: each app asked of a project gets all of
/// the project's counts, so register one app per project against it.
///
/// What it can be told (`POST /emulator/delivery-data`, the `--delivery-*` options):
/// - `day`: the day messages accepted from now on count for (YYYY-MM-DD; null: today by the
///   clock, an America/Los_Angeles day as FCM's), so a test sends "over two days";
/// - `data`: what each entry's `data` holds beside `countMessagesAccepted` (FCM's own objects:
///   `messageOutcomePercents`, `deliveryPerformancePercents`, `messageInsightPercents`, ...);
///   `label_data`: the same for one label; by default every message is delivered without delay;
/// - `page_size`: entries a page holds at most (FCM "may return fewer" than asked);
/// - `denied`: projects whose keys may not read the data (403 PERMISSION_DENIED, IAM_PERMISSION_DENIED
///   for `fcmdata.deliverydata.list`); `disabled`: projects where the API is not enabled (403
///   SERVICE_DISABLED).
/// A token without the scope `cloud-platform` is answered 403 ACCESS_TOKEN_SCOPE_INSUFFICIENT, as Google does.
final class DeliveryDataBook: Sendable {
    typealias Configuration = DeliveryDataOptions

    private struct State {
        var configuration = Configuration()
        /// project → day → label → messages.
        var counts: [String: [DeliveryDataDay: [String: Int]]] = [:]
        /// The clock's day, cached with the instants it lasts (seconds since 1970).
        var clockDay: (day: DeliveryDataDay, from: Double, until: Double)?
        var listRequests = 0
        var refusals = 0
    }

    private let state: Mutex<State>

    init(configuration: Configuration = Configuration()) {
        state = Mutex(State(configuration: configuration))
    }

    /// Counts `messages` messages of `project` with `label` ("" for none), accepted at `now`.
    func count(project: String, label: String, messages: Int, now: Double) {
        guard messages > 0 else { return }
        state.withLock { state in
            let day = state.configuration.day ?? Self.day(of: now, cache: &state.clockDay)
            state.counts[project, default: [:]][day, default: [:]][label, default: 0] += messages
        }
    }

    /// The label FCM reports an Android message under.
    static func label(of message: JSONObject) -> String {
        if let label = message["android"]?["fcm_options"]?["analytics_label"]?.stringValue { return label }
        return message["fcm_options"]?["analytics_label"]?.stringValue ?? ""
    }

    /// The America/Los_Angeles day of `now`, computed once a day.
    static func day(of now: Double, cache: inout (day: DeliveryDataDay, from: Double, until: Double)?) -> DeliveryDataDay {
        if let cached = cache, now >= cached.from, now < cached.until { return cached.day }
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "America/Los_Angeles") ?? .gmt
        let moment = Date(timeIntervalSince1970: now)
        let parts = calendar.dateComponents([.year, .month, .day], from: moment)
        let day = DeliveryDataDay(year: parts.year ?? 1970, month: parts.month ?? 1, day: parts.day ?? 1)
        if let interval = calendar.dateInterval(of: .day, for: moment) {
            cache = (day, interval.start.timeIntervalSince1970, interval.end.timeIntervalSince1970)
        }
        return day
    }

    func update(_ change: (inout Configuration) -> Void) {
        state.withLock { change(&$0.configuration) }
    }

    func reset() {
        state.withLock { state in
            state.counts = [:]
            state.listRequests = 0
            state.refusals = 0
        }
    }

    // MARK: the Data API

    /// `GET .../deliveryData`: `authorization` is what the bearer token amounts to, `scopes` what
    /// its grant asked for.
    func list(_ request: HTTPServerRequest, project: String, app: String, authorization: Credentials.Authorization,
              scopes: [String]) -> HTTPServerResponse {
        func refuse(_ status: Int, _ code: String, _ message: String, reason: String? = nil, metadata: KeyValuePairs<String, JSONValue> = [:]) -> HTTPServerResponse {
            state.withLock { $0.refusals += 1 }
            var error = JSONObject(["code": JSONValue(status), "message": .string(message), "status": .string(code)])
            if let reason {
                error["details"] = [["@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": .string(reason),
                                     "domain": reason == "IAM_PERMISSION_DENIED" ? "iam.googleapis.com" : "googleapis.com",
                                     "metadata": .object(JSONObject(metadata))]]
            }
            return FCMResponses.json(status, ["error": .object(error)])
        }
        switch authorization {
        case .missing:
            return refuse(401, "UNAUTHENTICATED", "Request is missing required authentication credential. Expected OAuth 2 access token, login cookie or other valid authentication credential.")
        case .invalid, .expired:
            return refuse(401, "UNAUTHENTICATED", "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential.")
        case .project(let owner):
            guard scopes.contains(Credentials.cloudPlatformScope) else {
                return refuse(403, "PERMISSION_DENIED", "Request had insufficient authentication scopes.", reason: "ACCESS_TOKEN_SCOPE_INSUFFICIENT",
                              metadata: ["method": "google.firebase.fcmdata.v1beta1.FcmDataService.ListAndroidDeliveryData",
                                         "service": .string(FCMDataAPI.service)])
            }
            let configuration = state.withLock { $0.configuration }
            if configuration.disabled.contains(project) {
                let url = "https://console.developers.google.com/apis/api/\(FCMDataAPI.service)/overview?project=\(project)"
                return refuse(403, "PERMISSION_DENIED",
                              "Firebase Cloud Messaging Data API has not been used in project \(project) before or it is disabled. Enable it by visiting \(url) then retry.",
                              reason: "SERVICE_DISABLED",
                              metadata: ["service": .string(FCMDataAPI.service), "consumer": .string("projects/\(project)"), "activationUrl": .string(url)])
            }
            guard owner == project, !configuration.denied.contains(project) else {
                let resource = "projects/\(project)/androidApps/\(app)"
                return refuse(403, "PERMISSION_DENIED", "Permission '\(FCMDataAPI.permission)' denied on resource '//\(FCMDataAPI.service)/\(resource)' (or it may not exist).",
                              reason: "IAM_PERMISSION_DENIED",
                              metadata: ["permission": .string(FCMDataAPI.permission), "resource": .string(resource)])
            }
        }
        guard FCMDataAPI.isAndroidAppID(app) else {
            return refuse(404, "NOT_FOUND", "Requested entity was not found.")
        }
        var asked = 1_000  // FCM's default page
        if let text = request.queryValue("pageSize") {
            guard let n = Int(text), n >= 0 else {
                return refuse(400, "INVALID_ARGUMENT", "Invalid value at 'page_size' (TYPE_INT32), \"\(text)\"")
            }
            asked = n == 0 ? 1_000 : min(n, FCMDataAPI.maxPageSize)
        }
        let size = min(asked, state.withLock { $0.configuration.pageSize } ?? asked)
        var offset = 0
        if let token = request.queryValue("pageToken"), !token.isEmpty {
            guard token.hasPrefix("page-"), let n = Int(token.dropFirst(5)), n > 0 else {
                return refuse(400, "INVALID_ARGUMENT", "The page token is not valid.")
            }
            offset = n
        }
        let entries = self.entries(project: project, app: app)
        let page = Array(entries.dropFirst(offset).prefix(size))
        var body = JSONObject()
        if !page.isEmpty { body["androidDeliveryData"] = .array(page) }
        if offset + page.count < entries.count { body["nextPageToken"] = .string("page-\(offset + page.count)") }
        state.withLock { $0.listRequests += 1 }
        return FCMResponses.json(200, .object(body))
    }

    /// Every entry of a project for one app, by day then label.
    private func entries(project: String, app: String) -> [JSONValue] {
        let (byDay, configuration) = state.withLock { ($0.counts[project] ?? [:], $0.configuration) }
        var out: [JSONValue] = []
        for day in byDay.keys.sorted() {
            for (label, count) in byDay[day]!.sorted(by: { $0.key < $1.key }) {
                var data = JSONObject(["countMessagesAccepted": .string(String(count))])
                let told = configuration.labelData[label] ?? configuration.data
                if told.isEmpty {
                    data["messageOutcomePercents"] = ["delivered": 100]
                    data["deliveryPerformancePercents"] = ["deliveredNoDelay": 100]
                }
                for member in told where member.key != "countMessagesAccepted" { data[member.key] = member.value }
                var entry = JSONObject(["appId": .string(app),
                                        "date": ["year": JSONValue(day.year), "month": JSONValue(day.month), "day": JSONValue(day.day)]])
                if !label.isEmpty { entry["analyticsLabel"] = .string(label) }
                entry["data"] = .object(data)
                out.append(.object(entry))
            }
        }
        return out
    }

    // MARK: control

    /// `POST /emulator/delivery-data`: changes what it is told (the members given only; null
    /// clears one). `GET`: the configuration, the counts and the list requests answered.
    func control(_ request: HTTPServerRequest) -> HTTPServerResponse {
        if request.method == "POST" {
            guard let body = try? JSONValue.parse(request.body), let object = body.objectValue else {
                return FCMResponses.json(400, ["error": "the body must be a JSON object: {\"day\", \"data\", \"label_data\", \"page_size\", \"denied\", \"disabled\"}"])
            }
            var changed = state.withLock { $0.configuration }
            if let problem = Self.apply(object, to: &changed) { return FCMResponses.json(400, ["error": .string(problem)]) }
            state.withLock { $0.configuration = changed }
        }
        return FCMResponses.json(200, snapshot())
    }

    /// Applies a control object to `configuration`; a problem in words, or nil.
    static func apply(_ object: JSONObject, to configuration: inout Configuration) -> String? {
        for member in object {
            let value = member.value
            switch member.key {
            case "day":
                if value.isNull { configuration.day = nil; continue }
                guard let text = value.stringValue, let day = DeliveryDataDay(text) else { return "day must be YYYY-MM-DD or null" }
                configuration.day = day
            case "page_size":
                if value.isNull { configuration.pageSize = nil; continue }
                guard let n = value.intValue, n >= 1 else { return "page_size must be a whole number of at least 1, or null" }
                configuration.pageSize = n
            case "data":
                if value.isNull { configuration.data = JSONObject(); continue }
                guard let data = value.objectValue else { return "data must be an object like FCM's (messageOutcomePercents, ...)" }
                configuration.data = data
            case "label_data":
                if value.isNull { configuration.labelData = [:]; continue }
                guard let labels = value.objectValue else { return "label_data must be an object: {\"label\": {...FCM's data...}}" }
                for label in labels {
                    if label.value.isNull { configuration.labelData[label.key] = nil; continue }
                    guard let data = label.value.objectValue else { return "label_data.\(label.key) must be an object" }
                    configuration.labelData[label.key] = data
                }
            case "denied", "disabled":
                let names = value.isNull ? [] : value.arrayValue?.compactMap(\.stringValue)
                guard let names, names.count == (value.arrayValue?.count ?? 0) else { return "\(member.key) must be an array of project ids" }
                if member.key == "denied" { configuration.denied = Set(names) } else { configuration.disabled = Set(names) }
            default:
                return "unknown member \(member.key); give day, data, label_data, page_size, denied or disabled"
            }
        }
        return nil
    }

    func snapshot() -> JSONValue {
        state.withLock { state in
            let c = state.configuration
            var counts = JSONObject()
            for (project, days) in state.counts.sorted(by: { $0.key < $1.key }) {
                var perDay = JSONObject()
                for (day, labels) in days.sorted(by: { $0.key < $1.key }) {
                    var perLabel = JSONObject()
                    for (label, n) in labels.sorted(by: { $0.key < $1.key }) { perLabel[label] = JSONValue(n) }
                    perDay[day.description] = .object(perLabel)
                }
                counts[project] = .object(perDay)
            }
            var labelData = JSONObject()
            for (label, data) in c.labelData.sorted(by: { $0.key < $1.key }) { labelData[label] = .object(data) }
            return [
                "day": c.day.map { .string($0.description) } ?? .null,
                "page_size": c.pageSize.map { JSONValue($0) } ?? .null,
                "data": .object(c.data),
                "label_data": .object(labelData),
                "denied": .array(c.denied.sorted().map { .string($0) }),
                "disabled": .array(c.disabled.sorted().map { .string($0) }),
                "counts": .object(counts),
                "list_requests": JSONValue(state.listRequests),
                "refusals": JSONValue(state.refusals),
            ]
        }
    }
}
