import struct Foundation.Date
import JSON

/// The project's limit as a quota answer states it: FCM's ErrorInfo carries `quota_limit_value`
/// (a count, as a string: `"600000"`) per `quota_unit` (`"1/min/{project}"`). A sender that reads
/// it knows the rate to pace at without finding it by trial.
///
/// The answer is FCM's, so it is read defensively: a value that is not a whole positive number,
/// a unit whose period is not seconds, minutes, hours or days, or a rate outside what a project
/// can be granted (more than `absurd` messages a second, or less than one a day) is `unusable`,
/// with why; the sender then ignores the figure and goes on judging the answer as before.
public enum ProjectQuotaStatement: Sendable, Equatable {
    /// The limit in messages a second, and the window it is counted over (seconds).
    case perSecond(Double, window: Double)
    /// The figure cannot be used; `why` names the field and what was wrong.
    case unusable(why: String)

    /// More than this many messages a second is no quota FCM grants (the default is 10,000).
    public static let absurd = 1_000_000.0

    public init(value: String?, unit: String?) {
        guard let value else {
            self = .unusable(why: "quota_limit_value: missing")
            return
        }
        let digits = value.trimmingCharacters(in: " ")
        guard !digits.isEmpty, digits.utf8.count <= 15, digits.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
              let count = Double(digits) else {
            self = .unusable(why: "quota_limit_value: \"\(value.prefix(40))\" is not a whole number")
            return
        }
        guard count > 0 else {
            self = .unusable(why: "quota_limit_value: 0 allows nothing")
            return
        }
        guard let window = Self.window(of: unit) else {
            self = .unusable(why: "quota_unit: \"\((unit ?? "").prefix(40))\" is not a count per second, minute, hour or day")
            return
        }
        let rate = count / window
        guard rate <= Self.absurd else {
            self = .unusable(why: "quota_limit_value: \(digits) per \(Int(window)) s is more than any project is granted")
            return
        }
        guard rate * 86_400 >= 1 else {
            self = .unusable(why: "quota_limit_value: \(digits) per \(Int(window)) s is less than one message a day")
            return
        }
        self = .perSecond(rate, window: window)
    }

    /// The seconds of a unit `1/min/{project}` (also `1/minute/...`, `1/s`, `1/h`, `1/d`; a
    /// leading count other than 1, `10/s`, is not a unit FCM uses and is refused).
    static func window(of unit: String?) -> Double? {
        guard let unit else { return nil }
        let parts = unit.lowercased().split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count >= 2, parts[0] == "1" else { return nil }
        switch parts[1] {
        case "s", "sec", "second": return 1
        case "min", "minute", "m": return 60
        case "h", "hour": return 3600
        case "d", "day": return 86_400
        default: return nil
        }
    }

    /// The stated rate, messages a second; nil when unusable.
    public var rate: Double? {
        if case .perSecond(let rate, _) = self { return rate }
        return nil
    }
}

private extension String {
    func trimmingCharacters(in character: Character) -> String {
        var text = Substring(self)
        while text.first == character { text = text.dropFirst() }
        while text.last == character { text = text.dropLast() }
        return String(text)
    }
}

extension FCMFailure {
    /// The details a quota answer may carry that Herald reads or knowingly passes over.
    static let knownDetailTypes: Set<String> = [fcmErrorType, badRequestType, quotaFailureType, retryInfoType, errorInfoType,
                                                "type.googleapis.com/google.rpc.Help", "type.googleapis.com/google.rpc.LocalizedMessage"]

    /// What in a 429's body Herald could not read, for a log line (nil: nothing odd; an empty
    /// body, a bare 429, is no oddity): not JSON, no `error` object, a detail of a type not known
    /// here, or a stated limit that cannot be used.
    public static func quotaBodyOddity(_ body: [UInt8], now: Date) -> String? {
        guard !body.isEmpty else { return nil }
        guard let json = try? JSONValue.parse(body) else { return "the body is not JSON" }
        guard case .object(let error)? = json["error"] else { return "the body has no error object" }
        let unknown = (error["details"]?.arrayValue ?? []).map { $0["@type"]?.stringValue ?? "(no @type)" }
            .filter { !knownDetailTypes.contains($0) }
        if !unknown.isEmpty { return "details of unknown types: " + unknown.prefix(3).map { String($0.prefix(80)) }.joined(separator: ", ") }
        if let failure = FCMFailure(httpStatus: 429, headers: [], body: body, json: json, now: now, redacting: []),
           case .unusable(let why)? = failure.statedQuota {
            return why
        }
        return nil
    }

    /// The first `limit` bytes of an answer's body as text for a log line, with anything that
    /// looks like a credential, and every string in `secrets`, removed.
    public static func excerpt(_ body: [UInt8], limit: Int = 200, redacting secrets: [String]) -> String {
        let text = String(decoding: body.prefix(limit), as: UTF8.self)
        return Redact.secrets(in: text.split(whereSeparator: { $0.isNewline }).joined(separator: " "), limit: limit, also: secrets)
    }
}
