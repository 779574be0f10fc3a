import FCM

/// A value of `apns-push-type` Herald sends, with what Apple ties to it: the suffix the
/// `apns-topic` must carry (Apple's "Sending notification requests to APNs"), the priority Herald
/// uses when the message sets none, the priorities Apple accepts, and the payload limit.
///
/// Every one of them comes from the APNs rule file (Sources/FCM/Rules/apns-rules.json,
/// `push_types`), the same list herald.validate_apns_message admits at enqueue, so a job that
/// passed validation is one this type can send. The rule file's `push_types_not_sent` says why
/// the rest of Apple's push types are not sent yet.
public struct APNsPushType: Sendable, Hashable, CustomStringConvertible {
    /// The header's value, e.g. `liveactivity`.
    public let rawValue: String
    /// What follows the app's bundle ID in `apns-topic`.
    public let topicSuffix: String
    /// The priority sent when the message sets none.
    public let defaultPriority: Int
    /// Priorities Apple takes for this push type.
    public let priorities: [Int]
    /// Largest payload in bytes.
    public let payloadLimit: Int

    /// The push type named `rawValue`, when Herald sends it.
    public init?(rawValue: String) {
        guard let found = Self.allCases.first(where: { $0.rawValue == rawValue }) else { return nil }
        self = found
    }

    init(_ rule: APNsMessageRules.PushType, priorities all: [String]) {
        rawValue = rule.name
        topicSuffix = rule.topicSuffix
        // The rule file's priorities are whole numbers (APNsWireTests checks them).
        defaultPriority = Int(rule.defaultPriority) ?? 10
        priorities = (rule.priorities ?? all).compactMap { Int($0) }
        payloadLimit = rule.maxPayloadBytes
    }

    /// Every push type Herald sends, in the rule file's order.
    public static let allCases: [APNsPushType] = APNsMessageRules.standard.pushTypes.map {
        APNsPushType($0, priorities: APNsMessageRules.standard.priorities)
    }

    /// The rule file's push type `name`, for the ones Herald's own code names.
    private static func named(_ name: String) -> APNsPushType {
        guard let found = APNsPushType(rawValue: name) else {
            fatalError("the APNs rule file does not list push type \(name)")
        }
        return found
    }

    /// The push type of a message that names none (the rule file's `default_push_type`).
    public static let standardDefault = named(APNsMessageRules.standard.defaultPushType)

    public static let alert = named("alert")
    public static let background = named("background")
    public static let location = named("location")
    public static let voip = named("voip")
    public static let complication = named("complication")
    public static let liveactivity = named("liveactivity")

    public var description: String { rawValue }

    /// `apns-topic` for an app whose bundle ID is `bundleID`.
    public func topic(bundleID: String) -> String { bundleID + topicSuffix }

    /// Whether Apple takes `priority` for this push type (a background push at 10 is refused).
    public func allows(priority: Int) -> Bool { priorities.contains(priority) }

    public static func == (a: APNsPushType, b: APNsPushType) -> Bool { a.rawValue == b.rawValue }
    public func hash(into hasher: inout Hasher) { hasher.combine(rawValue) }
}
