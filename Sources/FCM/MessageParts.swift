import JSON

/// A typed window onto one JSON object of a message. The object is the truth: members the view
/// does not model are kept as they are.
public protocol JSONObjectView: Sendable {
    var object: JSONObject { get set }
    init(object: JSONObject)
}

extension JSONObjectView {
    /// The member `key` when it is a string.
    public func string(_ key: String) -> String? { object[key]?.stringValue }

    public mutating func setString(_ key: String, _ value: String?) {
        object[key] = value.map(JSONValue.string)
    }

    /// The member `key` when it is a whole number.
    public func int(_ key: String) -> Int? { object[key]?.intValue }

    public mutating func setInt(_ key: String, _ value: Int?) {
        object[key] = value.map { JSONValue($0) }
    }

    public func bool(_ key: String) -> Bool? { object[key]?.boolValue }

    public mutating func setBool(_ key: String, _ value: Bool?) {
        object[key] = value.map(JSONValue.bool)
    }

    /// The member `key` when it is an array of strings.
    public func strings(_ key: String) -> [String]? {
        guard let elements = object[key]?.arrayValue else { return nil }
        var result: [String] = []
        for element in elements {
            guard let s = element.stringValue else { return nil }
            result.append(s)
        }
        return result
    }

    public mutating func setStrings(_ key: String, _ value: [String]?) {
        object[key] = value.map { .array($0.map(JSONValue.string)) }
    }

    /// The member `key` viewed as `V` when it is an object.
    public func view<V: JSONObjectView>(_ key: String) -> V? {
        object[key]?.objectValue.map(V.init(object:))
    }

    public mutating func setView<V: JSONObjectView>(_ key: String, _ value: V?) {
        object[key] = value.map { .object($0.object) }
    }
}

/// An ordered map of strings: `data` blocks and header maps.
public struct StringMap: JSONObjectView, Sequence, Equatable {
    public var object: JSONObject
    public init(object: JSONObject) { self.object = object }

    public init(_ pairs: [(key: String, value: String)] = []) {
        object = JSONObject(pairs.map { JSONObject.Member(key: $0.key, value: .string($0.value)) })
    }

    public subscript(key: String) -> String? {
        get { string(key) }
        set { setString(key, newValue) }
    }

    public var count: Int { object.count }

    /// The members whose values are strings, in order.
    public func makeIterator() -> AnyIterator<(key: String, value: String)> {
        var members = object.members.makeIterator()
        return AnyIterator {
            while let member = members.next() {
                if let value = member.value.stringValue { return (member.key, value) }
            }
            return nil
        }
    }

    public static func == (lhs: StringMap, rhs: StringMap) -> Bool { lhs.object == rhs.object }
}

/// The common `notification`: shown on every platform unless a platform block overrides it.
public struct MessageNotification: JSONObjectView {
    public var object: JSONObject
    public init(object: JSONObject) { self.object = object }

    public init(title: String? = nil, body: String? = nil, image: String? = nil) {
        object = JSONObject()
        self.title = title
        self.body = body
        self.image = image
    }

    public var title: String? { get { string("title") } set { setString("title", newValue) } }
    public var body: String? { get { string("body") } set { setString("body", newValue) } }
    /// An https URL of an image to show (up to 1 MB on Android).
    public var image: String? { get { string("image") } set { setString("image", newValue) } }
}

/// `fcm_options` of the message or of the Android block.
public struct FCMOptions: JSONObjectView {
    public var object: JSONObject
    public init(object: JSONObject) { self.object = object }
    public init(analyticsLabel: String? = nil) {
        object = JSONObject()
        self.analyticsLabel = analyticsLabel
    }

    /// `[a-zA-Z0-9-_.~%]{1,50}`.
    public var analyticsLabel: String? { get { string("analytics_label") } set { setString("analytics_label", newValue) } }
}

// MARK: - Android

public enum AndroidMessagePriority: String, Sendable {
    case normal = "NORMAL"
    case high = "HIGH"
}

/// The `android` block (AndroidConfig).
public struct AndroidConfig: JSONObjectView {
    public var object: JSONObject
    public init(object: JSONObject) { self.object = object }
    public init() { object = JSONObject() }

    public var collapseKey: String? { get { string("collapse_key") } set { setString("collapse_key", newValue) } }

    /// Nil when absent or not one of FCM's values (see `object["priority"]` for the raw member).
    public var priority: AndroidMessagePriority? {
        get { string("priority").flatMap(AndroidMessagePriority.init(rawValue:)) }
        set { setString("priority", newValue?.rawValue) }
    }

    /// How long FCM keeps the message for an offline device, as a duration string (`"3600s"`).
    public var ttl: String? { get { string("ttl") } set { setString("ttl", newValue) } }

