/// A change to a device group: the three operations of FCM's `/fcm/notification`.
public enum DeviceGroupOperation: String, Sendable, CaseIterable {
    case create
    case add
    case remove
}

/// FCM's limit on members of one device group.
public let deviceGroupMemberLimit = 20

/// Why a device-group change is refused before FCM is called.
public struct DeviceGroupRefusal: Error, Sendable, Equatable, CustomStringConvertible {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

/// One device-group change, checked against FCM's rules before any request: the one planning
/// step `herald groups` and the worker's group operations share.
public struct DeviceGroupPlan: Sendable, Equatable {
    public var operation: DeviceGroupOperation
    public var name: String
    /// The group's notification_key: given, or known from herald.device_groups (nil: unknown;
    /// `create` needs none).
    public var key: String?
    /// The registration tokens to create the group with, add or remove (distinct, in order).
    public var tokens: [String]

    public init(operation: DeviceGroupOperation, name: String, key: String?, tokens: [String]) {
        self.operation = operation; self.name = name; self.key = key; self.tokens = tokens
    }

    /// Checks a change: a name, at least one token, at most `deviceGroupMemberLimit` members
    /// after it. `members` are the group's members as far as they are known.
    public static func make(operation: DeviceGroupOperation, name: String, tokens: [String], key: String?,
                            members: [String]) throws(DeviceGroupRefusal) -> DeviceGroupPlan {
        guard !name.isEmpty else { throw DeviceGroupRefusal("notification_key_name: a device group needs a name") }
        var seen = Set<String>()
        let distinct = tokens.filter { seen.insert($0).inserted }
        guard !distinct.isEmpty else { throw DeviceGroupRefusal("registration_ids: needs at least one registration token") }
        switch operation {
        case .create:
            if distinct.count > deviceGroupMemberLimit {
                throw DeviceGroupRefusal("device group \(name): \(distinct.count) members is over FCM's limit of \(deviceGroupMemberLimit) per group; create it with \(deviceGroupMemberLimit) and use more groups")
            }
        case .add:
            let total = Set(members + distinct).count
            if total > deviceGroupMemberLimit {
                throw DeviceGroupRefusal("device group \(name): adding would make \(total) members, over FCM's limit of \(deviceGroupMemberLimit) per group")
            }
        case .remove:
            break
        }
        return DeviceGroupPlan(operation: operation, name: name, key: key, tokens: distinct)
    }

    /// The members after FCM confirmed this change, from the members before it.
    public func members(after before: [String]) -> [String] {
        switch operation {
        case .create: return tokens.sorted()
        case .add: return Array(Set(before + tokens)).sorted()
        case .remove: return before.filter { !tokens.contains($0) }.sorted()
        }
    }
}
