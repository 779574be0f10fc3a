import JSON

/// Translates payloads of FCM's legacy HTTP protocol (docs/legacy.md 1, Tables 1-3) to HTTP v1 messages,
/// following docs/legacy.md section 4 step by step.
///
/// `herald.from_legacy` in PostgreSQL (Sources/Queue/SQL/functions/from_legacy.sql and `_legacy_*`) implements the same steps; both are run
/// against one table of cases (Tests/Fixtures/FCM/legacy-cases.json) and must give the same
/// messages, notes and rejections. Most steps are transformations (condition normalisation,
/// stringified loc args, data values turned into their JSON text, TTL arithmetic), which a rule
/// list like message-rules.json could only describe by becoming a program, so each side carries
/// its code and the shared cases hold them together. The v1 rules themselves are not repeated:
/// every produced message goes through `MessageValidator`.
public enum LegacyTranslator {
    /// Table 1's parameters (docs/legacy.md 1), in its order.
    public static let parameters = ["to", "registration_ids", "condition", "notification_key", "collapse_key", "priority",
                                    "content_available", "mutable_content", "time_to_live", "restricted_package_name",
                                    "dry_run", "data", "notification"]
    static let targetParameters = ["to", "registration_ids", "condition", "notification_key"]
    /// The most registration tokens one legacy request could carry.
    public static let maxRegistrationIDs = 1000
    /// `InvalidTtl` (docs/legacy.md 3, Table 9 row 11): 0 to 2,419,200 seconds (four weeks).
    public static let maxTimeToLive = 2_419_200
    /// APNs refuses an `apns-collapse-id` over 64 bytes.
    static let maxAPNsCollapseIDBytes = 64

    /// Where each key of the legacy `notification` object goes (docs/legacy.md 4.5). Keys with a
    /// special rule (`sound`, `click_action`, `badge`, the loc args, `subtitle`) are handled in
    /// code; this table holds the plain copies and is read backwards to name the legacy field of
    /// a v1 issue.
    static let notificationCopies: [(key: String, paths: [[String]])] = [
        ("title", [["notification", "title"]]),
        ("body", [["notification", "body"]]),
        ("image", [["notification", "image"]]),
        ("android_channel_id", [["android", "notification", "channel_id"]]),
        ("icon", [["android", "notification", "icon"], ["webpush", "notification", "icon"]]),
        ("tag", [["android", "notification", "tag"]]),
        ("color", [["android", "notification", "color"]]),
        ("body_loc_key", [["android", "notification", "body_loc_key"], ["apns", "payload", "aps", "alert", "loc-key"]]),
        ("title_loc_key", [["android", "notification", "title_loc_key"], ["apns", "payload", "aps", "alert", "title-loc-key"]]),
    ]
    /// Every key Tables 2a-2c allow (docs/legacy.md 1), plus the `image` extension.
    public static let notificationKeys = ["title", "body", "android_channel_id", "icon", "sound", "tag", "color", "click_action",
                                          "body_loc_key", "body_loc_args", "title_loc_key", "title_loc_args", "subtitle",
                                          "badge", "image"]

    /// The legacy field a v1 field came from, for rejections found by the v1 rules.
    static let v1Sources: [(v1: String, legacy: String)] = [
        ("message.notification.title", "legacy.notification.title"),
        ("message.notification.body", "legacy.notification.body"),
        ("message.notification.image", "legacy.notification.image"),
        ("message.android.notification.channel_id", "legacy.notification.android_channel_id"),
        ("message.android.notification.icon", "legacy.notification.icon"),
        ("message.webpush.notification.icon", "legacy.notification.icon"),
        ("message.android.notification.sound", "legacy.notification.sound"),
        ("message.android.notification.tag", "legacy.notification.tag"),
        ("message.android.notification.color", "legacy.notification.color"),
        ("message.android.notification.click_action", "legacy.notification.click_action"),
        ("message.webpush.fcm_options.link", "legacy.notification.click_action"),
        ("message.android.notification.body_loc_key", "legacy.notification.body_loc_key"),
        ("message.android.notification.body_loc_args", "legacy.notification.body_loc_args"),
        ("message.android.notification.title_loc_key", "legacy.notification.title_loc_key"),
        ("message.android.notification.title_loc_args", "legacy.notification.title_loc_args"),
        ("message.apns.payload", "legacy.notification"),
        ("message.android.collapse_key", "legacy.collapse_key"),
        ("message.apns.headers.apns-collapse-id", "legacy.collapse_key"),
        ("message.android.ttl", "legacy.time_to_live"),
        ("message.android.restricted_package_name", "legacy.restricted_package_name"),
        ("message.data", "legacy.data"),
        ("message.topic", "legacy.to"),
        ("message.condition", "legacy.condition"),
    ]

