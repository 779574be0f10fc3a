import JSON

/// The first thing wrong with a send request, as FCM reports it: a `google.rpc.BadRequest`
/// field violation plus the error's message.
public struct FieldViolation: Error, Sendable, Equatable, CustomStringConvertible {
    /// The field path FCM names, e.g. `message.android.ttl`.
    public var field: String
    /// The error's top-level `message`.
    public var message: String
    /// The violation's `description`.
    public var detail: String

    public init(field: String, message: String, detail: String? = nil) {
        self.field = field
        self.message = message
        self.detail = detail ?? message
    }

    public var description: String { "\(field): \(message)" }
}

/// What a valid send request asks for.
public struct ValidatedSend: Sendable {
    public enum Target: Sendable, Equatable {
        case token(String)
        case topic(String)
        case condition(String)
        /// A Firebase installation ID, the target newer SDKs add beside `token`.
        case fid(String)
    }
    public var target: Target
    public var validateOnly: Bool
    /// The `message` object as received.
    public var message: JSONObject
}

/// FCM's server-side checks of a v1 `messages:send` body, standing in for Google's validator.
/// Named apart from the client's `MessageValidator` (FCM module), which checks a message before
/// it is sent with Herald's rule list: this one must answer as FCM does, whatever the client
/// sent, with FCM's first violation. Field names are accepted in proto JSON's two spellings,
/// `snake_case` and `lowerCamelCase`; unknown names are rejected as FCM rejects them.
public enum RequestChecker {
    /// The payload limit for token, condition and device-group messages.
    public static let maxPayloadBytes = 4096
    /// The payload limit for topic messages.
    public static let maxTopicPayloadBytes = 2048
    /// Android TTL ceiling: four weeks.
    public static let maxTTLSeconds = 2_419_200

    public static func validate(body: JSONValue) -> Result<ValidatedSend, FieldViolation> {
        do throws(FieldViolation) {
            return .success(try check(body: body))
        } catch {
            return .failure(error)
        }
    }

