import JSON

/// One reason an APNs message may not be sent: the field (`message.apns.headers.apns-push-type`)
/// and why, in the words herald.validate_apns_message gives (`field: reason`).
public struct APNsIssue: Sendable, Equatable, CustomStringConvertible {
    public var field: String
    public var reason: String
    public init(field: String, reason: String) {
        self.field = field
        self.reason = reason
    }
    public var description: String { "\(field): \(reason)" }
}

/// The rules an APNs message (a Herald message with `apns_token`, for Apple's provider API) must
/// pass before it is sent, compiled from `Sources/FCM/Rules/apns-rules.json`. The same file is
/// loaded by `herald migrate` into herald.apns_rules, where herald.validate_apns_message and the
/// trigger jobs_apns (which refuses such a job at INSERT) read the same values, so a job refused
/// here was refused there, with the same words. A worker calls `validate` on a claimed job and
/// dead-letters one with issues without a request (rows can be older than the rules). The APNs
/// module's `APNsPushType` and `APNsRequest` take their push types, topic suffixes, priorities,
/// limits and headers from here too (`headerReason`, `pushTypeReason`, `priorityReason`), so what
/// the sender builds is what was admitted.
public struct APNsMessageRules: Sendable {
    /// The rule file as JSON text.
    public static let json: String = EmbeddedAPNsRules.text
    /// The rule format this type and herald.load_apns_rules understand.
    public static let format = 1
    /// Parameterised statement that stores the rules (`$1` = `json`) in herald.apns_rules.
    public static let loadStatement = "SELECT herald.load_apns_rules($1::jsonb)"

    /// The embedded rules, compiled once.
    public static let standard: APNsMessageRules = {
        do { return try APNsMessageRules(json: json) } catch {
            fatalError("Herald's embedded APNs rules do not compile: \(error)")
        }
    }()

    public struct PushType: Sendable, Equatable {
        public var name: String
        /// What follows the app's bundle ID in `apns-topic` for this push type.
        public var topicSuffix: String
        /// The apns-priority sent when the message sets none.
        public var defaultPriority: String
        public var maxPayloadBytes: Int
        /// The apns-priority values this push type takes; nil: any of `priorities`.
        public var priorities: [String]?
        /// Members of `aps` this push type needs.
        public var apsRequired: [String]
    }

    /// A push type Apple has that Herald does not send yet, and why.
    public struct NotSent: Sendable, Equatable {
        public var name: String
        public var why: String
    }

    /// A header a message may set in `apns.headers`, and the bounds of its value.
    public struct Header: Sendable, Equatable {
        public var name: String
        /// `uuid` (8-4-4-4-12 hex digits), `digits` (0-9 only) or nil (any text).
        public var format: String?
        public var minBytes: Int?
        public var maxBytes: Int?
        /// Key of the reason given when the value is out of bounds.
        public var message: String?
    }

    struct APSField: Sendable {
        var name: String
        var type: String
        var values: [String]?
    }

    public let tokenField: String
    public let minHexDigits: Int
    public let maxHexDigits: Int
    public let fcmTargets: [String]
    public let apnsFields: [String]
    public let pushTypeHeader: String
    public let defaultPushType: String
    public let priorityHeader: String
    public let priorities: [String]
    public let pushTypes: [PushType]
    public let notSent: [NotSent]
    public let headers: [Header]
    let apsFields: [APSField]
    let valueMaxCharacters: Int
    let messages: [String: String]

