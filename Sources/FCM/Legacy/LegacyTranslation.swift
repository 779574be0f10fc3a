import JSON

/// A legacy payload (FCM's retired `/fcm/send` protocol) refused, with the error the legacy server
/// would have answered (docs/legacy.md 3, Table 9) and the legacy field at fault.
public struct LegacyRejection: Error, Sendable, Equatable, CustomStringConvertible {
    /// The Table 9 wire string (docs/legacy.md 3): `MissingRegistration`, `InvalidParameters`, `InvalidTtl`,
    /// `InvalidDataKey`, `MessageTooBig`, or `InvalidJson` (Table 9 row 7, a 400 without a string; docs/legacy.md 3).
    public var code: String
    /// `legacy.<field>`, e.g. `legacy.registration_ids[3]` or `legacy.notification.badge`.
    public var path: String
    /// What is wrong, in words.
    public var reason: String

    public init(code: String, path: String, reason: String) {
        self.code = code
        self.path = path
        self.reason = reason
    }

    /// The HTTP status the legacy server answered with this error (400 for a malformed request,
    /// 200 with the error string in the body for the rest).
    public var httpStatus: Int { code == "InvalidJson" || code == "InvalidParameters" ? 400 : 200 }

    /// `code at path: reason`: the dead-letter reason, the CLI error and the text of the SQL error
    /// of herald.from_legacy, word for word.
    public var description: String { "\(code) at \(path): \(reason)" }
}

/// A legacy payload translated to HTTP v1: one message per target, in target order.
public struct LegacyTranslation: Sendable, Equatable {
    /// Legacy `dry_run`: every request carries `"validate_only": true`.
    public var validateOnly: Bool
    /// v1 `Message` objects, each the `"message"` of one `messages:send` request.
    public var messages: [JSONValue]
    /// Every lossy or non-obvious step, so nothing changes silently.
    public var notes: [String]

    public init(validateOnly: Bool, messages: [JSONValue], notes: [String]) {
        self.validateOnly = validateOnly
        self.messages = messages
        self.notes = notes
    }

    /// `{"validate_only", "messages", "notes"}`, the shape herald.from_legacy returns.
    public var json: JSONValue {
        ["validate_only": .bool(validateOnly), "messages": .array(messages), "notes": .array(notes.map { .string($0) })]
    }
}
