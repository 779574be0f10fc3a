import FCM
import Foundation
import JSON
import Queue

/// What the sender does with a claimed job before any request: send it, or settle it at once.
public enum Preparation: Sendable, Equatable {
    /// A v1 send: the request body and the registration token (nil for topic/condition targets).
    case send(body: [UInt8], token: String?)
    /// A device-group change for /fcm/notification.
    case group(DeviceGroupPlan)
    /// Settled without a request (invalid message, pruned token, attempts exhausted).
    case settled(JobOutcome)
}

public enum Planning {
    /// Checks a claimed job and builds what to send. Invalid input never costs a request: it is
    /// dead-lettered with the validator's reasons (under `rules`: the embedded ones, plus the
    /// operator's extra fields in a worker). A legacy payload (docs/legacy.md 4.1's rule) is
    /// translated here, with `now` (UNIX seconds) as the clock of `apns-expiration`, so each
    /// attempt's request counts its time to live from when it is built.
    public static func prepare(_ job: ClaimedJob, rules: MessageRuleSet = MessageValidator.rules,
                               now: Double = Date().timeIntervalSince1970) -> Preparation {
        if job.attempt > job.maxAttempts {
            let last = job.lastError.map { "; last error: \($0)" } ?? ""
            return .settled(job.outcome(.dead(reason: "gave up after \(job.maxAttempts) attempts (max_attempts)\(last)")))
        }
        // Herald's limits at the door (DoorLimits): rows inserted before herald.jobs checked them
        // are dead-lettered here, before any request (and before parsing a huge message).
        if let problem = DoorLimits.sizeProblem(messageBytes: job.message.count, group: job.kind == .group) {
            return .settled(job.outcome(.dead(reason: problem)))
        }
        let message: JSONValue
        do {
            message = try JSONValue.parse(job.message)
        } catch {
            return .settled(job.outcome(.dead(reason: "message: not valid JSON (\(error))")))
        }
        if let problem = DoorLimits.targetProblem(message) {
            return .settled(job.outcome(.dead(reason: problem)))
        }
        switch job.kind {
        case .group:
            return prepareGroup(job, message)
        case .send:
            // A v1 message settles this in a lookup or two: the v1 target keys are looked up first.
            if LegacyTranslator.isLegacy(message) {
                return prepareLegacy(job, message, now: now)
            }
            // Not an object, no target or two targets, and every other rule: the validator says which.
            let issues = rules.validate(message)
            if !issues.isEmpty {
                return .settled(job.outcome(.dead(reason: issues.map(\.description).joined(separator: "; "))))
            }
            let token = message["token"]?.stringValue
            if job.tokenPruned, let token {
                return .settled(job.outcome(.discarded(reason: prunedReason(job, token))))
            }
            return .send(body: FCMEndpoint.sendBody(messageJSON: job.message, validateOnly: job.validateOnly), token: token)
        }
    }

    /// Why a job whose token the claim flagged goes unsent: pruned earlier, or (a campaign's job)
    /// stale, or over its queue's frequency cap, which the claim wrote in last_error. `service`
    /// names who reported the token gone (an APNs job's token was pruned after APNs's 410).
    static func prunedReason(_ job: ClaimedJob, _ token: String, service: String = "FCM") -> String {
        if let why = job.lastError, why.hasPrefix("STALE:") || why.hasPrefix("CAPPED:") { return why }
        return "token \(abbreviated(token)) was pruned earlier (\(service) reported it unregistered); not sent"
    }

    /// A legacy payload stored as a job: one target per job (herald.enqueue_legacy and the
    /// herald.jobs trigger fan a multicast out), sent as its v1 translation.
    static func prepareLegacy(_ job: ClaimedJob, _ legacy: JSONValue, now: Double) -> Preparation {
        let translation: LegacyTranslation
        switch LegacyTranslator.translate(legacy, now: Int(now.rounded(.down))) {
        case .failure(let rejection):
            return .settled(job.outcome(.dead(reason: rejection.description)))
        case .success(let result):
            translation = result
        }
        guard translation.messages.count == 1, let message = translation.messages.first else {
            return .settled(job.outcome(.dead(reason: "InvalidParameters at legacy.registration_ids: \(translation.messages.count) registration tokens in one job; enqueue it with herald.enqueue_legacy or insert it with the herald.jobs trigger of migration 051 enabled, which give each token its own job and outcome")))
        }
        let token = message["token"]?.stringValue
        if job.tokenPruned, let token {
            return .settled(job.outcome(.discarded(reason: prunedReason(job, token))))
        }
        return .send(body: FCMEndpoint.sendBody(messageJSON: Array(message.serialized.utf8),
                                                validateOnly: job.validateOnly || translation.validateOnly), token: token)
    }

    static func prepareGroup(_ job: ClaimedJob, _ message: JSONValue) -> Preparation {
        guard let operation = message["operation"]?.stringValue.flatMap(DeviceGroupOperation.init(rawValue:)) else {
            return .settled(job.outcome(.dead(reason: "message.operation: must be create, add or remove")))
        }
        let name = message["notification_key_name"]?.stringValue ?? ""
        let tokens = (message["registration_ids"]?.arrayValue ?? []).compactMap(\.stringValue)
        let plan: DeviceGroupPlan
        do {
            plan = try DeviceGroupPlan.make(operation: operation, name: name, tokens: tokens,
                                            key: message["notification_key"]?.stringValue ?? job.groupKey, members: job.groupMembers)
        } catch {
            return .settled(job.outcome(.dead(reason: error.message.hasPrefix("device group") ? error.message : "message." + error.message)))
        }
        if operation != .create && plan.key == nil {
            return .settled(job.outcome(.dead(reason: "device group \(name): not in herald.device_groups; create it first (or give message.notification_key)")))
        }
        return .group(plan)
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
            if case .group(let plan) = preparation {
                let newKey = name.isEmpty ? (plan.key ?? "") : name
                return .outcome(job.outcome(.completed(messageName: nil,
                                           group: GroupChange(operation: plan.operation, name: plan.name, key: newKey, tokens: plan.tokens))))
            }
            return .outcome(job.outcome(.completed(messageName: name.isEmpty ? nil : name)))
        case .pruneToken(let code, let message):
            if case .send(_, let token?) = preparation {
                return .outcome(job.outcome(.pruned(token: token, reason: "\(code): \(message)")))
            }
            return .outcome(job.outcome(.dead(reason: "\(code): \(message)")))
        case .deadLetter(let code, let message):
            return .outcome(job.outcome(.dead(reason: "\(code): \(message)")))
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
            return .outcome(job.outcome(.dead(reason: "gave up after \(job.attempt) attempts (max_attempts); last error: \(reason)")))
        }
        let delay = policy.delay(attempt: job.attempt, retryAfter: retryAfter, quota: quota, random: random)
        return .outcome(job.outcome(.retry(error: reason, delay: delay)))
    }

    /// The first and last characters of a token, for reasons and logs.
    public static func abbreviated(_ token: String) -> String {
        token.count <= 16 ? token : String(token.prefix(8)) + "…" + String(token.suffix(4))
    }
}
