import struct Foundation.Date
import JSON

/// FCM's Data API (`fcmdata.googleapis.com`, v1beta1, `projects.androidApps.deliveryData.list`):
/// what became of the messages FCM accepted for one Android app, per day and analytics label.
/// The request and its pages, and its answers read; no I/O (the fetch is the worker's).
///
/// The facts here are the API's discovery document (revision 20260726): `GET
/// /v1beta1/projects/{project}/androidApps/{app}/deliveryData?pageSize=N&pageToken=T`, an empty
/// body, the OAuth scope `cloud-platform`; the answer `{"androidDeliveryData": [...],
/// "nextPageToken": "..."}`, no token on the last page. The IAM permission is
/// `fcmdata.deliverydata.list`, held by the role Firebase Cloud Messaging API Admin (the one that
/// sends) and by Firebase Cloud Messaging API Viewer.
public enum FCMDataAPI {
    public static let defaultBaseURL = "https://fcmdata.googleapis.com"
    /// The only scope deliveryData.list accepts; FCM's send scope (`firebase.messaging`) is refused.
    public static let scope = "https://www.googleapis.com/auth/cloud-platform"
    /// The IAM permission a service account needs on the project.
    public static let permission = "fcmdata.deliverydata.list"
    /// The Google Cloud API that must be enabled in the project.
    public static let service = "fcmdata.googleapis.com"
    /// Entries a page holds at most (larger page sizes are capped by FCM to this).
    public static let maxPageSize = 10_000

    /// `{base}/v1beta1/projects/{project}/androidApps/{app}/deliveryData?pageSize=N[&pageToken=T]`.
    /// The app id keeps its colons (the path's `parent` is expanded as reserved characters); the
    /// page token is percent-encoded.
    public static func listURL(baseURL: String, fcmProject: String, appID: String, pageSize: Int, pageToken: String?) -> String {
        var base = baseURL
        while base.hasSuffix("/") { base.removeLast() }
        var url = "\(base)/v1beta1/projects/\(fcmProject)/androidApps/\(appID)/deliveryData?pageSize=\(max(1, min(pageSize, maxPageSize)))"
        if let pageToken, !pageToken.isEmpty { url += "&pageToken=" + percentEncoded(pageToken) }
        return url
    }

    /// A Firebase Android app id: `1:<project number>:android:<hex>`, as the Firebase console
    /// shows it (Project settings, Your apps, App ID).
    public static func isAndroidAppID(_ text: String) -> Bool {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        guard text.utf8.count <= 100, parts.count == 4, parts[2] == "android" else { return false }
        func digits(_ s: Substring) -> Bool { !s.isEmpty && s.utf8.allSatisfy { $0 >= 48 && $0 <= 57 } }
        func hex(_ s: Substring) -> Bool {
            !s.isEmpty && s.utf8.allSatisfy { ($0 >= 48 && $0 <= 57) || ($0 >= 97 && $0 <= 102) }
        }
        return digits(parts[0]) && digits(parts[1]) && hex(parts[3])
    }

    static func percentEncoded(_ text: String) -> String {
        var out = ""
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "."), UInt8(ascii: "~"):
                out.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                let digits = Array("0123456789ABCDEF".utf8)
                out += "%" + String(decoding: [digits[Int(byte >> 4)], digits[Int(byte & 15)]], as: UTF8.self)
            }
        }
        return out
    }
}

/// A calendar day as the Data API names it (`google.type.Date`). FCM's days end at midnight in
/// America/Los_Angeles (the API's own words for `pending`), not at midnight UTC.
public struct DeliveryDataDay: Sendable, Hashable, Comparable, CustomStringConvertible {
    public var year: Int
    public var month: Int
    public var day: Int

    public init(year: Int, month: Int, day: Int) {
        self.year = year
        self.month = month
        self.day = day
    }

    /// `2026-03-01`.
    public init?(_ text: String) {
        let parts = text.split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0].count == 4, parts[1].count == 2, parts[2].count == 2,
              let y = Int(parts[0]), let m = Int(parts[1]), let d = Int(parts[2]) else { return nil }
        self.init(year: y, month: m, day: d)
        guard isValid else { return nil }
    }

    /// A full date (FCM may in principle send a year alone or a month with a zero day; those are not days).
    public var isValid: Bool { (1...9999).contains(year) && (1...12).contains(month) && (1...31).contains(day) }

    /// `YYYY-MM-DD`.
    public var description: String {
        func two(_ n: Int) -> String { n < 10 ? "0\(n)" : "\(n)" }
        let y = String(year)
        return String(repeating: "0", count: max(0, 4 - y.count)) + y + "-" + two(month) + "-" + two(day)
    }

    public static func < (a: Self, b: Self) -> Bool { (a.year, a.month, a.day) < (b.year, b.month, b.day) }
}

