/// Why a piece of Web Push input was refused: the field it came from (`keys.p256dh`,
/// `endpoint`, `subject`, ...) and what is wrong with it, in words that say what to do. Never
/// carries key material: a key or secret is described by its length and form, not quoted.
public struct WebPushError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The field or setting, as the user wrote it (`keys.auth`, `webpush.payload`, `--subject`).
    public var field: String
    public var message: String

    public init(field: String, _ message: String) {
        self.field = field
        self.message = message
    }

    public var description: String { "\(field): \(message)" }
}
