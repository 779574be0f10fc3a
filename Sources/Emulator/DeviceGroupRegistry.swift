import Crypto
import JSON

/// Device groups (`/fcm/notification`) of every project: a name, a `notification_key`, up to 20
/// registration tokens. Each lookup by name hands out a fresh-looking key for the same group, as
/// FCM does; every key handed out stays valid until the group is deleted.
///
/// Errors follow the legacy style, `{"error": "..."}`:
/// - 400 `operation must be "create", "add" or "remove"`, `notification_key_name is required`,
///   `notification_key is required`, `registration_ids must be a non-empty array of strings`
/// - 400 `notification_key already exists` (create with a name in use)
/// - 400 `notification_key_name does not match notification_key`
/// - 400 `too many registration ids: a device group holds at most 20` (nothing changes)
/// - 404 `notification_key not found` (unknown key, or unknown name on lookup)
public struct DeviceGroupRegistry: Sendable {
    public static let maxMembers = 20

    public struct Group: Sendable, Equatable {
        public var projectID: String
        public var name: String
        public var key: String
        public var members: [String]
    }

    public struct Failure: Error, Sendable, Equatable {
        public var status: Int
        public var message: String
    }

    private var groups: [Int: Group] = [:]
    private var byName: [String: Int] = [:]
    private var byKey: [String: Int] = [:]
    private var aliases: [Int: [String]] = [:]
    private var nextID = 1
    private let makeKey: @Sendable () -> String

    /// `makeKey` produces a new notification key; the default is `APA91b` and 134 random
    /// base64url characters, the look of a real one.
    public init(makeKey: @escaping @Sendable () -> String = { "APA91b" + Base64URL.encode(Random.bytes(100)) }) {
        self.makeKey = makeKey
    }

    private static func nameKey(_ projectID: String, _ name: String) -> String { projectID + "\u{0}" + name }

    /// The members a `token` stands for when it is a group's key (for this project), else nil.
    public func members(ofKey key: String, projectID: String) -> [String]? {
        guard let id = byKey[key], let group = groups[id], group.projectID == projectID else { return nil }
        return group.members
    }

    public func group(named name: String, projectID: String) -> Group? {
        byName[DeviceGroupRegistry.nameKey(projectID, name)].flatMap { groups[$0] }
    }

    /// Carries out one management request body; returns the key to answer with.
    public mutating func apply(_ body: JSONValue, projectID: String) -> Result<String, Failure> {
        func fail(_ status: Int, _ message: String) -> Result<String, Failure> { .failure(Failure(status: status, message: message)) }
        guard let object = body.objectValue else { return fail(400, "the body must be a JSON object") }
        guard let operation = object["operation"]?.stringValue, ["create", "add", "remove"].contains(operation) else {
            return fail(400, #"operation must be "create", "add" or "remove""#)
        }
        guard let name = object["notification_key_name"]?.stringValue, !name.isEmpty else {
            return fail(400, "notification_key_name is required")
        }
        guard let items = object["registration_ids"]?.arrayValue, !items.isEmpty else {
            return fail(400, "registration_ids must be a non-empty array of strings")
        }
        var tokens: [String] = []
        for item in items {
            guard let token = item.stringValue, !token.isEmpty else { return fail(400, "registration_ids must be a non-empty array of strings") }
            if !tokens.contains(token) { tokens.append(token) }
        }
        let nameKey = DeviceGroupRegistry.nameKey(projectID, name)

        if operation == "create" {
            guard byName[nameKey] == nil else { return fail(400, "notification_key already exists") }
            guard tokens.count <= DeviceGroupRegistry.maxMembers else {
                return fail(400, "too many registration ids: a device group holds at most \(DeviceGroupRegistry.maxMembers)")
            }
            let id = nextID
            nextID += 1
            let key = makeKey()
            groups[id] = Group(projectID: projectID, name: name, key: key, members: tokens)
            byName[nameKey] = id
            byKey[key] = id
            aliases[id] = [key]
            return .success(key)
        }

        guard let key = object["notification_key"]?.stringValue, !key.isEmpty else {
            return fail(400, "notification_key is required")
        }
        guard let id = byKey[key], var group = groups[id], group.projectID == projectID else {
            return fail(404, "notification_key not found")
        }
        guard group.name == name else { return fail(400, "notification_key_name does not match notification_key") }
        if operation == "add" {
            let added = tokens.filter { !group.members.contains($0) }
            guard group.members.count + added.count <= DeviceGroupRegistry.maxMembers else {
                return fail(400, "too many registration ids: a device group holds at most \(DeviceGroupRegistry.maxMembers)")
            }
            group.members += added
            groups[id] = group
            return .success(key)
        }
        group.members.removeAll { tokens.contains($0) }
        if group.members.isEmpty {
            // Removing every member deletes the group, and every key it had stops working.
            groups[id] = nil
            byName[nameKey] = nil
            for alias in aliases[id] ?? [] { byKey[alias] = nil }
            aliases[id] = nil
        } else {
            groups[id] = group
        }
        return .success(key)
    }

    /// `GET ?notification_key_name=`: a new key for the group (all of its keys stay valid).
    public mutating func lookUp(name: String, projectID: String) -> Result<String, Failure> {
        guard let id = byName[DeviceGroupRegistry.nameKey(projectID, name)] else {
            return .failure(Failure(status: 404, message: "notification_key not found"))
        }
        let alias = makeKey()
        byKey[alias] = id
        aliases[id, default: []].append(alias)
        return .success(alias)
    }
}