    /// `ttl` in seconds; nil when absent or not a duration. Setting writes `"<seconds>s"`.
    public var ttlSeconds: Double? {
        get {
            guard let text = ttl, text.hasSuffix("s"), Checks.duration(text, max: .max) == nil else { return nil }
            return Double(text.dropLast())
        }
        set { ttl = newValue.map(Self.durationString) }
    }

    /// A protobuf JSON duration: whole seconds as `"3600s"`, fractions to the nanosecond.
    public static func durationString(seconds: Double) -> String {
        let seconds = max(0, seconds)
        if seconds.rounded() == seconds && seconds < 1e15 { return "\(Int(seconds))s" }
        let whole = seconds.rounded(.towardZero)
        var nanos = Int(((seconds - whole) * 1e9).rounded())
        var wholeInt = Int(whole)
        if nanos >= 1_000_000_000 { wholeInt += 1; nanos -= 1_000_000_000 }
        var fraction = String(nanos)
        fraction = String(repeating: "0", count: 9 - fraction.count) + fraction
        while fraction.hasSuffix("0") { fraction.removeLast() }
        return fraction.isEmpty ? "\(wholeInt)s" : "\(wholeInt).\(fraction)s"
    }

    public var restrictedPackageName: String? {
        get { string("restricted_package_name") }
        set { setString("restricted_package_name", newValue) }
    }

    /// Overrides the message's `data` on Android.
    public var data: StringMap? { get { view("data") } set { setView("data", newValue) } }
    public var notification: AndroidNotification? { get { view("notification") } set { setView("notification", newValue) } }
    public var fcmOptions: FCMOptions? { get { view("fcm_options") } set { setView("fcm_options", newValue) } }
    /// Deliver while the device is in direct boot mode.
    public var directBootOK: Bool? { get { bool("direct_boot_ok") } set { setBool("direct_boot_ok", newValue) } }
}

/// `android.notification` (AndroidNotification).
public struct AndroidNotification: JSONObjectView {
    public var object: JSONObject
    public init(object: JSONObject) { self.object = object }
    public init() { object = JSONObject() }

    public var title: String? { get { string("title") } set { setString("title", newValue) } }
    public var body: String? { get { string("body") } set { setString("body", newValue) } }
    /// A drawable resource name in the app, e.g. `stock_ticker_update`.
    public var icon: String? { get { string("icon") } set { setString("icon", newValue) } }
    /// `#rrggbb`.
    public var color: String? { get { string("color") } set { setString("color", newValue) } }
    public var sound: String? { get { string("sound") } set { setString("sound", newValue) } }
    /// Replaces an earlier notification with the same tag in the drawer.
    public var tag: String? { get { string("tag") } set { setString("tag", newValue) } }
    public var clickAction: String? { get { string("click_action") } set { setString("click_action", newValue) } }
    public var bodyLocKey: String? { get { string("body_loc_key") } set { setString("body_loc_key", newValue) } }
    public var bodyLocArgs: [String]? { get { strings("body_loc_args") } set { setStrings("body_loc_args", newValue) } }
    public var titleLocKey: String? { get { string("title_loc_key") } set { setString("title_loc_key", newValue) } }
    public var titleLocArgs: [String]? { get { strings("title_loc_args") } set { setStrings("title_loc_args", newValue) } }
    public var channelID: String? { get { string("channel_id") } set { setString("channel_id", newValue) } }
    public var ticker: String? { get { string("ticker") } set { setString("ticker", newValue) } }
    /// An https image URL.
    public var image: String? { get { string("image") } set { setString("image", newValue) } }
    public var sticky: Bool? { get { bool("sticky") } set { setBool("sticky", newValue) } }
    public var notificationCount: Int? { get { int("notification_count") } set { setInt("notification_count", newValue) } }
}

// MARK: - APNs

/// The `apns` block (ApnsConfig).
public struct APNSConfig: JSONObjectView {
    public var object: JSONObject
    public init(object: JSONObject) { self.object = object }
    public init() { object = JSONObject() }

    /// APNs request headers: `apns-priority` ("10" now, "5" power-considerate, "1" lowest),
    /// `apns-expiration` (UNIX seconds), `apns-collapse-id`, `apns-push-type`.
    public var headers: StringMap? { get { view("headers") } set { setView("headers", newValue) } }
    public var payload: APNSPayload? { get { view("payload") } set { setView("payload", newValue) } }
    public var fcmOptions: APNSFCMOptions? { get { view("fcm_options") } set { setView("fcm_options", newValue) } }
    /// A Live Activity's push-to-start token (to start) or push token (to update or end).
    public var liveActivityToken: String? {
        get { string("live_activity_token") }
        set { setString("live_activity_token", newValue) }
    }
}