    private static func check(body: JSONValue) throws(FieldViolation) -> ValidatedSend {
        guard let request = body.objectValue else {
            throw FieldViolation(field: "", message: "Invalid JSON payload received. Expected an object, got \(body.typeName).")
        }
        var validateOnly = false
        var messageValue: JSONValue? = nil
        for member in request {
            switch member.key {
            case "message": messageValue = member.value
            case "validate_only", "validateOnly":
                switch member.value {
                case .bool(let flag): validateOnly = flag
                case .null: break
                default: throw invalidValue("validate_only", "TYPE_BOOL", member.value)
                }
            default: throw unknownName(member.key, at: nil)
            }
        }
        guard let messageValue, !messageValue.isNull else {
            throw FieldViolation(field: "message", message: "Request contains an invalid argument.",
                                 detail: "The message is required.")
        }
        guard let message = messageValue.objectValue else {
            throw invalidValue("message", "type.googleapis.com/google.firebase.fcm.v1.Message", messageValue)
        }

        var target: ValidatedSend.Target? = nil
        func setTarget(_ new: ValidatedSend.Target, _ name: String) throws(FieldViolation) {
            if target != nil {
                throw FieldViolation(field: "message.\(name)",
                                     message: "Invalid value at 'message' (oneof), oneof field 'target' is already set. Cannot set '\(name)'")
            }
            target = new
        }
        for member in message {
            // proto JSON: null means "not set".
            if member.value.isNull { continue }
            let key = snakeCase(member.key)
            let path = "message.\(key)"
            switch key {
            case "name":
                _ = try string(member.value, path)
            case "token":
                let token = try string(member.value, path)
                guard !token.isEmpty else { throw invalidToken() }
                try setTarget(.token(token), "token")
            case "topic":
                var topic = try string(member.value, path)
                if topic.hasPrefix("/topics/") { topic.removeFirst("/topics/".count) }
                guard !topic.isEmpty, topic.utf8.allSatisfy(isTopicByte) else {
                    throw FieldViolation(field: path, message: "Invalid value at 'message.topic': topic names must match [a-zA-Z0-9-_.~%]+",
                                         detail: "Topic name '\(topic)' does not match [a-zA-Z0-9-_.~%]+.")
                }
                try setTarget(.topic(topic), "topic")
            case "condition":
                let condition = try string(member.value, path)
                try checkCondition(condition)
                try setTarget(.condition(condition), "condition")
            case "fid":
                let fid = try string(member.value, path)
                guard !fid.isEmpty else { throw invalidValue(path, "TYPE_STRING", member.value) }
                try setTarget(.fid(fid), "fid")
            case "data":
                try checkData(member.value, path)
            case "notification":
                try checkKnownStrings(member.value, path, allowed: ["title", "body", "image"])
            case "fcm_options":
                try checkFCMOptions(member.value, path, allowed: ["analytics_label"])
            case "android":
                try checkAndroid(member.value)
            case "android_v2":
                try checkAndroidV2(member.value)
            case "apns":
                try checkAPNs(member.value)
            case "webpush":
                try checkWebpush(member.value)
            default:
                throw unknownName(member.key, at: "message")
            }
        }
        if let android = message.first(where: { snakeCase($0.key) == "android" }), !android.value.isNull,
           let v2 = message.first(where: { snakeCase($0.key) == "android_v2" }), !v2.value.isNull {
            throw FieldViolation(field: "message.android_v2",
                                 message: "Invalid value at 'message.android_v2': android and android_v2 are mutually exclusive; set only one of them.")
        }
        guard let target else {
            throw FieldViolation(field: "message", message: "Recipient of the message is not set.")
        }
        let limit: Int
        if case .topic = target { limit = maxTopicPayloadBytes } else { limit = maxPayloadBytes }
        let size = serializedLength(messageValue)
        if size > limit {
            throw FieldViolation(field: "message",
                                 message: "Message is too big: \(size) bytes, the limit is \(limit) bytes\(limit == maxTopicPayloadBytes ? " for topic messages" : "").")
        }
        return ValidatedSend(target: target, validateOnly: validateOnly, message: message)
    }

    // MARK: common

    private static func checkData(_ value: JSONValue, _ path: String) throws(FieldViolation) {
        if value.isNull { return }
        guard let data = value.objectValue else { throw invalidValue(path, "map<string, string>", value) }
        for (index, member) in data.members.enumerated() {
            guard case .string = member.value else {
                throw invalidValue("\(path)[\(index)].value", "TYPE_STRING", member.value)
            }
            if isReservedDataKey(member.key) {
                throw FieldViolation(field: path, message: "Invalid data payload key: '\(member.key)' is reserved (from, notification, message_type, and keys starting with google or gcm).")
            }
        }
    }

    /// Keys FCM keeps for itself in `data`.
    public static func isReservedDataKey(_ key: String) -> Bool {
        key == "from" || key == "notification" || key == "message_type" || key.hasPrefix("google") || key.hasPrefix("gcm")
    }

    private static func checkFCMOptions(_ value: JSONValue, _ path: String, allowed: Set<String>) throws(FieldViolation) {
        if value.isNull { return }
        guard let options = value.objectValue else { throw invalidValue(path, "object", value) }
        for member in options {
            let key = snakeCase(member.key)
            guard allowed.contains(key) else { throw unknownName(member.key, at: path) }
            let text = try string(member.value, "\(path).\(key)")
            if key == "analytics_label" {
                guard text.utf8.count <= 50, text.utf8.allSatisfy(isTopicByte) else {
                    throw FieldViolation(field: "\(path).analytics_label",
                                         message: "Analytics label must match ^[a-zA-Z0-9-_.~%]{1,50}$.")
                }
            }
        }
    }

    private static func checkKnownStrings(_ value: JSONValue, _ path: String, allowed: Set<String>) throws(FieldViolation) {
        if value.isNull { return }
        guard let object = value.objectValue else { throw invalidValue(path, "object", value) }
        for member in object {
            let key = snakeCase(member.key)
            guard allowed.contains(key) else { throw unknownName(member.key, at: path) }
            _ = try string(member.value, "\(path).\(key)")
        }
    }

