import struct Foundation.Date
import JSON

/// A failed FCM answer, decoded: the v1 error object (`error.status`, the `FcmError` detail's
/// `errorCode`, `BadRequest` field violations, `QuotaFailure`, `RetryInfo`) or a legacy-style
/// `{"error": "NotRegistered"}`.
public struct FCMFailure: Error, Sendable, Equatable, CustomStringConvertible {
    public struct FieldViolation: Sendable, Equatable {
        public var field: String
        public var description: String
    }

    public var httpStatus: Int
    /// `error.status` (google.rpc code name), e.g. `NOT_FOUND`.
    public var status: String?
    /// The `errorCode` of the `type.googleapis.com/google.firebase.fcm.v1.FcmError` detail, e.g. `UNREGISTERED`.
    public var errorCode: String?
    /// A legacy error name, e.g. `NotRegistered`.
    public var legacyError: String?
    /// FCM's message, shortened, with anything that looks like a credential removed.
    public var message: String
    public var fieldViolations: [FieldViolation]
    /// Seconds to wait, from the `Retry-After` header or a `RetryInfo` detail.
    public var retryAfter: Double?
    /// The `google.rpc.QuotaFailure` violations (`subject`, `description`) of a quota answer.
    public var quotaViolations: [(subject: String, description: String)] = []
    /// The `google.rpc.ErrorInfo` detail (`reason`, string `metadata`), which is how FCM was seen
    /// to answer the project's quota in production: reason `RATE_LIMIT_EXCEEDED`, metadata
    /// `quota_limit` `SendsPerMinutePerProject`, `quota_unit` `1/min/{project}`,
    /// `quota_limit_value` the project's limit. Nil when the answer has none.
    public var errorInfo: ErrorInfo?

    public struct ErrorInfo: Sendable, Equatable {
        public var reason: String
        public var metadata: [String: String]
        public init(reason: String, metadata: [String: String]) {
            self.reason = reason
            self.metadata = metadata
        }
    }

    static let messageLimit = 500
    static let fcmErrorType = "type.googleapis.com/google.firebase.fcm.v1.FcmError"
    static let badRequestType = "type.googleapis.com/google.rpc.BadRequest"
    static let quotaFailureType = "type.googleapis.com/google.rpc.QuotaFailure"
    static let retryInfoType = "type.googleapis.com/google.rpc.RetryInfo"
    static let errorInfoType = "type.googleapis.com/google.rpc.ErrorInfo"

    /// Nil when the answer is a success (2xx without an error in the body). See
    /// `SendClassification.init(httpStatus:headers:body:now:redacting:)` for `redacting`.
    public init?(httpStatus: Int, headers: [(name: String, value: String)], body: [UInt8], now: Date,
                 redacting secrets: [String] = []) {
        self.init(httpStatus: httpStatus, headers: headers, body: body, json: try? JSONValue.parse(body), now: now, redacting: secrets)
    }