/// `apns.payload`: the APNs JSON payload, `aps` plus any custom keys (kept as written).
public struct APNSPayload: JSONObjectView {
    public var object: JSONObject
    public init(object: JSONObject) { self.object = object }
    public init(aps: APS = APS()) {
        object = JSONObject()
        self.aps = aps
    }

    public var aps: APS? { get { view("aps") } set { setView("aps", newValue) } }

    /// A custom key of the payload (anything but `aps`).
    public subscript(key: String) -> JSONValue? {
        get { object[key] }
        set { object[key] = newValue }
    }
}

public enum LiveActivityEvent: String, Sendable {
    case start, update, end
}

/// `apns.payload.aps`.
public struct APS: JSONObjectView {
    public var object: JSONObject
    public init(object: JSONObject) { self.object = object }
    public init() { object = JSONObject() }

    /// A string or an object (`title`, `body`, ...).
    public var alert: JSONValue? { get { object["alert"] } set { object["alert"] = newValue } }
    public var badge: Int? { get { int("badge") } set { setInt("badge", newValue) } }
    public var sound: JSONValue? { get { object["sound"] } set { object["sound"] = newValue } }
    public var contentAvailable: Int? { get { int("content-available") } set { setInt("content-available", newValue) } }
    /// Must be 1 for a notification service extension to show `fcm_options.image`.
    public var mutableContent: Int? { get { int("mutable-content") } set { setInt("mutable-content", newValue) } }
    public var category: String? { get { string("category") } set { setString("category", newValue) } }
    public var threadID: String? { get { string("thread-id") } set { setString("thread-id", newValue) } }

    // Live Activities (iOS 16.1+, remote start 17.2+)
    public var event: LiveActivityEvent? {
        get { string("event").flatMap(LiveActivityEvent.init(rawValue:)) }
        set { setString("event", newValue?.rawValue) }
    }
    /// Seconds since 1970; APNs drops updates older than the last one it delivered.
    public var timestamp: Int? { get { int("timestamp") } set { setInt("timestamp", newValue) } }
    public var contentState: JSONObject? {
        get { object["content-state"]?.objectValue }
        set { object["content-state"] = newValue.map(JSONValue.object) }
    }
    public var attributesType: String? { get { string("attributes-type") } set { setString("attributes-type", newValue) } }
    public var attributes: JSONObject? {
        get { object["attributes"]?.objectValue }
        set { object["attributes"] = newValue.map(JSONValue.object) }
    }
    /// When an ended Live Activity leaves the lock screen (seconds since 1970; `end` only).
    public var dismissalDate: Int? { get { int("dismissal-date") } set { setInt("dismissal-date", newValue) } }
    public var staleDate: Int? { get { int("stale-date") } set { setInt("stale-date", newValue) } }
}

/// `apns.fcm_options`.
public struct APNSFCMOptions: JSONObjectView {
    public var object: JSONObject
    public init(object: JSONObject) { self.object = object }
    public init(analyticsLabel: String? = nil, image: String? = nil) {
        object = JSONObject()
        self.analyticsLabel = analyticsLabel
        self.image = image
    }

    public var analyticsLabel: String? { get { string("analytics_label") } set { setString("analytics_label", newValue) } }
    /// An https image URL with a file extension Apple recognises; needs `mutable-content: 1`.
    public var image: String? { get { string("image") } set { setString("image", newValue) } }
}

// MARK: - Web Push

/// The `webpush` block (WebpushConfig).
public struct WebpushConfig: JSONObjectView {
    public var object: JSONObject
    public init(object: JSONObject) { self.object = object }
    public init() { object = JSONObject() }

    /// Web Push protocol headers, e.g. `TTL` (seconds) and `Urgency`.
    public var headers: StringMap? { get { view("headers") } set { setView("headers", newValue) } }
    /// Overrides the message's `data` on the web.
    public var data: StringMap? { get { view("data") } set { setView("data", newValue) } }
    /// A Web Notification options object (`title`, `body`, `icon`, `image`, `actions`, ...).
    public var notification: JSONObject? {
        get { object["notification"]?.objectValue }
        set { object["notification"] = newValue.map(JSONValue.object) }
    }
    public var fcmOptions: WebpushFCMOptions? { get { view("fcm_options") } set { setView("fcm_options", newValue) } }
}

/// `webpush.fcm_options`.
public struct WebpushFCMOptions: JSONObjectView {
    public var object: JSONObject
    public init(object: JSONObject) { self.object = object }
    public init(link: String? = nil, analyticsLabel: String? = nil) {
        object = JSONObject()
        self.link = link
        self.analyticsLabel = analyticsLabel
    }

    /// The https page to open when the user clicks the notification.
    public var link: String? { get { string("link") } set { setString("link", newValue) } }
    public var analyticsLabel: String? { get { string("analytics_label") } set { setString("analytics_label", newValue) } }
}
