import JSON

/// Where FCM delivers a message: exactly one per message. A device group is addressed with its
/// `notification_key` as a `.token`.
public enum Target: Sendable, Hashable {
    /// A registration token (or a device group's notification key).
    case token(String)
    /// A topic name, without the `/topics/` prefix.
    case topic(String)
    /// A condition over topics, e.g. `'dogs' in topics && 'cats' in topics`.
    case condition(String)
    /// A Firebase installation ID (newer FCM; `token` is being deprecated in its favour).
    case fid(String)

    /// The message fields that hold a target, in the order `Message.target` reads them.
    public static let fields = ["token", "topic", "condition", "fid"]

    /// The message field this target is written to.
    public var field: String {
        switch self {
        case .token: return "token"
        case .topic: return "topic"
        case .condition: return "condition"
        case .fid: return "fid"
        }
    }

    public var value: String {
        switch self {
        case .token(let v), .topic(let v), .condition(let v), .fid(let v): return v
        }
    }

    /// The target for a message field name (`token`, `topic`, `condition`, `fid`); nil for others.
    public init?(field: String, value: String) {
        switch field {
        case "token": self = .token(value)
        case "topic": self = .topic(value)
        case "condition": self = .condition(value)
        case "fid": self = .fid(value)
        default: return nil
        }
    }
}

/// Why a value cannot be a message at all (as opposed to a message that breaks a rule, which
/// `MessageValidator` reports).
public struct MessageError: Error, Sendable, Equatable, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// An FCM HTTP v1 `message` object.
///
/// The message is its JSON: `json` is the object exactly as given (member order, number
/// literals, fields Herald does not interpret such as custom APNs keys or fields FCM adds later),
/// and the typed properties read and write through to it. A property reads nil when its member
/// is absent or has another JSON type; setting nil removes the member.
public struct Message: Sendable, Equatable, JSONObjectView {
    /// The message object. Always a JSON object.
    public private(set) var json: JSONValue

    /// Wraps a v1 message object (the value of `"message"` in a send request).
    public init(json: JSONValue) throws(MessageError) {
        guard case .object = json else { throw MessageError("a message must be a JSON object, not \(json.typeName)") }
        self.json = json
    }

    /// Parses a message object from JSON text.
    public init(text: String) throws(MessageError) {
        let value: JSONValue
        do { value = try JSONValue.parse(text) } catch { throw MessageError("the message is not valid JSON: \(error)") }
        try self.init(json: value)
    }

    /// Parses a message object from UTF-8 JSON.
    public init(bytes: [UInt8]) throws(MessageError) {
        let value: JSONValue
        do { value = try JSONValue.parse(bytes) } catch { throw MessageError("the message is not valid JSON: \(error)") }
        try self.init(json: value)
    }

    public init(object: JSONObject) { json = .object(object) }

    /// An empty message, to fill through the typed properties.
    public init() { json = .object(JSONObject()) }

    /// The message `herald send` builds: a target, an optional notification and data.
    public init(target: Target, title: String? = nil, body: String? = nil, image: String? = nil,
                data: [(key: String, value: String)] = []) {
        self.init()
        self.target = target
        if title != nil || body != nil || image != nil {
            notification = MessageNotification(title: title, body: body, image: image)
        }
        if !data.isEmpty { self.data = StringMap(data) }
    }

    public var object: JSONObject {
        get { json.objectValue ?? JSONObject() }
        set { json = .object(newValue) }
    }

    /// Where the message goes: the first of `token`, `topic`, `condition`, `fid` that holds a
    /// string. Setting it removes every other target field, so the message keeps exactly one.
    public var target: Target? {
        get {
            for field in Target.fields {
                if case .string(let value)? = object[field] { return Target(field: field, value: value) }
            }
            return nil
        }
        set {
            mutate { object in
                for field in Target.fields { object[field] = nil }
                if let newValue { object[newValue.field] = .string(newValue.value) }
            }
        }
    }

    /// Shown on every platform unless a platform block overrides it.
    public var notification: MessageNotification? {
        get { view("notification") }
        set { setView("notification", newValue) }
    }

    /// Custom key/value pairs delivered to the app (strings only).
    public var data: StringMap? {
        get { view("data") }
        set { setView("data", newValue) }
    }

    public var fcmOptions: FCMOptions? {
        get { view("fcm_options") }
        set { setView("fcm_options", newValue) }
    }

    public var android: AndroidConfig? {
        get { view("android") }
        set { setView("android", newValue) }
    }

    public var apns: APNSConfig? {
        get { view("apns") }
        set { setView("apns", newValue) }
    }

    public var webpush: WebpushConfig? {
        get { view("webpush") }
        set { setView("webpush", newValue) }
    }

    /// Any member, typed or not.
    public subscript(key: String) -> JSONValue? {
        get { object[key] }
        set { mutate { $0[key] = newValue } }
    }

    /// The rule violations of this message; empty when it may be sent.
    public func validate() -> [ValidationIssue] { MessageValidator.validate(json) }

    /// The body of `POST /v1/projects/{project}/messages:send`: `{"message": ..., "validate_only": ...}`.
    public func requestBody(validateOnly: Bool = false) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(512)
        out.append(contentsOf: #"{"message":"#.utf8)
        json.write(into: &out)
        if validateOnly { out.append(contentsOf: #","validate_only":true"#.utf8) }
        out.append(UInt8(ascii: "}"))
        return out
    }

    public static func == (lhs: Message, rhs: Message) -> Bool { lhs.json == rhs.json }

    /// Mutates the object in place (the enum releases its copy first, so no copy is made).
    private mutating func mutate(_ body: (inout JSONObject) -> Void) {
        var object = json.objectValue ?? JSONObject()
        json = .null
        body(&object)
        json = .object(object)
    }
}