    /// `body` already parsed as `json` (nil when it is not JSON).
    init?(httpStatus: Int, headers: [(name: String, value: String)], body: [UInt8], json: JSONValue?, now: Date,
          redacting secrets: [String]) {
        self.httpStatus = httpStatus
        fieldViolations = []
        message = ""
        retryAfter = nil
        for header in headers where header.name.utf8.count == 11 && header.name.lowercased() == "retry-after" {
            retryAfter = RetryAfter.parse(header.value, now: now)
        }
        if case .object(let error)? = json?["error"] {
            status = error["status"]?.stringValue
            message = error["message"]?.stringValue ?? ""
            var quotaNotes: [String] = []
            for detail in error["details"]?.arrayValue ?? [] {
                switch detail["@type"]?.stringValue {
                case Self.fcmErrorType?:
                    errorCode = detail["errorCode"]?.stringValue
                case Self.badRequestType?:
                    for violation in detail["fieldViolations"]?.arrayValue ?? [] {
                        fieldViolations.append(FieldViolation(field: violation["field"]?.stringValue ?? "",
                                                              description: violation["description"]?.stringValue ?? ""))
                    }
                case Self.quotaFailureType?:
                    for violation in detail["violations"]?.arrayValue ?? [] {
                        quotaViolations.append((violation["subject"]?.stringValue ?? "", violation["description"]?.stringValue ?? ""))
                        let parts = [violation["subject"]?.stringValue, violation["description"]?.stringValue].compactMap { $0 }
                        if !parts.isEmpty { quotaNotes.append(parts.joined(separator: ": ")) }
                    }
                case Self.errorInfoType?:
                    // Only string members are kept: metadata is a map of strings in google.rpc.
                    var metadata: [String: String] = [:]
                    if case .object(let members)? = detail["metadata"] {
                        for member in members { if let text = member.value.stringValue { metadata[member.key] = text } }
                    }
                    if errorInfo == nil { errorInfo = ErrorInfo(reason: detail["reason"]?.stringValue ?? "", metadata: metadata) }
                case Self.retryInfoType?:
                    if retryAfter == nil, let delay = detail["retryDelay"]?.stringValue, delay.hasSuffix("s"),
                       Checks.duration(delay, max: .max) == nil {
                        retryAfter = Double(delay.dropLast())
                    }
                default:
                    break
                }
            }
            for violation in fieldViolations where !message.contains(violation.field) {
                message += " [\(violation.field): \(violation.description)]"
            }
            if !quotaNotes.isEmpty { message += " [quota: \(quotaNotes.joined(separator: "; "))]" }
            if message.isEmpty { message = "HTTP \(httpStatus)" }
        } else if let legacy = Self.legacyName(json: json, body: body) {
            legacyError = legacy
            message = legacy + ": " + (Self.legacyMeanings[legacy]?.meaning ?? "unknown legacy error")
        } else if (200..<300).contains(httpStatus) {
            return nil
        } else {
            message = "HTTP \(httpStatus)"
            let text = String(decoding: body.prefix(2048), as: UTF8.self)
            let snippet = text.split(whereSeparator: { $0.isWhitespace }).joined(separator: " ")
            if !snippet.isEmpty { message += ": " + snippet }
        }
        message = Redact.secrets(in: message, limit: Self.messageLimit, also: secrets)
    }

    /// `CODE: message`, as the dead-letter reason reads.
    public var description: String { classification.reason ?? "delivered" }

    /// The action for this failure (docs/fcm.md, Errors; docs/fcm.md, QUOTA_EXCEEDED).
    public var classification: SendClassification {
        // 1. The FCM-specific code is the most precise answer.
        if let code = errorCode.flatMap(FCMErrorCode.init(rawValue:)), let action = Self.action(for: code, failure: self) {
            return action
        }
        // 2. A legacy-style answer (device-group management, legacy results).
        if let legacy = legacyError {
            if legacy == "DeviceMessageRateExceeded" {
                // One device's rate: back off this job, but the sender as a whole is fine.
                return .retry(code: FCMErrorCode.quotaExceeded.rawValue, message: message, retryAfter: retryAfter, quota: .device)
            }
            if legacy == "TopicsMessageRateExceeded" {
                // One topic's rate: hold that topic back; other targets go on.
                return .retry(code: FCMErrorCode.quotaExceeded.rawValue, message: message, retryAfter: retryAfter, quota: .topic)
            }
            if let (code, _) = Self.legacyMeanings[legacy], let action = Self.action(for: code, failure: self) {
                return action
            }
            // An unknown name on a 200 will not go away by retrying; otherwise the status decides.
            if (200..<300).contains(httpStatus) { return .deadLetter(code: legacy, message: message) }
            return Self.action(forHTTPStatus: httpStatus, failure: self)
        }
        // 3. The google.rpc status.
        if let status, let action = Self.action(forStatus: status, failure: self) { return action }
        // 4. The HTTP status alone.
        return Self.action(forHTTPStatus: httpStatus, failure: self)
    }

    static func action(for code: FCMErrorCode, failure: FCMFailure) -> SendClassification? {
        let name = code.rawValue
        switch code {
        case .unregistered:
            return .pruneToken(code: name, message: failure.message)
        case .invalidArgument, .senderIDMismatch, .thirdPartyAuthError, .apnsAuthError:
            return .deadLetter(code: name, message: failure.message)
        case .quotaExceeded:
            return .retry(code: name, message: failure.message, retryAfter: failure.retryAfter, quota: failure.quotaLimit)
        case .unavailable, .internal:
            return .retry(code: name, message: failure.message, retryAfter: failure.retryAfter, quota: nil)
        case .unspecifiedError, .unauthenticated, .permissionDenied:
            // No FcmError says these (or says nothing): the status decides. So do codes newer
            // than this build, which never parse into this enum.
            return nil
        }
    }