    private static func checkStringMap(_ value: JSONValue, _ path: String) throws(FieldViolation) -> JSONObject {
        guard let map = value.objectValue else { throw invalidValue(path, "map<string, string>", value) }
        for (index, member) in map.members.enumerated() {
            guard case .string = member.value else { throw invalidValue("\(path)[\(index)].value", "TYPE_STRING", member.value) }
        }
        return map
    }

    // MARK: android

    private static let androidFields: Set<String> = [
        "collapse_key", "priority", "ttl", "restricted_package_name", "data", "notification", "fcm_options",
        "direct_boot_ok", "bandwidth_constrained_ok", "restricted_satellite_ok",
    ]

    private static let androidNotificationFields: Set<String> = [
        "title", "body", "icon", "color", "sound", "tag", "click_action", "body_loc_key", "body_loc_args",
        "title_loc_key", "title_loc_args", "channel_id", "ticker", "sticky", "event_time", "local_only",
        "notification_priority", "default_sound", "default_vibrate_timings", "default_light_settings",
        "vibrate_timings", "visibility", "notification_count", "light_settings", "image",
        "bypass_proxy_notification", "proxy",
    ]

    private static func checkAndroid(_ value: JSONValue) throws(FieldViolation) {
        try checkAndroidConfig(value, "message.android", type: "AndroidConfig", fields: androidFields) { key, value, field throws(FieldViolation) in
            switch key {
            case "priority":
                // FCM takes the enum names in any case; the Python Admin SDK sends "high".
                let priority = try string(value, field)
                guard priority.uppercased() == "NORMAL" || priority.uppercased() == "HIGH" else {
                    throw FieldViolation(field: field,
                                         message: "Invalid value at '\(field)' (type.googleapis.com/google.firebase.fcm.v1.AndroidMessagePriority), \"\(priority)\"",
                                         detail: "Invalid value \"\(priority)\": priority must be NORMAL or HIGH.")
                }
            case "notification": try checkAndroidNotification(value, field)
            default: try checkAndroidShared(key, value, field)
            }
        }
    }

    /// An `android` or `android_v2` object: every name must be one of `fields` (in either
    /// spelling); `check` sees each member that is set (proto JSON: null means "not set", for a
    /// known name) with its snake_case key and its field path.
    private static func checkAndroidConfig(_ value: JSONValue, _ path: String, type: String, fields: Set<String>,
                                           _ check: (String, JSONValue, String) throws(FieldViolation) -> Void) throws(FieldViolation) {
        if value.isNull { return }
        guard let config = value.objectValue else { throw invalidValue(path, "type.googleapis.com/google.firebase.fcm.v1.\(type)", value) }
        for member in config {
            let key = snakeCase(member.key)
            guard fields.contains(key) else { throw unknownName(member.key, at: path) }
            if member.value.isNull { continue }
            try check(key, member.value, "\(path).\(key)")
        }
    }

    /// The members `android` and `android_v2` have in common (the rest are strings).
    private static func checkAndroidShared(_ key: String, _ value: JSONValue, _ field: String) throws(FieldViolation) {
        switch key {
        case "ttl": try checkTTL(value, field)
        case "data": try checkData(value, field)
        case "fcm_options": try checkFCMOptions(value, field, allowed: ["analytics_label"])
        case "direct_boot_ok", "bandwidth_constrained_ok", "restricted_satellite_ok":
            guard value.boolValue != nil else { throw invalidValue(field, "TYPE_BOOL", value) }
        default:
            _ = try string(value, field)
        }
    }

    // MARK: android_v2 (AndroidConfigV2, mutually exclusive with android)

    private static let androidV2Fields: Set<String> = [
        "ttl", "collapse_key", "data", "restricted_package_name", "direct_boot_ok", "bandwidth_constrained_ok",
        "restricted_satellite_ok", "fcm_options", "background_sync", "remote_notification",
    ]

