import FCM
import Foundation
import JSON
import Queue

/// What the sender does with a claimed job before any request: send it, or settle it at once.
public enum Preparation: Sendable, Equatable {
    /// A v1 send: the request body and the registration token (nil for topic/condition targets).
    case send(body: [UInt8], token: String?)
    /// A device-group operation for /fcm/notification.
    case group(operation: String, name: String, key: String?, tokens: [String])
    /// Settled without a request (invalid message, pruned token, attempts exhausted).
    case settled(JobOutcome)
}

/// FCM's limit on members of one device group.
public let deviceGroupMemberLimit = 20

public enum Planning {
    /// Checks a claimed job and builds what to send. Invalid input never costs a request: it is
    /// dead-lettered with the validator's reasons (under `rules`: the embedded ones, plus the
    /// operator's extra fields in a worker).
    public static func prepare(_ job: ClaimedJob, rules: MessageRuleSet = MessageValidator.rules) -> Preparation {
        if job.attempt > job.maxAttempts {
            let last = job.lastError.map { "; last error: \($0)" } ?? ""
            return .settled(.dead(id: job.id, reason: "gave up after \(job.maxAttempts) attempts (max_attempts)\(last)"))
        }
        let message: JSONValue
        do {
            message = try JSONValue.parse(job.message)
        } catch {
            return .settled(.dead(id: job.id, reason: "message: not valid JSON (\(error))"))
        }
        switch job.kind {
        case .group:
            return prepareGroup(job, message)
        case .send:
            // Not an object, no target or two targets, and every other rule: the validator says which.
            let issues = rules.validate(message)
            if !issues.isEmpty {
                return .settled(.dead(id: job.id, reason: issues.map(\.description).joined(separator: "; ")))
            }
            let token = message["token"]?.stringValue
            if job.tokenPruned, let token {
                return .settled(.discarded(id: job.id, reason: "token \(abbreviated(token)) was pruned earlier (FCM reported it unregistered); not sent"))
            }
            return .send(body: FCMEndpoint.sendBody(messageJSON: job.message), token: token)
        }
    }

    static func prepareGroup(_ job: ClaimedJob, _ message: JSONValue) -> Preparation {
        let operation = message["operation"]?.stringValue ?? ""
        guard ["create", "add", "remove"].contains(operation) else {
            return .settled(.dead(id: job.id, reason: "message.operation: must be create, add or remove"))
        }
        guard let name = message["notification_key_name"]?.stringValue, !name.isEmpty else {
            return .settled(.dead(id: job.id, reason: "message.notification_key_name: a device group needs a name"))
        }
        let tokens = (message["registration_ids"]?.arrayValue ?? []).compactMap(\.stringValue)
        guard !tokens.isEmpty else {
            return .settled(.dead(id: job.id, reason: "message.registration_ids: needs at least one registration token"))
        }
        let key = message["notification_key"]?.stringValue ?? job.groupKey
        switch operation {
        case "create":
            let distinct = Set(tokens).count
            if distinct > deviceGroupMemberLimit {
                return .settled(.dead(id: job.id, reason: "device group \(name): \(distinct) members is over FCM's limit of \(deviceGroupMemberLimit) per group"))
            }
        default:
            guard key != nil else {
                return .settled(.dead(id: job.id, reason: "device group \(name): not in herald.device_groups; create it first (or give message.notification_key)"))
            }
            if operation == "add" {
                let total = Set(job.groupMembers + tokens).count
                if total > deviceGroupMemberLimit {
                    return .settled(.dead(id: job.id, reason: "device group \(name): adding would make \(total) members, over FCM's limit of \(deviceGroupMemberLimit) per group"))
                }
            }
        }
        return .group(operation: operation, name: name, key: key, tokens: tokens)
    }

    /// What to do after FCM's answer (or a transport failure) for a job.
    public enum Decision: Sendable, Equatable {
        case outcome(JobOutcome)
        /// 401 on our access token: renew it and send again (once).
        case reauthenticate
    }

    public static func decide(job: ClaimedJob, preparation: Preparation, classification: SendClassification,
                              reauthenticated: Bool, policy: RetryPolicy, random: Double) -> Decision {
        switch classification {
        case .delivered(let name):
            if case .group(let operation, let groupName, let key, let tokens) = preparation {
                let newKey = name.isEmpty ? (key ?? "") : name
                return .outcome(.completed(id: job.id, messageName: nil,
                                           group: GroupChange(operation: operation, name: groupName, key: newKey, tokens: tokens)))
            }
            return .outcome(.completed(id: job.id, messageName: name.isEmpty ? nil : name))
        case .pruneToken(let code, let message):
            if case .send(_, let token?) = preparation {
                return .outcome(.pruned(id: job.id, token: token, reason: "\(code): \(message)"))
            }
            return .outcome(.dead(id: job.id, reason: "\(code): \(message)"))
        case .deadLetter(let code, let message):
            return .outcome(.dead(id: job.id, reason: "\(code): \(message)"))
        case .reauthenticate(let message):
            if !reauthenticated { return .reauthenticate }
            return retry(job: job, reason: "UNAUTHENTICATED: \(message)", retryAfter: nil, quota: false, policy: policy, random: random)
        case .retry(let code, let message, let retryAfter, _):
            return retry(job: job, reason: "\(code): \(message)", retryAfter: retryAfter,
                         quota: classification.isQuota, policy: policy, random: random)
        }
    }

    static func retry(job: ClaimedJob, reason: String, retryAfter: Double?, quota: Bool, policy: RetryPolicy, random: Double) -> Decision {
        if job.attempt >= job.maxAttempts {
            return .outcome(.dead(id: job.id, reason: "gave up after \(job.attempt) attempts (max_attempts); last error: \(reason)"))
        }
        let delay = policy.delay(attempt: job.attempt, retryAfter: retryAfter, quota: quota, random: random)
        return .outcome(.retry(id: job.id, error: reason, delay: delay))
    }

    /// How long the whole sender holds back after a project or topic quota answer.
    public static func pause(for classification: SendClassification, policy: RetryPolicy) -> Double? {
        guard case .retry(_, _, let retryAfter, true) = classification else { return nil }
        return policy.floor(attempt: 1, retryAfter: retryAfter, quota: true)
    }

    /// The first and last characters of a token, for reasons and logs.
    public static func abbreviated(_ token: String) -> String {
        token.count <= 16 ? token : String(token.prefix(8)) + "…" + String(token.suffix(4))
    }
}