    static func action(forStatus status: String, failure: FCMFailure) -> SendClassification? {
        switch status {
        case "UNAUTHENTICATED":
            return .reauthenticate(message: failure.message)
        case "PERMISSION_DENIED", "INVALID_ARGUMENT", "FAILED_PRECONDITION", "OUT_OF_RANGE", "NOT_FOUND",
             "ALREADY_EXISTS", "UNIMPLEMENTED":
            // NOT_FOUND without UNREGISTERED is a wrong project or URL, not a dead token: pruning
            // on it would delete every token of a misconfigured deployment.
            return .deadLetter(code: status, message: failure.message)
        case "RESOURCE_EXHAUSTED":
            return .retry(code: FCMErrorCode.quotaExceeded.rawValue, message: failure.message, retryAfter: failure.retryAfter, quota: failure.quotaLimit)
        case "UNAVAILABLE", "INTERNAL", "DEADLINE_EXCEEDED", "ABORTED", "UNKNOWN", "CANCELLED", "DATA_LOSS":
            return .retry(code: status, message: failure.message, retryAfter: failure.retryAfter, quota: nil)
        default:
            return nil
        }
    }

    static func action(forHTTPStatus status: Int, failure: FCMFailure) -> SendClassification {
        switch status {
        case 401:
            return .reauthenticate(message: failure.message)
        case 400:
            return .deadLetter(code: "INVALID_ARGUMENT", message: failure.message)
        case 403:
            return .deadLetter(code: "PERMISSION_DENIED", message: failure.message)
        case 404:
            return .deadLetter(code: "NOT_FOUND", message: failure.message)
        case 408:
            return .retry(code: "DEADLINE_EXCEEDED", message: failure.message, retryAfter: failure.retryAfter, quota: nil)
        case 429:
            return .retry(code: FCMErrorCode.quotaExceeded.rawValue, message: failure.message, retryAfter: failure.retryAfter, quota: failure.quotaLimit)
        case 400..<500:
            return .deadLetter(code: "HTTP_\(status)", message: failure.message)
        case 500:
            return .retry(code: "INTERNAL", message: failure.message, retryAfter: failure.retryAfter, quota: nil)
        case 503:
            return .retry(code: "UNAVAILABLE", message: failure.message, retryAfter: failure.retryAfter, quota: nil)
        default:
            // 5xx, and answers FCM never gives (1xx, 3xx, 2xx with an unknown error): retry with
            // backoff rather than lose the message.
            return .retry(code: "HTTP_\(status)", message: failure.message, retryAfter: failure.retryAfter, quota: nil)
        }
    }

    /// Which limit a quota answer's QuotaFailure violations name. Several violations: the widest
    /// wins (the project's over a topic's over a device's), since it is the one that binds.
    /// None, or only subjects not recognised: `unattributed`.
    public var quotaLimit: QuotaLimit {
        var found: QuotaLimit? = Self.quotaLimit(errorInfo: errorInfo)
        for violation in quotaViolations {
            guard let limit = Self.quotaLimit(subject: violation.subject, description: violation.description) else { continue }
            switch (found, limit) {
            case (nil, _), (.device?, .topic), (_, .project): found = limit
            default: break
            }
        }
        return found ?? .unattributed
    }

    /// The limit an ErrorInfo detail names: a rate-limit reason (`RATE_LIMIT_EXCEEDED`, or any
    /// reason FCM may give a quota, `RESOURCE_EXHAUSTED`, `...QUOTA_EXCEEDED`) whose `quota_limit`
    /// or `quota_unit` names the project (`SendsPerMinutePerProject`, `1/min/{project}`) is the
    /// project's; a device's or a topic's when they name one of those. Nil otherwise.
    static func quotaLimit(errorInfo: ErrorInfo?) -> QuotaLimit? {
        guard let errorInfo else { return nil }
        let reason = errorInfo.reason.uppercased()
        guard reason.contains("RATE_LIMIT") || reason.contains("QUOTA") || reason.contains("RESOURCE_EXHAUSTED") else { return nil }
        let named = [errorInfo.metadata["quota_limit"], errorInfo.metadata["quota_unit"]].compactMap { $0?.lowercased() }
        if named.contains(where: { $0.contains("device") || $0.contains("token") }) { return .device }
        if named.contains(where: { $0.contains("topic") }) { return .topic }
        if named.contains(where: { $0.contains("project") }) { return .project }
        return nil
    }