    // MARK: - JSON (docs/legacy.md Table 1)

    /// Translates a legacy JSON payload. `now` is the clock in whole UNIX seconds, used only for
    /// `apns-expiration`; pass the time the request is built, on every attempt.
    public static func translate(_ legacy: JSONValue, now: Int) -> Result<LegacyTranslation, LegacyRejection> {
        do throws(LegacyRejection) {
            var translation = Translation(now: now)
            return .success(try translation.run(legacy))
        } catch {
            return .failure(error)
        }
    }

    /// Translates a plain-text body (docs/legacy.md 4.9; `application/x-www-form-urlencoded`, UTF-8).
    public static func translate(form body: String, now: Int) -> Result<LegacyTranslation, LegacyRejection> {
        do throws(LegacyRejection) {
            var translation = Translation(now: now)
            return .success(try translation.run(try LegacyForm.payload(body)))
        } catch {
            return .failure(error)
        }
    }

    private static let v1OnlyKeys = ["token", "topic", "fid", "message", "android", "android_v2", "apns", "webpush", "fcm_options"]
    private static let legacyOnlyKeys = ["to", "registration_ids", "notification_key", "priority", "time_to_live", "collapse_key",
                                         "content_available", "mutable_content", "restricted_package_name", "dry_run"]

    /// docs/legacy.md 4.1's rule for a value found where a v1 message was expected: legacy when it has
    /// a key only the legacy format has (or a notification key outside title/body/image), and no
    /// key only v1 has. The cheap keys are tested first; a v1 message costs a few lookups.
    public static func isLegacy(_ message: JSONValue) -> Bool {
        guard case .object(let object) = message else { return false }
        for key in v1OnlyKeys where object[key] != nil { return false }
        for key in legacyOnlyKeys where object[key] != nil { return true }
        if case .object(let notification)? = object["notification"] {
            return notification.keys.contains { $0 != "title" && $0 != "body" && $0 != "image" }
        }
        return false
    }

    // MARK: - Shared helpers (herald._legacy_* in SQL do the same)

    /// Compact JSON text as JavaScript's JSON.stringify writes it (and PostgreSQL's to_json for
    /// strings): members in order, numbers as written, `\b \f \n \r \t` and `\u00XX` escapes.
    public static func compact(_ value: JSONValue) -> String {
        var out = ""
        writeCompact(value, into: &out)
        return out
    }

    static func writeCompact(_ value: JSONValue, into out: inout String) {
        switch value {
        case .null: out += "null"
        case .bool(let b): out += b ? "true" : "false"
        case .number(let n): out += n
        case .string(let s): out += quote(s)
        case .array(let elements):
            out += "["
            for (i, element) in elements.enumerated() {
                if i > 0 { out += "," }
                writeCompact(element, into: &out)
            }
            out += "]"
        case .object(let object):
            out += "{"
            for (i, member) in object.members.enumerated() {
                if i > 0 { out += "," }
                out += quote(member.key)
                out += ":"
                writeCompact(member.value, into: &out)
            }
            out += "}"
        }
    }

    static func quote(_ s: String) -> String { JSONBText.quote(s) }

    /// A value as a reason shows it: its compact JSON, cut at 40 characters.
    static func shown(_ value: JSONValue) -> String {
        let text = compact(value)
        // Counted in code points, as PostgreSQL's char_length and left do.
        return text.unicodeScalars.count <= 40 ? text : String(String.UnicodeScalarView(text.unicodeScalars.prefix(40))) + "..."
    }