    public init(json text: String) throws(RuleDefinitionError) {
        func fail(_ what: String) -> RuleDefinitionError { RuleDefinitionError(description: "APNs rules: \(what)") }
        let document: JSONValue
        do { document = try JSONValue.parse(text) } catch { throw fail("\(error)") }
        guard let top = document.objectValue else { throw fail("not an object") }
        guard top["format"]?.intValue == Self.format else {
            throw fail("format \(top["format"]?.serialized ?? "missing"), this build understands \(Self.format)")
        }
        func strings(_ value: JSONValue?, _ name: String) throws(RuleDefinitionError) -> [String] {
            guard let array = value?.arrayValue else { throw fail("\(name) is not a list") }
            var out: [String] = []
            for element in array {
                guard let s = element.stringValue else { throw fail("\(name) holds a value that is not a string") }
                out.append(s)
            }
            return out
        }
        func string(_ value: JSONValue?, _ name: String) throws(RuleDefinitionError) -> String {
            guard let s = value?.stringValue else { throw fail("\(name) is not a string") }
            return s
        }
        guard let token = top["token"]?.objectValue, let minDigits = token["min_hex_digits"]?.intValue,
              let maxDigits = token["max_hex_digits"]?.intValue else {
            throw fail("token needs field, min_hex_digits and max_hex_digits")
        }
        tokenField = try string(token["field"], "token.field")
        minHexDigits = minDigits
        maxHexDigits = maxDigits
        fcmTargets = try strings(top["fcm_targets"], "fcm_targets")
        apnsFields = try strings(top["apns_fields"], "apns_fields")
        pushTypeHeader = try string(top["push_type_header"], "push_type_header")
        let defaultType = try string(top["default_push_type"], "default_push_type")
        defaultPushType = defaultType
        priorityHeader = try string(top["priority_header"], "priority_header")
        priorities = try strings(top["priorities"], "priorities")
        guard let types = top["push_types"]?.arrayValue else { throw fail("push_types is not a list") }
        var pushTypes: [PushType] = []
        for entry in types {
            guard let object = entry.objectValue, let max = object["max_payload_bytes"]?.intValue else {
                throw fail("a push type needs name and max_payload_bytes")
            }
            let defaultPriority = try string(object["default_priority"], "push_types.default_priority")
            guard priorities.contains(defaultPriority) else { throw fail("a push type's default_priority is not in priorities") }
            pushTypes.append(PushType(
                name: try string(object["name"], "push_types.name"),
                topicSuffix: try string(object["topic_suffix"], "push_types.topic_suffix"),
                defaultPriority: defaultPriority, maxPayloadBytes: max,
                priorities: object["priorities"] == nil ? nil : try strings(object["priorities"], "push_types.priorities"),
                apsRequired: object["aps_required"] == nil ? [] : try strings(object["aps_required"], "push_types.aps_required")))
        }
        self.pushTypes = pushTypes
        guard pushTypes.contains(where: { $0.name == defaultType }) else { throw fail("default_push_type is not in push_types") }
        guard let notSentList = top["push_types_not_sent"]?.arrayValue else { throw fail("push_types_not_sent is not a list") }
        var notSent: [NotSent] = []
        for entry in notSentList {
            guard let object = entry.objectValue else { throw fail("an entry of push_types_not_sent is not an object") }
            notSent.append(NotSent(name: try string(object["name"], "push_types_not_sent.name"),
                                   why: try string(object["why"], "push_types_not_sent.why")))
        }
        self.notSent = notSent
        guard let headerList = top["headers"]?.arrayValue else { throw fail("headers is not a list") }
        var headers: [Header] = []
        for entry in headerList {
            guard let object = entry.objectValue else { throw fail("an entry of headers is not an object") }
            let format = object["format"] == nil ? nil : try string(object["format"], "headers.format")
            guard format == nil || format == "uuid" || format == "digits" else { throw fail("header format \(format ?? "") is neither uuid nor digits") }
            let header = Header(name: try string(object["name"], "headers.name"), format: format,
                                minBytes: object["min_bytes"]?.intValue, maxBytes: object["max_bytes"]?.intValue,
                                message: object["message"] == nil ? nil : try string(object["message"], "headers.message"))
            guard header.message != nil || (format == nil && header.minBytes == nil && header.maxBytes == nil) else {
                throw fail("header \(header.name) is bounded but names no message")
            }
            headers.append(header)
        }
        self.headers = headers
        let typeHeader = pushTypeHeader, priorityName = priorityHeader
        guard headers.contains(where: { $0.name == typeHeader }), headers.contains(where: { $0.name == priorityName }) else {
            throw fail("headers must list push_type_header and priority_header")
        }
        guard let fields = top["aps_fields"]?.arrayValue else { throw fail("aps_fields is not a list") }
        var apsFields: [APSField] = []
        for entry in fields {
            guard let object = entry.objectValue else { throw fail("an aps field is not an object") }
            let type = try string(object["type"], "aps_fields.type")
            guard type == "string" || type == "integer" else { throw fail("aps field type \(type) is neither string nor integer") }
            apsFields.append(APSField(name: try string(object["name"], "aps_fields.name"), type: type,
                                      values: object["values"] == nil ? nil : try strings(object["values"], "aps_fields.values")))
        }
        self.apsFields = apsFields
        guard let max = top["value_max_characters"]?.intValue else { throw fail("value_max_characters is not a number") }
        valueMaxCharacters = max
        guard let texts = top["messages"]?.objectValue else { throw fail("messages is not an object") }
        var messages: [String: String] = [:]
        for member in texts { messages[member.key] = try string(member.value, "messages.\(member.key)") }
        self.messages = messages
    }