    /// AndroidNotificationV2: the v1 notification's fields less the proxy ones, plus `id`.
    private static let androidNotificationV2Fields: Set<String> =
        androidNotificationFields.subtracting(["bypass_proxy_notification", "proxy"]).union(["id"])

    private static func checkAndroidV2(_ value: JSONValue) throws(FieldViolation) {
        try checkAndroidConfig(value, "message.android_v2", type: "AndroidConfigV2", fields: androidV2Fields) { key, value, field throws(FieldViolation) in
            switch key {
            case "background_sync":
                guard let sync = value.objectValue else {
                    throw invalidValue(field, "type.googleapis.com/google.firebase.fcm.v1.AndroidBackgroundSyncMessage", value)
                }
                if let first = sync.members.first { throw unknownName(first.key, at: field) }
            case "remote_notification":
                guard let remote = value.objectValue else {
                    throw invalidValue(field, "type.googleapis.com/google.firebase.fcm.v1.AndroidRemoteNotification", value)
                }
                for option in remote {
                    let name = snakeCase(option.key)
                    if option.value.isNull { continue }
                    switch name {
                    case "notification":
                        try checkAndroidNotification(option.value, "\(field).notification", fields: androidNotificationV2Fields,
                                                     type: "AndroidNotificationV2")
                    case "mutable_content", "use_as_v1_data_message":
                        guard option.value.boolValue != nil else { throw invalidValue("\(field).\(name)", "TYPE_BOOL", option.value) }
                    default:
                        throw unknownName(option.key, at: field)
                    }
                }
            default: try checkAndroidShared(key, value, field)
            }
        }
    }