/// One entry of a page: the numbers of one app, day and analytics label, as FCM gives them.
/// Percentages are of `messagesAccepted` (0 to 100); a figure FCM left out is nil.
public struct DeliveryDataEntry: Sendable, Equatable {
    public var appID: String
    public var date: DeliveryDataDay
    /// "" for the messages sent without a label (FCM groups them in one entry).
    public var analyticsLabel: String
    /// `countMessagesAccepted`: messages FCM accepted for Android devices that opted in to
    /// sharing usage and diagnostics (int64, a JSON string on the wire).
    public var messagesAccepted: Int64?
    /// `countNotificationsAccepted`: the notifications among them.
    public var notificationsAccepted: Int64?
    /// `messageOutcomePercents`, mutually exclusive, by FCM's names: delivered, pending,
    /// collapsed, droppedTooManyPendingMessages, droppedAppForceStopped, droppedDeviceInactive,
    /// droppedTtlExpired.
    public var outcomes: [String: Double]
    /// `deliveryPerformancePercents`, which may overlap: deliveredNoDelay, delayedDeviceOffline,
    /// delayedDeviceDoze, delayedMessageThrottled, delayedUserStopped.
    public var performance: [String: Double]
    /// `messageInsightPercents.priorityLowered`: accepted messages whose priority FCM lowered.
    public var priorityLowered: Double?
    /// The entry's whole `data` object as it came (proxy notification insights and any figure
    /// newer than this build included).
    public var data: JSONValue

    public static let outcomeNames = ["delivered", "pending", "collapsed", "droppedTooManyPendingMessages",
                                      "droppedAppForceStopped", "droppedDeviceInactive", "droppedTtlExpired"]
    public static let performanceNames = ["deliveredNoDelay", "delayedDeviceOffline", "delayedDeviceDoze",
                                          "delayedMessageThrottled", "delayedUserStopped"]

    public init(appID: String, date: DeliveryDataDay, analyticsLabel: String, messagesAccepted: Int64?,
                notificationsAccepted: Int64? = nil, outcomes: [String: Double] = [:], performance: [String: Double] = [:],
                priorityLowered: Double? = nil, data: JSONValue = .object(JSONObject())) {
        self.appID = appID
        self.date = date
        self.analyticsLabel = analyticsLabel
        self.messagesAccepted = messagesAccepted
        self.notificationsAccepted = notificationsAccepted
        self.outcomes = outcomes
        self.performance = performance
        self.priorityLowered = priorityLowered
        self.data = data
    }
}

/// One page of deliveryData.list.
public struct DeliveryDataPage: Sendable, Equatable {
    public var entries: [DeliveryDataEntry]
    /// nil on the last page.
    public var nextPageToken: String?

    /// Why a 200's body could not be read; names what was wrong, never quotes more than a field.
    public struct Unreadable: Error, Sendable, CustomStringConvertible {
        public var description: String
    }

