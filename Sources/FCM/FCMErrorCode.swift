/// The error codes of FCM's HTTP v1 API: the `errorCode` of a `google.firebase.fcm.v1.FcmError`
/// detail, plus the two refusals of Google's OAuth layer that come without one. The classifier
/// (`FCMFailure`) decides what to do with a job from them; the emulator answers with them.
public enum FCMErrorCode: String, Sendable, CaseIterable {
    /// No more information is available; the HTTP status decides.
    case unspecifiedError = "UNSPECIFIED_ERROR"
    case invalidArgument = "INVALID_ARGUMENT"
    case unregistered = "UNREGISTERED"
    case senderIDMismatch = "SENDER_ID_MISMATCH"
    case quotaExceeded = "QUOTA_EXCEEDED"
    case unavailable = "UNAVAILABLE"
    case `internal` = "INTERNAL"
    case thirdPartyAuthError = "THIRD_PARTY_AUTH_ERROR"
    /// The name THIRD_PARTY_AUTH_ERROR had when it covered APNs only.
    case apnsAuthError = "APNS_AUTH_ERROR"
    /// Not an FcmError code: our OAuth access token was refused (401 without an FcmError detail).
    case unauthenticated = "UNAUTHENTICATED"
    /// Not an FcmError code: the account may not send for this project (403 without an FcmError detail).
    case permissionDenied = "PERMISSION_DENIED"

    /// The HTTP status FCM answers the code with; nil for UNSPECIFIED_ERROR, which has none.
    public var httpStatus: Int? {
        switch self {
        case .unspecifiedError: return nil
        case .invalidArgument: return 400
        case .unregistered: return 404
        case .senderIDMismatch, .permissionDenied: return 403
        case .quotaExceeded: return 429
        case .unavailable: return 503
        case .internal: return 500
        case .thirdPartyAuthError, .apnsAuthError, .unauthenticated: return 401
        }
    }

    /// The `google.rpc.Code` name in the error body's `status`.
    public var rpcStatus: String {
        switch self {
        case .unspecifiedError: return "UNKNOWN"
        case .invalidArgument: return "INVALID_ARGUMENT"
        case .unregistered: return "NOT_FOUND"
        case .senderIDMismatch, .permissionDenied: return "PERMISSION_DENIED"
        case .quotaExceeded: return "RESOURCE_EXHAUSTED"
        case .unavailable: return "UNAVAILABLE"
        case .internal: return "INTERNAL"
        case .thirdPartyAuthError, .apnsAuthError, .unauthenticated: return "UNAUTHENTICATED"
        }
    }

    /// Whether the error body carries a `google.firebase.fcm.v1.FcmError` detail with the code
    /// (FCM leaves it out of the OAuth-level 401 and 403).
    public var hasFcmErrorDetail: Bool { self != .unauthenticated && self != .permissionDenied }
}