    /// Legacy conditions: double quotes become single quotes, and outside quotes the keywords
    /// `in` and `topics` are lower-cased (a word is a run of ASCII letters, digits and `_`).
    /// Topic names are never changed.
    public static func normalizeCondition(_ condition: String) -> String {
        var out = String.UnicodeScalarView()
        var word = String.UnicodeScalarView()
        var quoted = false
        func flush() {
            let text = String(word)
            let lower = text.lowercased()
            out.append(contentsOf: (lower == "in" || lower == "topics") ? lower.unicodeScalars : word)
            word = String.UnicodeScalarView()
        }
        for var scalar in condition.unicodeScalars {
            if scalar == "\"" { scalar = "'" }
            if scalar == "'" {
                flush()
                quoted.toggle()
                out.append(scalar)
            } else if !quoted && (("0"..."9").contains(scalar) || ("a"..."z").contains(scalar) || ("A"..."Z").contains(scalar) || scalar == "_") {
                word.append(scalar)
            } else {
                flush()
                out.append(scalar)
            }
        }
        flush()
        return String(out)
    }

    /// The integer value of a JSON number literal when it is a whole number from 0 to `limit`
    /// (`3600`, `3600.0`, `3.6e3`), computed exactly from the decimal text; nil otherwise.
    static func wholeNumber(_ literal: String, limit: Int) -> Int? {
        var text = Substring(literal)
        var negative = false
        if text.first == "-" { negative = true; text = text.dropFirst() }
        var exponent = 0
        if let e = text.firstIndex(where: { $0 == "e" || $0 == "E" }) {
            guard let value = Int(text[text.index(after: e)...].replacingOccurrences(of: "+", with: "")), abs(value) < 100_000 else { return nil }
            exponent = value
            text = text[..<e]
        }
        var digits = ""
        if let dot = text.firstIndex(of: ".") {
            let fraction = text[text.index(after: dot)...]
            digits = String(text[..<dot]) + fraction
            exponent -= fraction.count
        } else {
            digits = String(text)
        }
        guard !digits.isEmpty, digits.allSatisfy(\.isASCII), digits.allSatisfy(\.isNumber) else { return nil }
        var significant = Substring(digits.drop { $0 == "0" })
        if significant.isEmpty { return 0 }
        while significant.last == "0" {
            significant = significant.dropLast()
            exponent += 1
        }
        if negative || exponent < 0 { return nil }
        let limitDigits = String(limit).count
        guard significant.count + exponent <= limitDigits, let base = Int(significant) else { return nil }
        var value = base
        for _ in 0..<exponent { value *= 10 }
        return value <= limit ? value : nil
    }
}

/// One translation run: the steps of docs/legacy.md 4.2 in order, the first problem ends it.
struct Translation {
    let now: Int
    var notes: [String] = []

    init(now: Int) { self.now = now }

    static func reject(_ code: String, _ path: String, _ reason: String) -> LegacyRejection {
        LegacyRejection(code: code, path: path, reason: reason)
    }

    mutating func run(_ legacy: JSONValue) throws(LegacyRejection) -> LegacyTranslation {
        let payload = try Self.legacyParameters(legacy)         // steps 1 and 2
        let targets = try self.targets(payload)                 // step 3
        var parts = MessageParts()
        try options(payload, into: &parts)                      // step 4
        if let value = payload["data"] {                        // step 5
            parts.data = try data(value)
        }
        if let value = payload["notification"] {                // step 6
            try notification(value, into: &parts)
        }
        let messages = parts.messages(to: targets)              // step 7
        try checkV1Rules(messages)
        return LegacyTranslation(validateOnly: parts.validateOnly, messages: messages, notes: notes)
    }

    /// The parts of the v1 message that the steps fill in, assembled by step 7.
    struct MessageParts {
        var android = JSONObject()
        var apnsHeaders = JSONObject()
        var aps = JSONObject()
        var webpushHeaders = JSONObject()
        var validateOnly = false
        var data = JSONObject()
        var notification = JSONObject()
        var androidNotification = JSONObject()
        var alert = JSONObject()
        var webpushNotification = JSONObject()
        var webpushOptions = JSONObject()