    /// The project's limit as the answer states it (ErrorInfo `quota_limit_value` per
    /// `quota_unit`), read by `ProjectQuotaStatement`; nil when the answer states none.
    public var statedQuota: ProjectQuotaStatement? {
        guard let errorInfo, Self.quotaLimit(errorInfo: errorInfo) == .project,
              errorInfo.metadata["quota_limit_value"] != nil || errorInfo.metadata["quota_unit"] != nil else { return nil }
        return ProjectQuotaStatement(value: errorInfo.metadata["quota_limit_value"], unit: errorInfo.metadata["quota_unit"])
    }

    /// The limit one QuotaFailure violation names: by its subject's prefix (`device:`, `token:`,
    /// `registration_token:`, `fid:`; `topic:`, `/topics/`; `project:`, `projects/`,
    /// `project_number:`), else by a word of its description; nil when neither says.
    static func quotaLimit(subject: String, description: String) -> QuotaLimit? {
        let s = subject.lowercased()
        for (prefixes, limit) in [(["device", "token", "registration", "fid", "installation"], QuotaLimit.device),
                                  (["topic", "/topics/"], .topic), (["project"], .project)] {
            if prefixes.contains(where: { s.hasPrefix($0) }) { return limit }
        }
        let d = description.lowercased()
        if d.contains("device") || d.contains("registration token") { return .device }
        if d.contains("topic") { return .topic }
        if d.contains("project") { return .project }
        return nil
    }

    /// Legacy error names (docs/fcm.md, Legacy error names; docs/legacy.md 3), their v1 counterparts and what they mean.
    static let legacyMeanings: [String: (code: FCMErrorCode, meaning: String)] = [
        "MissingRegistration": (.invalidArgument, "the request has no registration token"),
        "InvalidRegistration": (.invalidArgument, "the registration token is malformed"),
        "NotRegistered": (.unregistered, "the registration token is no longer registered"),
        "InvalidPackageName": (.invalidArgument, "the token's package name does not match restricted_package_name"),
        "MismatchSenderId": (.senderIDMismatch, "the token belongs to another sender"),
        "InvalidParameters": (.invalidArgument, "a parameter has a wrong name or type"),
        "MessageTooBig": (.invalidArgument, "the payload is over 4096 bytes (2048 for topics)"),
        "InvalidDataKey": (.invalidArgument, "a data key is reserved (from, gcm..., google...)"),
        "InvalidTtl": (.invalidArgument, "the time to live is not a whole number of seconds from 0 to 2419200"),
        "Unavailable": (.unavailable, "FCM could not process the request in time"),
        "InternalServerError": (.internal, "FCM had an internal error"),
        "DeviceMessageRateExceeded": (.quotaExceeded, "too many messages to this device"),
        "TopicsMessageRateExceeded": (.quotaExceeded, "too many messages to this topic"),
        "InvalidApnsCredential": (.thirdPartyAuthError, "the APNs key or certificate is missing or expired"),
    ]

    /// The legacy error of `{"error": "Name"}`, `{"results": [{"error": "Name"}]}` or the plain
    /// text `Error=Name`.
    static func legacyName(json: JSONValue?, body: [UInt8]) -> String? {
        if let json {
            if case .string(let name)? = json["error"] { return name }
            if let results = json["results"]?.arrayValue {
                for result in results { if case .string(let name)? = result["error"] { return name } }
            }
            return nil
        }
        let prefix = Array("Error=".utf8)
        guard body.starts(with: prefix) else { return nil }
        let name = body.dropFirst(prefix.count).prefix { $0 > 0x20 }
        return name.isEmpty ? nil : String(decoding: name, as: UTF8.self)
    }

    static func successName(_ json: JSONValue?) -> String {
        guard let json else { return "" }
        return json["name"]?.stringValue ?? json["notification_key"]?.stringValue
            ?? json["message_id"].map { $0.stringValue ?? $0.serialized } ?? ""
    }

    public static func == (lhs: FCMFailure, rhs: FCMFailure) -> Bool {
        lhs.httpStatus == rhs.httpStatus && lhs.status == rhs.status && lhs.errorCode == rhs.errorCode
            && lhs.legacyError == rhs.legacyError && lhs.message == rhs.message
            && lhs.fieldViolations == rhs.fieldViolations && lhs.retryAfter == rhs.retryAfter
            && lhs.quotaViolations.elementsEqual(rhs.quotaViolations, by: { $0 == $1 }) && lhs.errorInfo == rhs.errorInfo
    }
}
