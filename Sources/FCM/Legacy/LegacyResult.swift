/// FCM's v1 answers in the words of the legacy response (docs/legacy.md 4.10), for callers
/// that read legacy results. herald._legacy_error in SQL maps recorded reasons the same way.
public enum LegacyResult {
    /// The legacy error string for an answer that was not a delivery, or nil for a delivery.
    /// `topic`: the target was a topic or a condition (rate errors differ).
    public static func error(for classification: SendClassification, topic: Bool) -> String? {
        switch classification {
        case .delivered: return nil
        case .pruneToken: return "NotRegistered"
        case .deadLetter(let code, _), .retry(let code, _, _, _): return error(forCode: code, topic: topic)
        // A refused access token is Table 9 row 5 (docs/legacy.md 3), a whole-request 401 with no string of its own.
        case .reauthenticate: return "InternalServerError"
        }
    }

    /// The legacy string for a v1 error code (FcmError.errorCode or the google.rpc status).
    public static func error(forCode code: String, topic: Bool) -> String {
        switch code {
        case "UNREGISTERED": return "NotRegistered"
        case "SENDER_ID_MISMATCH", "PERMISSION_DENIED": return "MismatchSenderId"
        case "UNAVAILABLE": return "Unavailable"
        case "THIRD_PARTY_AUTH_ERROR", "APNS_AUTH_ERROR": return "InvalidApnsCredential"
        case "QUOTA_EXCEEDED": return topic ? "TopicsMessageRateExceeded" : "DeviceMessageRateExceeded"
        // The message passed the v1 rules before it was sent, so the token is the likely cause.
        case "INVALID_ARGUMENT": return "InvalidRegistration"
        default: return "InternalServerError"
        }
    }

    /// `message_id` of a legacy result: the last segment of the v1 name `projects/p/messages/ID`.
    public static func messageID(fromName name: String) -> String {
        name.split(separator: "/").last.map(String.init) ?? name
    }
}