    /// The push type the message is sent as: its apns-push-type header, or the default when it
    /// has none. Nil when the header is not a known push type (`validate` says so).
    public func pushType(of message: JSONValue) -> PushType? {
        let header = present(present(present(message, "apns"), "headers"), pushTypeHeader)
        let name: String
        if let header {
            guard let text = header.stringValue else { return nil }
            name = text
        } else {
            name = defaultPushType
        }
        return pushTypes.first { $0.name == name }
    }

    /// Every issue of `message`, in the rule file's order; empty when it may be sent.
    public func validate(_ message: JSONValue) -> [APNsIssue] {
        var payload: [UInt8] = []
        return validate(message, payload: &payload)
    }

    /// `validate`, handing back in `payload` the message's payload as compact JSON when the size
    /// rule measured it (empty otherwise): what a sender sends, so it is written once.
    public func validate(_ message: JSONValue, payload written: inout [UInt8]) -> [APNsIssue] {
        var issues: [APNsIssue] = []
        func add(_ field: String, _ key: String, _ values: [String: String] = [:]) {
            issues.append(APNsIssue(field: field, reason: fill(key, values)))
        }
        guard message.objectValue != nil else {
            add("message", "message.type", ["type": message.typeName])
            return issues
        }
        for target in fcmTargets where present(message, target) != nil {
            add("message.\(target)", "fcm_target", ["field": target])
        }
        let tokenPath = "message.\(tokenField)"
        if let token = present(message, tokenField) {
            if let text = token.stringValue {
                if !Self.isHexToken(text, minDigits: minHexDigits, maxDigits: maxHexDigits) {
                    add(tokenPath, "token.shape", ["min": String(minHexDigits), "max": String(maxHexDigits), "length": String(text.unicodeScalars.count)])
                }
            } else {
                add(tokenPath, "token.type", ["type": token.typeName])
            }
        } else {
            add(tokenPath, "token.required")
        }
        guard let apns = present(message, "apns") else {
            add("message.apns", "apns.required")
            return issues
        }
        guard let apnsObject = apns.objectValue else {
            add("message.apns", "object.type", ["type": apns.typeName])
            return issues
        }
        if apnsObject.members.contains(where: { !apnsFields.contains($0.key) }) {
            for key in apnsObject.keys.sorted(by: Self.byteOrder) where !apnsFields.contains(key) {
                add("message.apns" + Self.member(key), "apns.unknown", ["fields": apnsFields.joined(separator: ", ")])
            }
        }
        var pushType = pushTypes.first { $0.name == defaultPushType }
        if let headers = present(apns, "headers") {
            if let headerObject = headers.objectValue {
                for key in headerObject.count < 2 ? headerObject.keys : headerObject.keys.sorted(by: Self.byteOrder) {
                    guard let value = headerObject[key], !value.isNull else { continue }
                    if let text = value.stringValue {
                        if let reason = headerReason(key, text) {
                            issues.append(APNsIssue(field: "message.apns.headers" + Self.member(key), reason: reason))
                        }
                    } else if let reason = headerReason(key, nil) {
                        issues.append(APNsIssue(field: "message.apns.headers" + Self.member(key), reason: reason))
                    } else {
                        add("message.apns.headers" + Self.member(key), "header.type", ["type": value.typeName])
                    }
                }
                if let value = present(headers, pushTypeHeader) {
                    pushType = nil
                    if let name = value.stringValue {
                        pushType = pushTypes.first { $0.name == name }
                        if pushType == nil {
                            issues.append(APNsIssue(field: "message.apns.headers.\(pushTypeHeader)", reason: pushTypeReason(name) ?? ""))
                        }
                    }
                }
                if let value = present(headers, priorityHeader), let priority = value.stringValue,
                   let reason = priorityReason(priority, pushType: pushType) {
                    issues.append(APNsIssue(field: "message.apns.headers.\(priorityHeader)", reason: reason))
                }
            } else {
                add("message.apns.headers", "object.type", ["type": headers.typeName])
            }
        }
        guard let payload = present(apns, "payload") else {
            add("message.apns.payload", "payload.required")
            return issues
        }
        guard payload.objectValue != nil else {
            add("message.apns.payload", "object.type", ["type": payload.typeName])
            return issues
        }
        guard let aps = present(payload, "aps") else {
            add("message.apns.payload.aps", "aps.required")
            return issues
        }
        if aps.objectValue != nil {
            for name in pushType?.apsRequired ?? [] where present(aps, name) == nil {
                add("message.apns.payload.aps.\(name)", "aps_field.required", ["push_type": pushType?.name ?? ""])
            }
            for field in apsFields {
                guard let value = present(aps, field.name) else { continue }
                let path = "message.apns.payload.aps.\(field.name)"
                if field.type == "string" {
                    guard let text = value.stringValue else {
                        add(path, "aps_field.string", ["type": value.typeName])
                        continue
                    }
                    if let values = field.values, !values.contains(text) {
                        add(path, "aps_field.enum", ["value": render(text), "allowed": values.joined(separator: ", ")])
                    }
                } else if !Self.isInteger(value) {
                    add(path, "aps_field.integer", ["type": value.typeName])
                }
            }
        } else {
            add("message.apns.payload.aps", "object.type", ["type": aps.typeName])
        }
        if let pushType {
            written.removeAll(keepingCapacity: true)
            written.reserveCapacity(256)
            payload.write(into: &written)
            let size = written.count
            if size > pushType.maxPayloadBytes {
                add("message.apns.payload", "payload.size",
                    ["size": String(size), "max": String(pushType.maxPayloadBytes), "push_type": pushType.name])
            }
        }
        return issues
    }