    /// A protobuf Duration in JSON: decimal seconds with up to nine fractional digits and an `s`.
    public static func parseDuration(_ text: String) -> Double? {
        let bytes = Array(text.utf8)
        guard bytes.count >= 2, bytes.last == UInt8(ascii: "s") else { return nil }
        let number = bytes.dropLast()
        var sawDigit = false
        var fraction = -1
        for byte in number {
            if byte == UInt8(ascii: ".") {
                guard sawDigit, fraction < 0 else { return nil }
                fraction = 0
            } else if byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") {
                if fraction >= 0 { fraction += 1 } else { sawDigit = true }
            } else {
                return nil
            }
        }
        guard sawDigit, fraction != 0, fraction <= 9 else { return nil }
        return Double(String(decoding: number, as: UTF8.self))
    }

    private static func checkTTL(_ value: JSONValue, _ field: String) throws(FieldViolation) {
        guard case .string(let text) = value else {
            throw FieldViolation(field: field,
                                 message: "Invalid value at '\(field)' (type.googleapis.com/google.protobuf.Duration), \(value.serialized)",
                                 detail: "Invalid value \(value.serialized): a duration is a string such as \"3600s\".")
        }
        guard let seconds = parseDuration(text) else {
            throw FieldViolation(field: field,
                                 message: "Invalid value at '\(field)' (type.googleapis.com/google.protobuf.Duration), Field 'ttl', Illegal duration format; duration must end with 's'",
                                 detail: "Invalid duration \"\(text)\": expected seconds with up to 9 fractional digits and a trailing 's', e.g. \"3600s\".")
        }
        guard seconds <= Double(maxTTLSeconds) else {
            throw FieldViolation(field: field,
                                 message: "Invalid value at '\(field)': TTL \(text) exceeds the maximum of 2419200s (4 weeks)",
                                 detail: "TTL must be between 0s and 2419200s (4 weeks), not \(text).")
        }
    }

    private static func checkAndroidNotification(_ value: JSONValue, _ path: String,
                                                 fields: Set<String> = androidNotificationFields,
                                                 type: String = "AndroidNotification") throws(FieldViolation) {
        if value.isNull { return }
        guard let notification = value.objectValue else { throw invalidValue(path, "type.googleapis.com/google.firebase.fcm.v1.\(type)", value) }
        for member in notification {
            let key = snakeCase(member.key)
            let field = "\(path).\(key)"
            guard fields.contains(key) else { throw unknownName(member.key, at: path) }
            if member.value.isNull { continue }
            switch key {
            case "color":
                let color = try string(member.value, field)
                let bytes = Array(color.utf8)
                guard bytes.count == 7, bytes[0] == UInt8(ascii: "#"), bytes.dropFirst().allSatisfy(isHexDigit) else {
                    throw FieldViolation(field: field, message: "Invalid value at '\(field)': color must be in the form #rrggbb",
                                         detail: "Invalid color \"\(color)\": expected #rrggbb.")
                }
            case "body_loc_args", "title_loc_args":
                guard let items = member.value.arrayValue else { throw invalidValue(field, "TYPE_STRING (repeated)", member.value) }
                for (index, item) in items.enumerated() {
                    guard case .string = item else { throw invalidValue("\(field)[\(index)]", "TYPE_STRING", item) }
                }
            case "sticky", "local_only", "default_sound", "default_vibrate_timings", "default_light_settings", "bypass_proxy_notification":
                guard member.value.boolValue != nil else { throw invalidValue(field, "TYPE_BOOL", member.value) }
            case "notification_count", "id":
                guard member.value.intValue != nil else { throw invalidValue(field, "TYPE_INT32", member.value) }
            case "notification_priority":
                try checkEnum(member.value, field, ["PRIORITY_UNSPECIFIED", "PRIORITY_MIN", "PRIORITY_LOW", "PRIORITY_DEFAULT", "PRIORITY_HIGH", "PRIORITY_MAX"])
            case "visibility":
                try checkEnum(member.value, field, ["VISIBILITY_UNSPECIFIED", "PRIVATE", "PUBLIC", "SECRET"])
            case "proxy":
                try checkEnum(member.value, field, ["PROXY_UNSPECIFIED", "ALLOW", "DENY", "IF_PRIORITY_LOWERED"])
            case "vibrate_timings":
                guard let items = member.value.arrayValue else { throw invalidValue(field, "type.googleapis.com/google.protobuf.Duration (repeated)", member.value) }
                for (index, item) in items.enumerated() {
                    guard let text = item.stringValue, parseDuration(text) != nil else {
                        throw invalidValue("\(field)[\(index)]", "type.googleapis.com/google.protobuf.Duration", item)
                    }
                }
            case "light_settings":
                try checkLightSettings(member.value, field)
            default:
                _ = try string(member.value, field)
            }
        }
    }

    /// `LightSettings`: a `google.type.Color` and two durations.
    private static func checkLightSettings(_ value: JSONValue, _ path: String) throws(FieldViolation) {
        guard let settings = value.objectValue else { throw invalidValue(path, "type.googleapis.com/google.firebase.fcm.v1.LightSettings", value) }
        for member in settings {
            let key = snakeCase(member.key)
            let field = "\(path).\(key)"
            guard ["color", "light_on_duration", "light_off_duration"].contains(key) else { throw unknownName(member.key, at: path) }
            if member.value.isNull { continue }
            switch key {
            case "color":
                guard let color = member.value.objectValue else { throw invalidValue(field, "type.googleapis.com/google.type.Color", member.value) }
                for component in color {
                    guard ["red", "green", "blue", "alpha"].contains(component.key) else { throw unknownName(component.key, at: field) }
                    guard component.value.isNull || component.value.doubleValue != nil else {
                        throw invalidValue("\(field).\(component.key)", "TYPE_FLOAT", component.value)
                    }
                }
            default:
                guard let text = member.value.stringValue, parseDuration(text) != nil else {
                    throw invalidValue(field, "type.googleapis.com/google.protobuf.Duration", member.value)
                }
            }
        }
    }

    private static func checkEnum(_ value: JSONValue, _ field: String, _ names: Set<String>) throws(FieldViolation) {
        if value.isNull { return }
        guard let name = value.stringValue, names.contains(name.uppercased()) else { throw invalidValue(field, "TYPE_ENUM", value) }
    }

    // MARK: apns

    private static func checkAPNs(_ value: JSONValue) throws(FieldViolation) {
        let path = "message.apns"
        if value.isNull { return }
        guard let apns = value.objectValue else { throw invalidValue(path, "type.googleapis.com/google.firebase.fcm.v1.ApnsConfig", value) }
        var liveActivity = false
        var payload: JSONObject? = nil
        for member in apns {
            let key = snakeCase(member.key)
            let field = "\(path).\(key)"
            switch key {
            case "headers":
                if member.value.isNull { continue }
                let headers = try checkStringMap(member.value, field)
                for header in headers {
                    let text = header.value.stringValue ?? ""
                    switch header.key.lowercased() {
                    case "apns-priority":
                        guard text == "10" || text == "5" || text == "1" else {
                            throw FieldViolation(field: field, message: "Invalid value at '\(field)': apns-priority must be 1, 5 or 10, not \"\(text)\"")
                        }
                    case "apns-expiration":
                        guard !text.isEmpty, text.utf8.allSatisfy(isDigit) else {
                            throw FieldViolation(field: field, message: "Invalid value at '\(field)': apns-expiration must be a UNIX time in seconds, not \"\(text)\"")
                        }
                    default: break
                    }
                }
            case "payload":
                if member.value.isNull { continue }
                guard let object = member.value.objectValue else { throw invalidValue(field, "type.googleapis.com/google.protobuf.Struct", member.value) }
                if let aps = object["aps"], aps.objectValue == nil {
                    throw invalidValue("\(field).aps", "object", aps)
                }
                payload = object
            case "fcm_options":
                try checkFCMOptions(member.value, field, allowed: ["analytics_label", "image"])
            case "live_activity_token":
                let token = try string(member.value, field)
                guard !token.isEmpty else { throw invalidValue(field, "TYPE_STRING", member.value) }
                liveActivity = true
            default:
                throw unknownName(member.key, at: path)
            }
        }
        if liveActivity { try checkLiveActivity(payload) }
    }

    private static func checkLiveActivity(_ payload: JSONObject?) throws(FieldViolation) {
        let path = "message.apns.payload.aps"
        guard let aps = payload?["aps"]?.objectValue else {
            throw FieldViolation(field: path, message: "A Live Activity message (apns.live_activity_token) needs apns.payload.aps.")
        }
        guard let event = aps["event"]?.stringValue else {
            throw FieldViolation(field: "\(path).event", message: "A Live Activity message needs aps.event: start, update or end.")
        }
        guard event == "start" || event == "update" || event == "end" else {
            throw FieldViolation(field: "\(path).event", message: "Invalid Live Activity event \"\(event)\": must be start, update or end.")
        }
        guard let timestamp = aps["timestamp"], timestamp.intValue != nil else {
            throw FieldViolation(field: "\(path).timestamp", message: "A Live Activity message needs aps.timestamp as an integer number of seconds.")
        }
        if let state = aps["content-state"] {
            guard state.objectValue != nil else {
                throw FieldViolation(field: "\(path).content-state", message: "aps.content-state must be an object, not \(state.typeName).")
            }
        } else if event != "end" {
            throw FieldViolation(field: "\(path).content-state", message: "A Live Activity \(event) needs aps.content-state.")
        }
        if event == "start" {
            guard let type = aps["attributes-type"]?.stringValue, !type.isEmpty else {
                throw FieldViolation(field: "\(path).attributes-type", message: "A Live Activity start needs aps.attributes-type.")
            }
            guard aps["attributes"]?.objectValue != nil else {
                throw FieldViolation(field: "\(path).attributes", message: "A Live Activity start needs aps.attributes as an object.")
            }
        }
        if let dismissal = aps["dismissal-date"], dismissal.intValue == nil {
            throw FieldViolation(field: "\(path).dismissal-date", message: "aps.dismissal-date must be an integer number of seconds.")
        }
    }

    // MARK: webpush

    private static func checkWebpush(_ value: JSONValue) throws(FieldViolation) {
        let path = "message.webpush"
        if value.isNull { return }
        guard let webpush = value.objectValue else { throw invalidValue(path, "type.googleapis.com/google.firebase.fcm.v1.WebpushConfig", value) }
        for member in webpush {
            let key = snakeCase(member.key)
            let field = "\(path).\(key)"
            switch key {
            case "headers":
                if !member.value.isNull { _ = try checkStringMap(member.value, field) }
            case "data":
                try checkData(member.value, field)
            case "notification":
                guard member.value.objectValue != nil || member.value.isNull else {
                    throw invalidValue(field, "type.googleapis.com/google.protobuf.Struct", member.value)
                }
            case "fcm_options":
                if member.value.isNull { continue }
                guard let options = member.value.objectValue else { throw invalidValue(field, "object", member.value) }
                for option in options {
                    let name = snakeCase(option.key)
                    switch name {
                    case "link":
                        let link = try string(option.value, "\(field).link")
                        guard link.hasPrefix("https://"), link.utf8.count > "https://".utf8.count else {
                            throw FieldViolation(field: "\(field).link", message: "Invalid value at '\(field).link': the link must be an HTTPS URL, not \"\(link)\".")
                        }
                    case "analytics_label":
                        try checkFCMOptions(.object(JSONObject([option])), field, allowed: ["analytics_label"])
                    default:
                        throw unknownName(option.key, at: field)
                    }
                }
            default:
                throw unknownName(member.key, at: path)
            }
        }
    }

    // MARK: conditions

    /// Checks a condition such as `'dogs' in topics && ('cats' in topics || !('birds' in topics))`:
    /// the grammar FCM accepts and at most five topics.
    public static func checkCondition(_ condition: String) throws(FieldViolation) {
        let field = "message.condition"
        func fail(_ why: String) -> FieldViolation {
            FieldViolation(field: field, message: "Invalid condition expression provided.", detail: "Invalid condition \"\(condition)\": \(why).")
        }
        var tokens: [String] = []
        let bytes = Array(condition.utf8)
        var i = 0
        var topics = 0
        while i < bytes.count {
            let c = bytes[i]
            if c == 0x20 || c == 0x09 { i += 1; continue }
            if c == UInt8(ascii: "'") || c == UInt8(ascii: "\"") {
                var j = i + 1
                while j < bytes.count && bytes[j] != c { j += 1 }
                guard j < bytes.count else { throw fail("unterminated topic name") }
                let name = bytes[(i + 1)..<j]
                guard !name.isEmpty, name.allSatisfy(isTopicByte) else { throw fail("topic names must match [a-zA-Z0-9-_.~%]+") }
                tokens.append("T")
                topics += 1
                i = j + 1
            } else if c == UInt8(ascii: "&") || c == UInt8(ascii: "|") {
                guard i + 1 < bytes.count, bytes[i + 1] == c else { throw fail("use && and ||") }
                tokens.append(c == UInt8(ascii: "&") ? "&&" : "||")
                i += 2
            } else if c == UInt8(ascii: "!") || c == UInt8(ascii: "(") || c == UInt8(ascii: ")") {
                tokens.append(String(UnicodeScalar(c)))
                i += 1
            } else if bytes[i...].starts(with: "in".utf8) {
                tokens.append("in")
                i += 2
            } else if bytes[i...].starts(with: "topics".utf8) {
                tokens.append("topics")
                i += 6
            } else {
                throw fail("unexpected character at offset \(i)")
            }
        }
        guard topics <= 5 else { throw fail("a condition may combine at most 5 topics, this one has \(topics)") }
        // expression := term (("&&" | "||") term)* ; term := "!" term | "(" expression ")" | T "in" "topics"
        var position = 0
        func term() throws(FieldViolation) {
            guard position < tokens.count else { throw fail("unexpected end") }
            switch tokens[position] {
            case "!":
                position += 1
                try term()
            case "(":
                position += 1
                try expression()
                guard position < tokens.count, tokens[position] == ")" else { throw fail("missing ')'") }
                position += 1
            case "T":
                guard position + 2 < tokens.count, tokens[position + 1] == "in", tokens[position + 2] == "topics" else {
                    throw fail("a topic must be followed by 'in topics'")
                }
                position += 3
            default:
                throw fail("unexpected '\(tokens[position])'")
            }
        }
        func expression() throws(FieldViolation) {
            try term()
            while position < tokens.count, tokens[position] == "&&" || tokens[position] == "||" {
                position += 1
                try term()
            }
        }
        guard !tokens.isEmpty else { throw fail("the condition is empty") }
        try expression()
        guard position == tokens.count else { throw fail("unexpected '\(tokens[position])'") }
    }

    // MARK: helpers

    /// proto JSON accepts `collapseKey` for `collapse_key`; everything here speaks snake_case.
    static func snakeCase(_ key: String) -> String {
        guard key.utf8.contains(where: { $0 >= UInt8(ascii: "A") && $0 <= UInt8(ascii: "Z") }) else { return key }
        var out: [UInt8] = []
        for byte in key.utf8 {
            if byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") {
                out.append(UInt8(ascii: "_"))
                out.append(byte + 32)
            } else {
                out.append(byte)
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    private static func string(_ value: JSONValue, _ field: String) throws(FieldViolation) -> String {
        if case .string(let text) = value { return text }
        if value.isNull { return "" }
        throw invalidValue(field, "TYPE_STRING", value)
    }

    private static func invalidValue(_ field: String, _ type: String, _ value: JSONValue) -> FieldViolation {
        let shown = value.serialized
        let clipped = shown.utf8.count > 80 ? String(shown.prefix(80)) + "..." : shown
        return FieldViolation(field: field, message: "Invalid value at '\(field)' (\(type)), \(clipped)",
                              detail: "Invalid value at '\(field)' (\(type)), \(clipped)")
    }

    private static func unknownName(_ name: String, at path: String?) -> FieldViolation {
        let location = path.map { " at '\($0)'" } ?? ""
        return FieldViolation(field: path ?? name,
                              message: "Invalid JSON payload received. Unknown name \"\(name)\"\(location): Cannot find field.")
    }

    private static func invalidToken() -> FieldViolation {
        FieldViolation(field: "message.token", message: "The registration token is not a valid FCM registration token")
    }

    @inline(__always) static func isTopicByte(_ c: UInt8) -> Bool {
        (c >= UInt8(ascii: "a") && c <= UInt8(ascii: "z")) || (c >= UInt8(ascii: "A") && c <= UInt8(ascii: "Z"))
            || (c >= UInt8(ascii: "0") && c <= UInt8(ascii: "9")) || c == UInt8(ascii: "-") || c == UInt8(ascii: "_")
            || c == UInt8(ascii: ".") || c == UInt8(ascii: "~") || c == UInt8(ascii: "%")
    }

    @inline(__always) private static func isDigit(_ c: UInt8) -> Bool { c >= UInt8(ascii: "0") && c <= UInt8(ascii: "9") }

    @inline(__always) private static func isHexDigit(_ c: UInt8) -> Bool {
        isDigit(c) || (c >= UInt8(ascii: "a") && c <= UInt8(ascii: "f")) || (c >= UInt8(ascii: "A") && c <= UInt8(ascii: "F"))
    }

    /// The length of `value.serialized` without building it.
    public static func serializedLength(_ value: JSONValue) -> Int {
        switch value {
        case .null: return 4
        case .bool(let b): return b ? 4 : 5
        case .number(let n): return n.utf8.count
        case .string(let s): return quotedLength(s)
        case .array(let items):
            var total = 2 + max(0, items.count - 1)
            for item in items { total += serializedLength(item) }
            return total
        case .object(let object):
            var total = 2 + max(0, object.count - 1)
            for member in object.members { total += quotedLength(member.key) + 1 + serializedLength(member.value) }
            return total
        }
    }

    private static func quotedLength(_ s: String) -> Int {
        var total = 2
        for byte in s.utf8 {
            switch byte {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"), 0x0A, 0x0D, 0x09: total += 2
            case 0..<0x20: total += 6
            default: total += 1
            }
        }
        return total
    }
}
