import FCM
import Foundation
import JSON
import Queue
import Testing
import Worker

/// What the sender does with a claimed job and with FCM's answer, without sockets.
@Suite struct PlanningTests {
    func job(_ message: String, attempt: Int = 1, maxAttempts: Int = 25, pruned: Bool = false, kind: JobKind = .send,
             groupKey: String? = nil, members: [String] = []) -> ClaimedJob {
        ClaimedJob(id: 7, kind: kind, message: Array(message.utf8), attempt: attempt, maxAttempts: maxAttempts,
                   tokenPruned: pruned, lastError: "UNAVAILABLE: down", groupKey: groupKey, groupMembers: members)
    }
    let policy = RetryPolicy()

    @Test func validMessagesAreSentWrappedInMessage() {
        let prepared = Planning.prepare(job(#"{"token":"t1","notification":{"title":"x"}}"#))
        #expect(prepared == .send(body: Array(#"{"message":{"token":"t1","notification":{"title":"x"}}}"#.utf8), token: "t1"))
    }

    /// Herald's door limits (DoorLimits), for rows that reached herald.jobs without the check:
    /// dead-lettered without a request, the limit named; what is at the limit is sent.
    @Test func jobsOverTheDoorLimitsAreSettledWithoutARequest() {
        func deadReason(_ message: String, kind: JobKind = .send) -> String? {
            guard case .settled(let outcome) = Planning.prepare(job(message, kind: kind)), case .dead(let reason) = outcome.action else { return nil }
            return reason
        }
        let token = String(repeating: "t", count: 4_097)
        #expect(deadReason(#"{"token":"\#(token)","notification":{"title":"x"}}"#)
                == "message.token: 4097 bytes, over Herald's limit of 4096 bytes for a target; not sent")
        #expect(deadReason(#"{"topic":"\#(token)","data":{"k":"v"}}"#)?.hasPrefix("message.topic: 4097 bytes") == true)
        #expect(deadReason(#"{"operation":"add","notification_key_name":"g","registration_ids":["a","\#(token)"]}"#, kind: .group)?
                    .hasPrefix("message.registration_ids: a token of 4097 bytes") == true)
        let body = String(repeating: "b", count: 32_768)
        let bodyReason = deadReason(#"{"token":"t1","data":{"k":"\#(body)"}}"#)
        #expect(bodyReason?.hasPrefix("message: 32798 bytes, over Herald's limit of 32768 bytes for a send job") == true, "\(bodyReason ?? "sent")")
        let atLimit = String(repeating: "k", count: 4_096)
        guard case .send = Planning.prepare(job(#"{"token":"\#(atLimit)","notification":{"title":"x"}}"#)) else {
            Issue.record("a 4,096-byte token is sent"); return
        }
    }

    @Test func invalidInputIsSettledWithoutARequest() {
        #expect(Planning.prepare(job("not json")) == .settled(JobOutcome(id: 7, attempt: 1, .dead(reason: "message: not valid JSON (" + reasonOfParse("not json") + ")"))))
        guard case .settled(let outcome) = Planning.prepare(job(#"{"token":"a","topic":"b"}"#)), case .dead(let reason) = outcome.action else {
            Issue.record("two targets must be dead-lettered"); return
        }
        #expect(reason.hasPrefix("message"))
        guard case .settled(let outcome) = Planning.prepare(job(#"{"token":"abc"}"#, pruned: true)), case .discarded(let why) = outcome.action else {
            Issue.record("a pruned token's job is discarded"); return
        }
        #expect(why.contains("pruned earlier"))
        #expect(Planning.prepare(job(#"{"token":"abc"}"#, attempt: 26, maxAttempts: 25))
                == .settled(JobOutcome(id: 7, attempt: 26, .dead(reason: "gave up after 25 attempts (max_attempts); last error: UNAVAILABLE: down"))))
    }

    func reasonOfParse(_ text: String) -> String {
        do { _ = try JSONValue.parse(text); return "" } catch { return "\(error)" }
    }

    @Test func groupLimitsAreCheckedBeforeFCM() {
        let tokens = (1...21).map { "\"t\($0)\"" }.joined(separator: ",")
        let create = job(#"{"operation":"create","notification_key_name":"g","registration_ids":[\#(tokens)]}"#, kind: .group)
        guard case .settled(let outcome) = Planning.prepare(create), case .dead(let reason) = outcome.action else { Issue.record("21 members refused"); return }
        #expect(reason.contains("limit of 20"))
        let add = job(#"{"operation":"add","notification_key_name":"g","registration_ids":["new"]}"#, kind: .group,
                      groupKey: "K", members: (1...20).map { "m\($0)" })
        guard case .settled(let addOutcome) = Planning.prepare(add), case .dead(let addReason) = addOutcome.action else { Issue.record("21st member refused"); return }
        #expect(addReason.contains("21 members"))
        let remove = job(#"{"operation":"remove","notification_key_name":"g","registration_ids":["m1"]}"#, kind: .group, groupKey: "K")
        #expect(Planning.prepare(remove) == .group(DeviceGroupPlan(operation: .remove, name: "g", key: "K", tokens: ["m1"])))
    }

    @Test func answersBecomeOutcomes() {
        let j = job(#"{"token":"t1"}"#, attempt: 3)
        let send = Preparation.send(body: [], token: "t1")
        func decide(_ c: SendClassification, reauthenticated: Bool = false, random: Double = 0) -> Planning.Decision {
            Planning.decide(job: j, preparation: send, classification: c, reauthenticated: reauthenticated, policy: policy, random: random)
        }
        #expect(decide(.delivered(name: "projects/p/messages/1")) == .outcome(JobOutcome(id: 7, attempt: 3, .completed(messageName: "projects/p/messages/1"))))
        #expect(decide(.pruneToken(code: "UNREGISTERED", message: "gone")) == .outcome(JobOutcome(id: 7, attempt: 3, .pruned(token: "t1", reason: "UNREGISTERED: gone"))))
        #expect(decide(.deadLetter(code: "SENDER_ID_MISMATCH", message: "m")) == .outcome(JobOutcome(id: 7, attempt: 3, .dead(reason: "SENDER_ID_MISMATCH: m"))))
        // Attempt 3 without Retry-After: 4 s, plus jitter up to half.
        #expect(decide(.retry(code: "UNAVAILABLE", message: "m", retryAfter: nil, quota: nil), random: 0.5)
                == .outcome(JobOutcome(id: 7, attempt: 3, .retry(error: "UNAVAILABLE: m", delay: 5))))
        // Never sooner than Retry-After.
        guard case .outcome(let outcome) = decide(.retry(code: "UNAVAILABLE", message: "m", retryAfter: 120, quota: nil)), case .retry(_, let delay) = outcome.action else {
            Issue.record("retry expected"); return
        }
        #expect(delay >= 120)
        #expect(decide(.reauthenticate(message: "expired")) == .reauthenticate)
        guard case .outcome(let again) = decide(.reauthenticate(message: "expired"), reauthenticated: true), case .retry = again.action else {
            Issue.record("a second 401 is retried with backoff"); return
        }
        let last = job(#"{"token":"t1"}"#, attempt: 25, maxAttempts: 25)
        let final = Planning.decide(job: last, preparation: send, classification: .retry(code: "INTERNAL", message: "m", retryAfter: nil, quota: nil),
                                    reauthenticated: false, policy: policy, random: 0)
        #expect(final == .outcome(JobOutcome(id: 7, attempt: 25, .dead(reason: "gave up after 25 attempts (max_attempts); last error: INTERNAL: m"))))
    }

    @Test func aProjectQuotaPausesAMinuteOrItsRetryAfter() {
        #expect(policy.projectPause(retryAfter: nil) == 60)
        #expect(policy.projectPause(retryAfter: 90) == 90)
    }

    @Test func thousandJobsFailingTogetherDoNotReturnTogether() {
        var generator = SplitMix64(seed: 42)
        let delays = (0..<1000).map { _ in
            policy.delay(attempt: 1, retryAfter: 30, quota: false, using: &generator)
        }
        #expect(delays.allSatisfy { $0 >= 30 && $0 <= 45 })
        let perSecond = Dictionary(grouping: delays, by: { Int($0) }).values.map(\.count).max() ?? 0
        #expect(perSecond < 150, "spread over the jitter window, not one burst")
    }
}
