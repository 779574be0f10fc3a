import JSON

/// The limits herald.jobs holds every new job to (trigger jobs_size_limits,
/// `herald._check_job_size`), checked again by the worker before anything is sent: a row inserted
/// before the trigger existed (or with it disabled) is dead-lettered with the limit as its reason
/// and never costs a request. The numbers here and in the SQL function are the same.
public enum DoorLimits {
    /// A send's message as JSON text: FCM takes 4,096 bytes of notification and data payload, and
    /// a whole v1 message with android, apns and webpush blocks can be several times that.
    public static let messageBytes = 32_768
    /// A device-group operation's message: a group's 20 members at `targetBytes` each, and room.
    public static let groupMessageBytes = 131_072
    /// One target: a token, topic, condition, a legacy `to` or `registration_ids` entry, a
    /// group's name. FCM's tokens are about 160 bytes; `herald bench --token-bytes` at most 1,000.
    public static let targetBytes = 4_096

    static let targetFields = ["token", "topic", "condition", "to", "notification_key_name"]

    /// Why a job over the size limit may not be sent (`messageBytes` counts its stored JSON text),
    /// nil when it is within it.
    public static func sizeProblem(messageBytes count: Int, group: Bool) -> String? {
        let limit = group ? groupMessageBytes : messageBytes
        guard count > limit else { return nil }
        return "message: \(count) bytes, over Herald's limit of \(limit) bytes for a \(group ? "device-group" : "send") job; not sent (send large content by reference, a URL or an id the app fetches)"
    }

    /// Why a target of `message` is over `targetBytes`, nil when none is.
    public static func targetProblem(_ message: JSONValue) -> String? {
        guard let object = message.objectValue else { return nil }
        for field in targetFields {
            if let value = object[field]?.stringValue, value.utf8.count > targetBytes {
                return "message.\(field): \(value.utf8.count) bytes, over Herald's limit of \(targetBytes) bytes for a target; not sent"
            }
        }
        for value in object["registration_ids"]?.arrayValue ?? [] {
            if let token = value.stringValue, token.utf8.count > targetBytes {
                return "message.registration_ids: a token of \(token.utf8.count) bytes, over Herald's limit of \(targetBytes) bytes for a target; not sent"
            }
        }
        return nil
    }
}
