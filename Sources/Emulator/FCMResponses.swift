import FCM
import HTTPServer
import JSON

extension FCMErrorCode {
    /// The HTTP status the emulator answers with: FCM's, or 500 for UNSPECIFIED_ERROR, which has none.
    var answerStatus: Int { httpStatus ?? 500 }

    /// The body's `message` as FCM words it.
    public var defaultMessage: String {
        switch self {
        case .unspecifiedError: return "Unknown error."
        case .unregistered: return "Requested entity was not found."
        case .invalidArgument: return "The registration token is not a valid FCM registration token"
        case .senderIDMismatch: return "SenderId mismatch"
        case .quotaExceeded: return "Quota exceeded for quota metric 'Send requests' and limit 'Send requests per minute' of service 'fcm.googleapis.com'."
        case .unavailable: return "The service is currently unavailable."
        case .internal: return "Internal error encountered."
        case .thirdPartyAuthError, .apnsAuthError: return "Auth error from APNS or Web Push Service"
        case .unauthenticated:
            return "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential. See https://developers.google.com/identity/sign-in/web/devconsole-project."
        case .permissionDenied: return "Permission 'cloudmessaging.messages.create' denied on resource (or it may not exist)."
        }
    }
}

/// Which limit a QUOTA_EXCEEDED answer says was reached, and how it says it.
public enum QuotaSubjectChoice: String, Sendable, Equatable {
    /// A QuotaFailure violation with subject `project:ID`.
    case project
    /// A QuotaFailure violation with subject `device:TOKEN`.
    case device
    /// A QuotaFailure violation with subject `topic:NAME`.
    case topic
    /// No QuotaFailure detail at all (the answer does not say which limit).
    case none
    /// The legacy-style body `{"error": "DeviceMessageRateExceeded"}`.
    case legacyDevice = "legacy-device"
    /// The legacy-style body `{"error": "TopicsMessageRateExceeded"}`.
    case legacyTopic = "legacy-topic"

    /// The QuotaFailure violation's `description` for this limit.
    var violationDescription: String {
        switch self {
        case .device, .legacyDevice: return "Message rate to one device exceeded (per-device limit)"
        case .topic, .legacyTopic: return "Message rate to one topic exceeded (per-topic limit)"
        case .project, .none: return "Send requests per minute per project"
        }
    }
}

/// One scripted or computed error answer.
public struct ErrorAnswer: Sendable, Equatable {
    public var code: FCMErrorCode
    /// Overrides the code's usual HTTP status when set.
    public var status: Int?
    /// Seconds for a `Retry-After` header.
    public var retryAfter: Int?
    /// Overrides the code's usual message when set.
    public var message: String?
    /// For QUOTA_EXCEEDED: which limit the answer names (nil: the project's).
    public var quotaSubject: QuotaSubjectChoice?
    /// The project ID, token or topic named after the subject's prefix (filled in when answered).
    public var quotaName: String?

    public init(code: FCMErrorCode, status: Int? = nil, retryAfter: Int? = nil, message: String? = nil,
                quotaSubject: QuotaSubjectChoice? = nil, quotaName: String? = nil) {
        self.code = code
        self.status = status
        self.retryAfter = retryAfter
        self.message = message
        self.quotaSubject = quotaSubject
        self.quotaName = quotaName
    }

    public var httpStatus: Int { status ?? code.answerStatus }
}

enum FCMResponses {
    static let jsonType = HTTPHeader(name: "content-type", value: "application/json; charset=UTF-8")

    /// A v1 error body: `{"error":{"code","message","status","details":[...]}}`.
    static func errorBody(_ answer: ErrorAnswer, violation: FieldViolation? = nil) -> [UInt8] {
        let status = answer.httpStatus
        let message = violation?.message ?? answer.message ?? answer.code.defaultMessage
        var details: [JSONValue] = []
        if let violation {
            details.append([
                "@type": "type.googleapis.com/google.rpc.BadRequest",
                "fieldViolations": [["field": .string(violation.field), "description": .string(violation.detail)]],
            ])
        }
        if answer.code == .quotaExceeded {
            let subject = answer.quotaSubject ?? .project
            if subject == .legacyDevice || subject == .legacyTopic {
                let name = subject == .legacyDevice ? "DeviceMessageRateExceeded" : "TopicsMessageRateExceeded"
                var out: [UInt8] = []
                JSONValue.object(JSONObject(["error": .string(name)])).write(into: &out)
                return out
            }
            if subject != .none {
                let prefix = subject == .project ? "project" : subject.rawValue
                let named = answer.quotaName.map { prefix + ":" + $0 } ?? prefix
                details.append([
                    "@type": "type.googleapis.com/google.rpc.QuotaFailure",
                    "violations": [["subject": .string(named), "description": .string(subject.violationDescription)]],
                ])
            }
        }
        if answer.code.hasFcmErrorDetail {
            details.append(["@type": "type.googleapis.com/google.firebase.fcm.v1.FcmError", "errorCode": .string(answer.code.rawValue)])
        }
        var error = JSONObject(["code": JSONValue(status), "message": .string(message), "status": .string(answer.code.rpcStatus)])
        if !details.isEmpty { error["details"] = .array(details) }
        var out: [UInt8] = []
        out.reserveCapacity(256)
        JSONValue.object(JSONObject(["error": .object(error)])).write(into: &out)
        return out
    }

    static func error(_ answer: ErrorAnswer, violation: FieldViolation? = nil) -> HTTPServerResponse {
        var headers = [jsonType]
        if let retryAfter = answer.retryAfter { headers.append(HTTPHeader(name: "retry-after", value: String(retryAfter))) }
        if answer.code == .unauthenticated {
            headers.append(HTTPHeader(name: "www-authenticate", value: #"Bearer realm="https://accounts.google.com/", error="invalid_token""#))
        }
        return HTTPServerResponse(status: answer.httpStatus, headers: headers, body: errorBody(answer, violation: violation))
    }

    static func invalid(_ violation: FieldViolation) -> HTTPServerResponse {
        error(ErrorAnswer(code: .invalidArgument), violation: violation)
    }

    /// `{"name":"projects/p/messages/123"}` without a JSON tree.
    static func sent(name: String) -> HTTPServerResponse {
        var body: [UInt8] = []
        body.reserveCapacity(name.utf8.count + 12)
        body.append(contentsOf: #"{"name":"#.utf8)
        JSONValue.writeString(name, into: &body)
        body.append(UInt8(ascii: "}"))
        return HTTPServerResponse(status: 200, headers: [jsonType], body: body)
    }

    static func json(_ status: Int, _ value: JSONValue, headers: [HTTPHeader] = []) -> HTTPServerResponse {
        var body: [UInt8] = []
        value.write(into: &body)
        return HTTPServerResponse(status: status, headers: [jsonType] + headers, body: body)
    }

    /// The OAuth2 token endpoint's error: `{"error":"invalid_grant","error_description":"..."}`.
    static func oauthError(_ error: String, _ description: String, status: Int = 400) -> HTTPServerResponse {
        json(status, ["error": .string(error), "error_description": .string(description)])
    }

    /// Device-group management's legacy error: `{"error":"..."}`.
    static func legacyError(_ status: Int, _ message: String) -> HTTPServerResponse {
        json(status, ["error": .string(message)])
    }
}