    /// Why the message may not set header `name` to `value` (nil: only whether the name is one a
    /// message sets), or nil when it may. The push type and priority are judged apart
    /// (`pushTypeReason`, `validate`).
    public func headerReason(_ name: String, _ value: String?) -> String? {
        guard let header = headers.first(where: { $0.name == name }) else {
            return fill("header.unknown", ["headers": headers.map(\.name).joined(separator: ", ")])
        }
        guard let value, let message = header.message else { return nil }
        let bytes = value.utf8
        var fits = true
        if let min = header.minBytes, bytes.count < min { fits = false }
        if let max = header.maxBytes, bytes.count > max { fits = false }
        if header.format == "digits", !bytes.allSatisfy({ $0 >= 48 && $0 <= 57 }) { fits = false }
        if header.format == "uuid", !Self.isUUID(value) { fits = false }
        guard !fits else { return nil }
        return fill(message, ["value": render(value), "size": String(bytes.count),
                              "min": header.minBytes.map(String.init) ?? "", "max": header.maxBytes.map(String.init) ?? ""])
    }

    /// Why a message may not be sent as push type `name`, or nil when Herald sends it.
    public func pushTypeReason(_ name: String) -> String? {
        guard !pushTypes.contains(where: { $0.name == name }) else { return nil }
        let allowed = pushTypes.map(\.name).joined(separator: ", ")
        if let later = notSent.first(where: { $0.name == name }) {
            return fill("push_type.not_sent", ["value": render(name), "why": later.why, "allowed": allowed])
        }
        return fill("push_type.unknown", ["value": render(name), "allowed": allowed])
    }