    /// Reads a 200's body. An entry without a full date is skipped (it is no day's figure); a
    /// body that is not the API's shape is refused.
    public static func parse(_ body: [UInt8]) throws(Unreadable) -> DeliveryDataPage {
        guard let document = try? JSONValue.parse(body), document.objectValue != nil else {
            throw Unreadable(description: "the answer is not a JSON object (\(body.count) bytes)")
        }
        var entries: [DeliveryDataEntry] = []
        // An empty list is left out of the JSON entirely, as proto3 does.
        if let list = document["androidDeliveryData"], !list.isNull {
            guard let items = list.arrayValue else { throw Unreadable(description: "androidDeliveryData is a JSON \(list.typeName), not an array") }
            for item in items {
                guard let date = item["date"], let year = date["year"]?.intValue, let month = date["month"]?.intValue,
                      let day = date["day"]?.intValue else { continue }
                let when = DeliveryDataDay(year: year, month: month, day: day)
                guard when.isValid else { continue }
                let data = item["data"] ?? .object(JSONObject())
                func int64(_ value: JSONValue?) -> Int64? {
                    // int64 travels as a JSON string; a number is taken too.
                    if let text = value?.stringValue { return Int64(text) }
                    if case .number(let text)? = value { return Int64(text) }
                    return nil
                }
                func percents(_ object: JSONValue?, _ names: [String]) -> [String: Double] {
                    var out: [String: Double] = [:]
                    for name in names { if let value = object?[name]?.doubleValue { out[name] = value } }
                    return out
                }
                entries.append(DeliveryDataEntry(
                    appID: item["appId"]?.stringValue ?? "", date: when, analyticsLabel: item["analyticsLabel"]?.stringValue ?? "",
                    messagesAccepted: int64(data["countMessagesAccepted"]), notificationsAccepted: int64(data["countNotificationsAccepted"]),
                    outcomes: percents(data["messageOutcomePercents"], DeliveryDataEntry.outcomeNames),
                    performance: percents(data["deliveryPerformancePercents"], DeliveryDataEntry.performanceNames),
                    priorityLowered: data["messageInsightPercents"]?["priorityLowered"]?.doubleValue, data: data))
            }
        }
        let token = document["nextPageToken"]?.stringValue
        return DeliveryDataPage(entries: entries, nextPageToken: token?.isEmpty == false ? token : nil)
    }
}

/// A refused deliveryData.list, read into what an operator must do. A project whose key may not
/// read the data (403: the permission missing, or the API not enabled) is `accessDenied`: it is
/// skipped with this description, naming the project, the account and what to grant.
public struct DeliveryDataRefusal: Error, Sendable, Equatable, CustomStringConvertible {
    public var httpStatus: Int
    /// `error.status`, e.g. `PERMISSION_DENIED`.
    public var status: String?
    /// The `google.rpc.ErrorInfo` reason: `IAM_PERMISSION_DENIED`, `SERVICE_DISABLED`,
    /// `ACCESS_TOKEN_SCOPE_INSUFFICIENT`, ...
    public var reason: String?
    /// FCM's message, shortened and with credentials removed.
    public var message: String
    /// ErrorInfo metadata: `permission`, `service`, `activationUrl`, `consumer`.
    public var metadata: [String: String]

    public init(httpStatus: Int, body: [UInt8], redacting secrets: [String] = []) {
        let failure = FCMFailure(httpStatus: httpStatus, headers: [], body: body, now: Date(), redacting: secrets)
        self.httpStatus = httpStatus
        status = failure?.status
        reason = failure?.errorInfo?.reason
        metadata = failure?.errorInfo?.metadata ?? [:]
        message = failure?.message ?? "HTTP \(httpStatus)"
    }

    /// The key may not read this project's delivery data: nothing but an operator's grant helps.
    public var accessDenied: Bool { httpStatus == 403 || status == "PERMISSION_DENIED" }

    /// The access token was refused (expired, revoked): worth one new token.
    public var unauthenticated: Bool { httpStatus == 401 || status == "UNAUTHENTICATED" }

    /// What is missing, in words an operator acts on, for `account` (its client_email) and the
    /// FCM project.
    public func problem(account: String, fcmProject: String, appID: String) -> String {
        switch reason {
        case "SERVICE_DISABLED"?:
            let url = metadata["activationUrl"].map { " (\($0))" } ?? ""
            return "the Firebase Cloud Messaging Data API (\(FCMDataAPI.service)) is not enabled in Google Cloud project \(fcmProject); enable it\(url)"
        case "ACCESS_TOKEN_SCOPE_INSUFFICIENT"?:
            return "the access token of \(account) lacks the scope \(FCMDataAPI.scope) (\(message))"
        default:
            break
        }
        if accessDenied {
            let permission = metadata["permission"] ?? FCMDataAPI.permission
            return "the service account \(account) lacks the IAM permission \(permission) on project \(fcmProject); grant it the role Firebase Cloud Messaging API Admin (roles/firebasecloudmessaging.admin) or Firebase Cloud Messaging API Viewer (roles/firebasecloudmessaging.viewer)"
        }
        if httpStatus == 404 || status == "NOT_FOUND" {
            return "FCM knows no Android app \(appID) in project \(fcmProject) (\(message)); check the app id (herald projects set --android-app)"
        }
        return "FCM's Data API answered \(httpStatus)\(status.map { " \($0)" } ?? ""): \(message)"
    }

    public var description: String { "HTTP \(httpStatus)\(status.map { " \($0)" } ?? ""): \(message)" }
}