        /// Step 7: one message per target, each part only where it holds something.
        func messages(to targets: [(field: String, value: String)]) -> [JSONValue] {
            var android = android, aps = aps
            var shared = JSONObject()
            if !notification.isEmpty { shared["notification"] = .object(notification) }
            if !data.isEmpty { shared["data"] = .object(data) }
            if !androidNotification.isEmpty { android["notification"] = .object(androidNotification) }
            if !android.isEmpty { shared["android"] = .object(android) }
            if !alert.isEmpty { aps["alert"] = .object(alert) }
            var apns = JSONObject()
            if !apnsHeaders.isEmpty { apns["headers"] = .object(apnsHeaders) }
            if !aps.isEmpty { apns["payload"] = ["aps": .object(aps)] }
            if !apns.isEmpty { shared["apns"] = .object(apns) }
            var webpush = JSONObject()
            if !webpushHeaders.isEmpty { webpush["headers"] = .object(webpushHeaders) }
            if !webpushNotification.isEmpty { webpush["notification"] = .object(webpushNotification) }
            if !webpushOptions.isEmpty { webpush["fcm_options"] = .object(webpushOptions) }
            if !webpush.isEmpty { shared["webpush"] = .object(webpush) }
            return targets.map { target -> JSONValue in
                .object(JSONObject([JSONObject.Member(key: target.field, value: .string(target.value))] + shared.members))
            }
        }
    }

    /// Steps 1 and 2: an object (a null member counting as absent) of only Table 1's parameters
    /// (docs/legacy.md 1).
    static func legacyParameters(_ legacy: JSONValue) throws(LegacyRejection) -> JSONObject {
        guard case .object(let raw) = legacy else {
            throw reject("InvalidJson", "legacy", "the legacy payload must be a JSON object, not \(legacy.typeName)")
        }
        let payload = JSONObject(raw.members.filter { !$0.value.isNull })
        for key in payload.keys where !LegacyTranslator.parameters.contains(key) {
            throw reject("InvalidParameters", "legacy.\(key)", "\(LegacyTranslator.quote(key)) is not a legacy parameter (docs/legacy.md Table 1)")
        }
        return payload
    }

    /// Step 4: the options, in Table 1 order (docs/legacy.md 4.4).
    mutating func options(_ payload: JSONObject, into parts: inout MessageParts) throws(LegacyRejection) {
        if let value = payload["collapse_key"] {
            try collapseKey(value, into: &parts)
        }
        if let value = payload["priority"] {
            let hasNotification = payload["notification"]?.objectValue.map { !$0.members.filter { !$0.value.isNull }.isEmpty } ?? false
            try priority(value, hasNotification: hasNotification, into: &parts)
        }
        if let value = payload["content_available"], try flag(value, "legacy.content_available") {
            parts.aps["content-available"] = 1
        }
        if let value = payload["mutable_content"], try flag(value, "legacy.mutable_content") {
            parts.aps["mutable-content"] = 1
        }
        if let value = payload["time_to_live"] {
            try timeToLive(value, into: &parts)
        }
        if let value = payload["restricted_package_name"] {
            parts.android["restricted_package_name"] = .string(try nonEmptyString(value, "legacy.restricted_package_name"))
        }
        if let value = payload["dry_run"] {
            parts.validateOnly = try flag(value, "legacy.dry_run")
        }
    }

    mutating func collapseKey(_ value: JSONValue, into parts: inout MessageParts) throws(LegacyRejection) {
        let key = try nonEmptyString(value, "legacy.collapse_key")
        parts.android["collapse_key"] = .string(key)
        if key.utf8.count <= LegacyTranslator.maxAPNsCollapseIDBytes {
            parts.apnsHeaders["apns-collapse-id"] = .string(key)
        } else {
            notes.append("legacy.collapse_key is over 64 bytes: sent to Android only (apns-collapse-id holds at most 64)")
        }
    }

    mutating func priority(_ value: JSONValue, hasNotification: Bool, into parts: inout MessageParts) throws(LegacyRejection) {
        switch value.stringValue {
        case "high"?:
            parts.android["priority"] = "HIGH"
            if hasNotification {
                parts.apnsHeaders["apns-priority"] = "10"
            } else {
                parts.apnsHeaders["apns-priority"] = "5"
                notes.append("legacy.priority \"high\" without a notification: apns-priority 5, since APNs refuses 10 for a background push")
            }
        case "normal"?:
            parts.android["priority"] = "NORMAL"
            parts.apnsHeaders["apns-priority"] = "5"
        default:
            throw Self.reject("InvalidParameters", "legacy.priority", "must be \"high\" or \"normal\", not \(LegacyTranslator.shown(value))")
        }
    }

