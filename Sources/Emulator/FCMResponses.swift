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

/// How the emulator words the 429s of its limits (`Scenario.quotaAnswer`, `--quota-answer`).
public enum QuotaAnswerShape: String, Sendable, Equatable, CaseIterable {
    /// As FCM answers (docs/fcm-limits.md): the project's quota with the body production was seen
    /// to send (`ErrorInfo` `RATE_LIMIT_EXCEEDED` stating the limit, a `Help` link, no `FcmError`,
    /// no `QuotaFailure`, no Retry-After); a device's or a topic's limit with `FcmError`
    /// `QUOTA_EXCEEDED` and a `QuotaFailure` naming the target, without Retry-After.
    case production
    /// The emulator's older answers: `FcmError` `QUOTA_EXCEEDED`, a `QuotaFailure` naming
    /// `project:ID`, `device:TOKEN` or `topic:NAME`, and a Retry-After on every one.
    case legacy
}

/// Which limit a QUOTA_EXCEEDED answer says was reached, and how it says it.
public enum QuotaSubjectChoice: String, Sendable, Equatable {
    /// The project's quota in the shape FCM was seen to answer it in production: status
    /// RESOURCE_EXHAUSTED, an `ErrorInfo` with reason `RATE_LIMIT_EXCEEDED` and the limit in its
    /// metadata, a `Help` link; no `FcmError`, no `QuotaFailure`.
    case rateLimit = "rate-limit"
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
        case .project, .none, .rateLimit: return "Send requests per minute per project"
        }
    }

    /// The limit this answer is about, as `/emulator/stats` and `quotaRefusals()` count it:
    /// both shapes of the project's quota are `project`.
    var limitName: String { self == .rateLimit ? QuotaSubjectChoice.project.rawValue : rawValue }
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
    /// For the `rate-limit` shape: the `quota_limit_value` the answer states (messages a minute,
    /// as a decimal string; any text, so a test can send a malformed one). Nil: the project's
    /// configured quota, else FCM's default of 600,000.
    public var quotaLimitValue: String?

    public init(code: FCMErrorCode, status: Int? = nil, retryAfter: Int? = nil, message: String? = nil,
                quotaSubject: QuotaSubjectChoice? = nil, quotaName: String? = nil, quotaLimitValue: String? = nil) {
        self.code = code
        self.status = status
        self.retryAfter = retryAfter
        self.message = message
        self.quotaSubject = quotaSubject
        self.quotaName = quotaName
        self.quotaLimitValue = quotaLimitValue
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
            if subject == .rateLimit {
                return rateLimitBody(project: answer.quotaName ?? "", limitValue: answer.quotaLimitValue ?? String(defaultQuotaPerMinute),
                                     message: answer.message)
            }
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

    /// FCM's default project quota, messages a minute.
    static let defaultQuotaPerMinute = 600_000

    /// The body FCM was seen to answer in production when a project's quota was spent (reported
    /// in the firebase-admin-go tracker, issue 719, 2025; docs/fcm-limits.md): it names the
    /// consumer by project number and states the limit per minute; no `FcmError`, no `QuotaFailure`.
    static func rateLimitBody(project: String, limitValue: String, message: String? = nil) -> [UInt8] {
        let number = projectNumber(project)
        let text = message ?? "Quota exceeded for quota metric 'Send requests' and limit 'Send requests per minute' of service 'fcm.googleapis.com' for consumer 'project_number:\(number)'."
        let error = JSONObject([
            "code": 429,
            "message": .string(text),
            "status": "RESOURCE_EXHAUSTED",
            "details": [
                [
                    "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                    "reason": "RATE_LIMIT_EXCEEDED",
                    "domain": "googleapis.com",
                    "metadata": [
                        "quota_limit": "SendsPerMinutePerProject",
                        "quota_metric": "fcm.googleapis.com/send_requests",
                        "quota_unit": "1/min/{project}",
                        "quota_limit_value": .string(limitValue),
                        "consumer": .string("projects/\(number)"),
                        "service": "fcm.googleapis.com",
                        "quota_location": "global",
                    ],
                ],
                [
                    "@type": "type.googleapis.com/google.rpc.Help",
                    "links": [["description": "Request a higher quota limit.", "url": "https://cloud.google.com/docs/quotas/help/request_increase"]],
                ],
            ],
        ])
        var out: [UInt8] = []
        out.reserveCapacity(900)
        JSONValue.object(JSONObject(["error": .object(error)])).write(into: &out)
        return out
    }

    /// A Google project number for a project ID: the ID itself when it is all digits, else a
    /// 12-digit number derived from it (FNV-1a), the same on every run.
    static func projectNumber(_ project: String) -> String {
        if !project.isEmpty, project.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) { return project }
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in project.utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x100_0000_01b3
        }
        return String(100_000_000_000 + hash % 900_000_000_000)
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