    /// Why a message of `pushType` (nil: one not known) may not be sent at `priority`, or nil
    /// when it may.
    public func priorityReason(_ priority: String, pushType: PushType?) -> String? {
        if !priorities.contains(priority) {
            return fill("priority.unknown", ["value": render(priority), "allowed": priorities.joined(separator: ", ")])
        }
        if let pushType, let allowed = pushType.priorities, !allowed.contains(priority) {
            return fill("priority.push_type", ["value": render(priority), "push_type": pushType.name, "allowed": allowed.joined(separator: ", ")])
        }
        return nil
    }

    /// 8-4-4-4-12 hex digits, as `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`.
    static func isUUID(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        guard bytes.count == 36 else { return false }
        for (index, byte) in bytes.enumerated() {
            if index == 8 || index == 13 || index == 18 || index == 23 {
                guard byte == 45 else { return false }
            } else if !((byte >= 48 && byte <= 57) || (byte >= 65 && byte <= 70) || (byte >= 97 && byte <= 102)) {
                return false
            }
        }
        return true
    }

    /// Bytes of `value` as compact JSON, as the sender writes it (`JSONValue.serialized`).
    public static func payloadBytes(_ value: JSONValue) -> Int {
        var out: [UInt8] = []
        value.write(into: &out)
        return out.count
    }

    /// An even number of hex digits, from `minDigits` to `maxDigits`, and nothing else: a device
    /// token's bytes, two digits each (what the sender can put in the request's path).
    static func isHexToken(_ text: String, minDigits: Int, maxDigits: Int) -> Bool {
        let count = text.utf8.count
        return count >= minDigits && count <= maxDigits && count % 2 == 0 && text.utf8.allSatisfy {
            ($0 >= 48 && $0 <= 57) || ($0 >= 65 && $0 <= 70) || ($0 >= 97 && $0 <= 102)
        }
    }

    /// A JSON number written without fraction or exponent.
    static func isInteger(_ value: JSONValue) -> Bool {
        guard case .number(let text) = value else { return false }
        let digits = text.hasPrefix("-") ? text.utf8.dropFirst() : text.utf8[...]
        return !digits.isEmpty && digits.allSatisfy { $0 >= 48 && $0 <= 57 }
    }

    static func byteOrder(_ a: String, _ b: String) -> Bool { a.utf8.lexicographicallyPrecedes(b.utf8) }

    /// `.name` for a plain member name; `["name"]` (JSON-quoted) for any other, so a field path
    /// never looks like a deeper one.
    public static func member(_ key: String) -> String {
        let plain = !key.isEmpty && key.utf8.allSatisfy {
            ($0 >= 48 && $0 <= 57) || ($0 >= 65 && $0 <= 90) || ($0 >= 97 && $0 <= 122) || $0 == 95 || $0 == 45
        }
        return plain ? "." + key : "[" + quote(key) + "]"
    }

    /// `key` of `value` when `value` is an object holding it with a value other than null.
    func present(_ value: JSONValue?, _ key: String) -> JSONValue? {
        guard let member = value?.objectValue?[key], !member.isNull else { return nil }
        return member
    }

    /// A value shown in a reason: JSON-quoted, cut after `value_max_characters` code points.
    func render(_ text: String) -> String {
        let scalars = text.unicodeScalars
        guard scalars.count > valueMaxCharacters else { return Self.quote(text) }
        var cut = String.UnicodeScalarView()
        cut.append(contentsOf: scalars.prefix(valueMaxCharacters))
        return Self.quote(String(cut)) + "…"
    }

    static func quote(_ text: String) -> String { JSONBText.quote(text) }

    /// The reason `key` of the rule file's messages, its placeholders filled in one pass (as
    /// the FCM rules' templates are, and herald._mv_fill in SQL).
    func fill(_ key: String, _ values: [String: String]) -> String {
        Text.fill(messages[key] ?? key, values.sorted { $0.key < $1.key }.map { ($0.key, $0.value) })
    }
}