    func timeToLive(_ value: JSONValue, into parts: inout MessageParts) throws(LegacyRejection) {
        guard case .number(let literal) = value else {
            throw Self.reject("InvalidJson", "legacy.time_to_live", "must be a number of seconds, not \(value.typeName)")
        }
        guard let seconds = LegacyTranslator.wholeNumber(literal, limit: LegacyTranslator.maxTimeToLive) else {
            throw Self.reject("InvalidTtl", "legacy.time_to_live",
                              "must be a whole number of seconds from 0 to 2419200 (4 weeks), not \(literal)")
        }
        parts.android["ttl"] = .string("\(seconds)s")
        // 0 is APNs' "now or never", exactly legacy TTL 0; anything else is an absolute time.
        parts.apnsHeaders["apns-expiration"] = .string(seconds == 0 ? "0" : String(now + seconds))
        parts.webpushHeaders["TTL"] = .string(String(seconds))
    }

    /// Step 6: the notification's keys, each to where docs/legacy.md 4.5 sends it.
    mutating func notification(_ value: JSONValue, into parts: inout MessageParts) throws(LegacyRejection) {
        guard case .object(let rawNotification) = value else {
            throw Self.reject("InvalidJson", "legacy.notification", "must be an object, not \(value.typeName)")
        }
        let fields = JSONObject(rawNotification.members.filter { !$0.value.isNull })
        if fields.isEmpty { notes.append("legacy.notification is empty: dropped") }
        var copies: [(paths: [[String]], value: JSONValue)] = []
        for member in fields {
            if let copy = try notificationKey(member, into: &parts) { copies.append(copy) }
        }
        for (key, needs) in [("body_loc_args", "body_loc_key"), ("title_loc_args", "title_loc_key")]
        where fields[key] != nil && fields[needs] == nil {
            throw Self.reject("InvalidParameters", "legacy.notification.\(key)", "needs legacy.notification.\(needs)")
        }
        for copy in copies {
            for path in copy.paths {
                switch path[0] {
                case "notification": parts.notification[path[1]] = copy.value
                case "webpush": parts.webpushNotification[path[2]] = copy.value
                case "apns": parts.alert[path[4]] = copy.value
                default: parts.androidNotification[path[2]] = copy.value
                }
            }
        }
        // An aps.alert object overrides the common title and body on iOS, so it carries them too.
        if !parts.alert.isEmpty {
            if let title = parts.notification["title"] { parts.alert["title"] = title }
            if let body = parts.notification["body"] { parts.alert["body"] = body }
        }
    }

    /// One key of the notification: a key with a rule of its own is written at once; a plain
    /// copy is returned with its paths (`LegacyTranslator.notificationCopies`), written after
    /// every key was checked.
    mutating func notificationKey(_ member: JSONObject.Member,
                                  into parts: inout MessageParts) throws(LegacyRejection) -> (paths: [[String]], value: JSONValue)? {
        let path = "legacy.notification.\(member.key)"
        guard LegacyTranslator.notificationKeys.contains(member.key) else {
            throw Self.reject("InvalidParameters", path, "\(LegacyTranslator.quote(member.key)) is not a legacy notification key (docs/legacy.md Tables 2a-2c)")
        }
        switch member.key {
        case "sound":
            switch member.value {
            case .string:
                parts.androidNotification["sound"] = member.value
                parts.aps["sound"] = member.value
            case .object:
                parts.aps["sound"] = member.value
                notes.append("legacy.notification.sound is an object (an APNs critical-alert sound): sent to APNs only")
            default:
                throw Self.reject("InvalidJson", path, "must be a string or an object, not \(member.value.typeName)")
            }
        case "badge":
            parts.aps["badge"] = .number(try badge(member.value, path))
        case "body_loc_args", "title_loc_args":
            let args = try locArgs(member.value, path)
            parts.androidNotification[member.key] = .array(args.map { .string($0) })
            parts.alert[member.key == "body_loc_args" ? "loc-args" : "title-loc-args"] = .array(args.map { .string($0) })
        default:
            guard case .string(let text) = member.value else {
                throw Self.reject("InvalidJson", path, "must be a string, not \(member.value.typeName)")
            }
            switch member.key {
            case "click_action":
                parts.androidNotification["click_action"] = member.value
                parts.aps["category"] = member.value
                if text.hasPrefix("https://") { parts.webpushOptions["link"] = member.value }
            case "subtitle":
                parts.alert["subtitle"] = member.value
            default:
                return (LegacyTranslator.notificationCopies.first { $0.key == member.key }!.paths, member.value)
            }
        }
        return nil
    }

    /// The v1 rules. The messages differ only in their token, which step 3 checked, and the v1
    /// rules ask nothing more of a token than being a non-empty string: the first message speaks
    /// for all.
    func checkV1Rules(_ messages: [JSONValue]) throws(LegacyRejection) {
        if let issue = MessageValidator.validate(messages[0]).first {
            throw v1Rejection(issue.rule, issue.description)
        }
    }

    /// A v1 issue as a legacy rejection: the Table 9 code of its kind (docs/legacy.md 4.8), the legacy
/// field it came from.
    func v1Rejection(_ rule: String, _ description: String) -> LegacyRejection {
        let code = rule == "payload_size" ? "MessageTooBig" : rule == "reserved_key" ? "InvalidDataKey" : "InvalidParameters"
        let field = description.split(separator: ":", maxSplits: 1).first.map(String.init) ?? ""
        let path = LegacyTranslator.v1Sources.first { field == $0.v1 || field.hasPrefix($0.v1 + ".") || field.hasPrefix($0.v1 + "[") }?.legacy ?? "legacy"
        return Self.reject(code, path, "the translated message breaks a v1 rule: \(description)")
    }

    // MARK: Steps

    mutating func targets(_ payload: JSONObject) throws(LegacyRejection) -> [(field: String, value: String)] {
        let present = LegacyTranslator.targetParameters.filter { payload[$0] != nil }
        if present.isEmpty {
            throw Self.reject("MissingRegistration", "legacy", "no target: give one of to, registration_ids, condition or notification_key")
        }
        if present.count > 1 {
            throw Self.reject("InvalidParameters", "legacy.\(present[1])",
                              "conflicting targets: \(present.joined(separator: ", ")); give exactly one")
        }
        let field = present[0]
        let path = "legacy.\(field)"
        let value = payload[field]!
        switch field {
        case "registration_ids":
            guard case .array(let tokens) = value else {
                throw Self.reject("InvalidJson", path, "must be an array of registration tokens, not \(value.typeName)")
            }
            if tokens.isEmpty { throw Self.reject("InvalidParameters", path, "must hold at least 1 registration token") }
            if tokens.count > LegacyTranslator.maxRegistrationIDs {
                throw Self.reject("InvalidParameters", path, "holds \(tokens.count) registration tokens; at most 1000 are allowed")
            }
            var result: [(String, String)] = []
            result.reserveCapacity(tokens.count)
            for (index, token) in tokens.enumerated() {
                guard case .string(let text) = token else {
                    throw Self.reject("InvalidJson", "\(path)[\(index)]", "must be a string, not \(token.typeName)")
                }
                if text.isEmpty { throw Self.reject("MissingRegistration", "\(path)[\(index)]", "is empty") }
                result.append(("token", text))
            }
            return result
        default:
            guard case .string(let text) = value else {
                throw Self.reject("InvalidJson", path, "must be a string, not \(value.typeName)")
            }
            if text.isEmpty { throw Self.reject("MissingRegistration", path, "is empty") }
            switch field {
            case "condition":
                let normalized = LegacyTranslator.normalizeCondition(text)
                if normalized != text { notes.append("legacy.condition normalized to \(LegacyTranslator.quote(normalized))") }
                return [("condition", normalized)]
            case "notification_key":
                notes.append("legacy.notification_key is deprecated: sent as message.token")
                return [("token", text)]
            default:
                if text.hasPrefix("/topics/") {
                    let name = text.dropFirst("/topics/".count)
                    guard !name.isEmpty, name.unicodeScalars.allSatisfy(Self.isTopicScalar) else {
                        throw Self.reject("InvalidParameters", path, "topic name \(LegacyTranslator.quote(String(name))) must match [a-zA-Z0-9-_.~%]+")
                    }
                    return [("topic", String(name))]
                }
                return [("token", text)]
            }
        }
    }

    static func isTopicScalar(_ scalar: Unicode.Scalar) -> Bool {
        ("a"..."z").contains(scalar) || ("A"..."Z").contains(scalar) || ("0"..."9").contains(scalar) || "-_.~%".unicodeScalars.contains(scalar)
    }

    func nonEmptyString(_ value: JSONValue, _ path: String) throws(LegacyRejection) -> String {
        guard case .string(let text) = value else {
            throw Self.reject("InvalidJson", path, "must be a string, not \(value.typeName)")
        }
        if text.isEmpty { throw Self.reject("InvalidParameters", path, "must be a non-empty string") }
        return text
    }

    /// true/false, or 1/0 as some legacy senders wrote them.
    func flag(_ value: JSONValue, _ path: String) throws(LegacyRejection) -> Bool {
        switch value {
        case .bool(let b): return b
        case .number(let literal):
            if let n = LegacyTranslator.wholeNumber(literal, limit: 1) { return n == 1 }
        default: break
        }
        throw Self.reject("InvalidJson", path, "must be true or false (or 1 or 0), not \(LegacyTranslator.shown(value))")
    }

    mutating func data(_ value: JSONValue) throws(LegacyRejection) -> JSONObject {
        guard case .object(let members) = value else {
            throw Self.reject("InvalidJson", "legacy.data", "must be an object, not \(value.typeName)")
        }
        var data = JSONObject()
        for member in members {
            let key = member.key
            let path = "legacy.data.\(key)"
            if key == "from" || key == "message_type" || key == "notification" || key.hasPrefix("google") || key.hasPrefix("gcm") {
                throw Self.reject("InvalidDataKey", path, "\(LegacyTranslator.quote(key)) is reserved by FCM (from, message_type, notification, google*, gcm*)")
            }
            if LegacyTranslator.parameters.contains(key) {
                notes.append("\(path) is a legacy parameter name: v1 delivers it as ordinary data")
            }
            switch member.value {
            case .string: data[key] = member.value
            case .null: throw Self.reject("InvalidParameters", path, "null has no string form")
            default:
                data[key] = .string(LegacyTranslator.compact(member.value))
                notes.append("\(path): \(member.value.typeName) sent as its JSON text")
            }
        }
        return data
    }

    /// A string of decimal digits or a JSON integer, as a JSON number literal without leading zeros.
    func badge(_ value: JSONValue, _ path: String) throws(LegacyRejection) -> String {
        let digits: String?
        switch value {
        case .string(let s): digits = s
        case .number(let n): digits = n
        default: digits = nil
        }
        guard let digits, !digits.isEmpty, digits.unicodeScalars.allSatisfy({ ("0"..."9").contains($0) }) else {
            throw Self.reject("InvalidParameters", path, "must be a whole number of 0 or more (a string of digits or a JSON integer), not \(LegacyTranslator.shown(value))")
        }
        let trimmed = digits.drop { $0 == "0" }
        return trimmed.isEmpty ? "0" : String(trimmed)
    }

    /// "JSON array as string" (or a real array): its elements as strings.
    func locArgs(_ value: JSONValue, _ path: String) throws(LegacyRejection) -> [String] {
        let array: [JSONValue]
        switch value {
        case .array(let elements): array = elements
        case .string(let text):
            guard case .array(let elements)? = try? JSONValue.parse(text) else {
                throw Self.reject("InvalidParameters", path, "must hold a JSON array such as [\"Jenna\",\"Frank\"], not \(LegacyTranslator.shown(value))")
            }
            array = elements
        default:
            throw Self.reject("InvalidJson", path, "must be a JSON array or a string holding one, not \(value.typeName)")
        }
        var strings: [String] = []
        for (index, element) in array.enumerated() {
            switch element {
            case .string(let s): strings.append(s)
            case .number(let n): strings.append(n)
            case .bool(let b): strings.append(b ? "true" : "false")
            default:
                throw Self.reject("InvalidParameters", "\(path)[\(index)]", "must be a string, number or boolean, not \(element.typeName)")
            }
        }
        return strings
    }
}
