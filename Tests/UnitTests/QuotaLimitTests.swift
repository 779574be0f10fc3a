import FCM
import Foundation
import Queue
import Testing
@testable import Worker

/// Telling FCM's quota answers apart, backing off per target, and the project's adapted rate.
@Suite struct QuotaClassificationTests {
    static func quota429(_ violations: [(String, String)], headers: [(name: String, value: String)] = []) -> SendClassification {
        let items = violations.map { #"{"subject":"\#($0.0)","description":"\#($0.1)"}"# }.joined(separator: ",")
        let detail = #"{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[\#(items)]}"#
        let body = ClassificationTests.fcmError(429, "RESOURCE_EXHAUSTED", "QUOTA_EXCEEDED", "Quota exceeded", extra: detail)
        return ClassificationTests.classify(429, body, headers: headers)
    }

    @Test func theQuotaFailureSubjectSaysWhichLimit() {
        #expect(Self.quota429([("device:fGx7…", "Message rate to one device exceeded")]).quotaLimit == .device)
        #expect(Self.quota429([("registration_token:abc", "")]).quotaLimit == .device)
        #expect(Self.quota429([("topic:news", "Message rate to one topic exceeded")]).quotaLimit == .topic)
        #expect(Self.quota429([("/topics/news", "")]).quotaLimit == .topic)
        #expect(Self.quota429([("project:my-app", "Send requests per minute per project")]).quotaLimit == .project)
        #expect(Self.quota429([("project_number:1234", "")]).quotaLimit == .project)
        // No subject: the description decides.
        #expect(Self.quota429([("", "Too many messages sent to this device")]).quotaLimit == .device)
        // The widest limit named wins: it is the one that binds.
        #expect(Self.quota429([("device:a", ""), ("project:p", "")]).quotaLimit == .project)
        #expect(Self.quota429([("device:a", ""), ("topic:t", "")]).quotaLimit == .topic)
    }

    @Test func anAnswerThatDoesNotSayIsUnattributed() {
        #expect(Self.quota429([("clientip:10.0.0.1", "Requests from this address")]).quotaLimit == .unattributed)
        #expect(ClassificationTests.classify(429, "").quotaLimit == .unattributed)
        #expect(ClassificationTests.classify(429, ClassificationTests.fcmError(429, "RESOURCE_EXHAUSTED", "QUOTA_EXCEEDED", "Quota exceeded")).quotaLimit
                == .unattributed)
        // Legacy names say which.
        #expect(ClassificationTests.classify(200, #"{"results":[{"error":"DeviceMessageRateExceeded"}]}"#).quotaLimit == .device)
        #expect(ClassificationTests.classify(200, #"{"error":"TopicsMessageRateExceeded"}"#).quotaLimit == .topic)
        // Other retries are no quota answers at all.
        #expect(ClassificationTests.classify(503, "").quotaLimit == nil)
    }
}

@Suite struct QuotaDelayTests {
    let policy = RetryPolicy()

    @Test func aDeviceBacksOffExponentiallyWithoutTheMinuteFloor() {
        #expect(policy.quotaDelay(.device, streak: 1, retryAfter: nil, random: 0) == 1)
        #expect(policy.quotaDelay(.device, streak: 2, retryAfter: nil, random: 0) == 2)
        #expect(policy.quotaDelay(.device, streak: 4, retryAfter: nil, random: 0) == 8)
        // Retry-After is never undercut, and the jitter only adds.
        #expect(policy.quotaDelay(.device, streak: 1, retryAfter: 20, random: 0) == 20)
        #expect(policy.quotaDelay(.device, streak: 1, retryAfter: nil, random: 0.999) > 1.49)
    }

    @Test func aTopicWaitsAtLeastAMinuteAndTheProjectItsRetryAfter() {
        #expect(policy.quotaDelay(.topic, streak: 1, retryAfter: nil, random: 0) == 60)
        #expect(policy.quotaDelay(.topic, streak: 8, retryAfter: nil, random: 0) == 128)
        #expect(policy.quotaDelay(.project, streak: 1, retryAfter: nil, random: 0) == 60)
        #expect(policy.quotaDelay(.project, streak: 1, retryAfter: 2, random: 0) == 2)
    }

    @Test func aRetryAfterOfDaysPausesTheProjectAnHourAtMost() {
        #expect(policy.projectPause(retryAfter: 5 * 86_400) == 3600)
        #expect(policy.projectPause(retryAfter: 3) == 3)
        #expect(policy.projectPause(retryAfter: nil) == 60)
        // The job that drew it still waits what it was told, up to a day.
        #expect(policy.quotaDelay(.project, streak: 1, retryAfter: 5 * 86_400, random: 0) == 86_400)
    }
}

@Suite struct QuotaTrackerTests {
    let t0 = 1_000_000.0

    @Test func aDeviceLimitHoldsThatDeviceAloneWithAGrowingStreak() {
        var tracker = QuotaTracker(policy: RetryPolicy())
        #expect(tracker.attribute(.device, target: "token:hot", now: t0) == .device)
        let first = tracker.refused(.device, target: "token:hot", retryAfter: nil, now: t0, random: 0)
        #expect(first == 1)
        #expect(tracker.held("token:hot", now: t0 + 0.5) == 0.5)
        #expect(tracker.held("token:cold", now: t0 + 0.5) == nil)
        let second = tracker.refused(.device, target: "token:hot", retryAfter: nil, now: t0 + 1.5, random: 0)
        #expect(second == 2)
        // A delivery ends the streak.
        tracker.cleared("token:hot")
        #expect(tracker.refused(.device, target: "token:hot", retryAfter: nil, now: t0 + 10, random: 0) == 1)
        // Long-ended holds are forgotten.
        tracker.prune(now: t0 + 1000)
        #expect(tracker.isEmpty)
    }

    @Test func anUnattributedAnswerAmongDeliveriesIsTheTargetsOwn() {
        var tracker = QuotaTracker(policy: RetryPolicy())
        tracker.countDeliveries(50, now: t0)
        #expect(tracker.attribute(.unattributed, target: "token:a", now: t0 + 0.1) == .device)
        #expect(tracker.attribute(.unattributed, target: "topic:news", now: t0 + 0.1) == .topic)
        // Many refused against few accepted: the project's.
        for _ in 0..<10 { _ = tracker.attribute(.unattributed, target: "token:b", now: t0 + 0.2) }
        #expect(tracker.attribute(.unattributed, target: "token:c", now: t0 + 0.2) == .project)
    }

    @Test func anUnattributedAnswerWithNothingElseAcceptedIsTheProjects() {
        var tracker = QuotaTracker(policy: RetryPolicy())
        #expect(tracker.attribute(.unattributed, target: "token:a", now: t0) == .project)
        // A device or topic limit without a target to hold back falls to the project.
        #expect(tracker.attribute(.device, target: nil, now: t0) == .project)
    }

    @Test func acceptedIsWhatWasDeliveredSinceThePause() {
        var tracker = QuotaTracker(policy: RetryPolicy())
        for tenth in 0..<20 { tracker.countDeliveries(30, now: t0 + Double(tenth) / 10 + 0.05) }
        let rate = tracker.accepted(since: 0, now: t0 + 2.05)
        #expect(rate.map { abs($0 - 300) < 20 } == true, "\(String(describing: rate))")
        #expect(tracker.accepted(since: t0 + 1.9, now: t0 + 2) == nil, "too short to tell")
        // Measured from the first delivery, not over time nothing was sent.
        var fresh = QuotaTracker(policy: RetryPolicy())
        for tenth in 0..<5 { fresh.countDeliveries(30, now: t0 + Double(tenth) / 10) }
        let early = fresh.accepted(since: 0, now: t0 + 0.5)
        #expect(early.map { abs($0 - 300) < 40 } == true, "\(String(describing: early))")
    }

    @Test func provenIsTheBestTwoSecondsOfTheLastMinute() {
        var tracker = QuotaTracker(policy: RetryPolicy())
        #expect(tracker.proven(now: t0) == nil, "nothing delivered")
        // 1,000 a second for ten seconds, then a storm: 50 a second for 40 s.
        for second in 0..<10 { tracker.countDeliveries(1000, now: t0 + Double(second) + 0.5) }
        for second in 10..<50 { tracker.countDeliveries(50, now: t0 + Double(second) + 0.5) }
        #expect(tracker.proven(now: t0 + 50.5) == 1000)
        // A minute after the good seconds they are forgotten.
        for second in 50..<75 { tracker.countDeliveries(50, now: t0 + Double(second) + 0.5) }
        #expect(tracker.proven(now: t0 + 75.5) == 50)
    }

    @Test func theTargetOfATopicSendIsReadFromItsBody() {
        #expect(QuotaTracker.target(token: "abc", body: []) == "token:abc")
        #expect(QuotaTracker.target(token: nil, body: Array(#"{"message":{"topic":"news"}}"#.utf8)) == "topic:news")
        #expect(QuotaTracker.target(token: nil, body: Array(#"{"message":{"condition":"'a' in topics"}}"#.utf8)) == "condition:'a' in topics")
    }
}

@Suite struct AdaptiveRateTests {
    let t0 = 1_000_000.0
    typealias State = AdaptiveRate.State

    @Test func aProcessOpensAtAThousandAndDoublesToTheCeiling() {
        let rate = AdaptiveRate(ceiling: 10_000)
        #expect(rate.rate(State(), now: t0, started: t0) == 1000)
        #expect(rate.rate(State(), now: t0 + 1, started: t0) == 4000)
        #expect(rate.rate(State(), now: t0 + 2, started: t0) == 10_000)
        // A ceiling below the start is the rate from the start.
        #expect(AdaptiveRate(ceiling: 100).rate(State(), now: t0, started: t0) == 100)
        #expect(rate.rate(State(), now: t0) == 10_000)
    }

    @Test func aQuotaAnswerLowersOncePerEpisodeAndTheRateRisesWhileClean() throws {
        let rate = AdaptiveRate(ceiling: 1000)
        let lowered = try #require(rate.lowered(State(), now: t0, accepted: .infinity))
        #expect(lowered.adapted == 800 && lowered.at == t0)
        // The same episode (within a second): not again.
        #expect(rate.lowered(State(adapted: 800, at: t0), now: t0 + 0.5, accepted: .infinity) == nil)
        // It rises 2 % of the lowered rate a second, up to the ceiling.
        #expect(rate.rate(State(adapted: 800, at: t0), now: t0 + 5) == 880)
        #expect(rate.rate(State(adapted: 800, at: t0), now: t0 + 100) == 1000)
    }

    @Test func farAboveTheQuotaItComesDownToWhatFCMAcceptedInAFewSteps() {
        let rate = AdaptiveRate(ceiling: 10_000)
        var state = State()
        var now = t0
        var steps = 0
        while rate.rate(state, now: now) > 330, steps < 20 {
            state = rate.lowered(state, now: now, accepted: 300, proven: 300) ?? state
            now += 1.5
            steps += 1
        }
        #expect(steps <= 3, "took \(steps) quota answers")
        #expect(state.adapted.map { $0 >= 300 } == true, "never below what FCM accepted")
    }

    @Test func aLimitFoundWhileFCMAcceptedMostClimbsBackSlowly() throws {
        let rate = AdaptiveRate(ceiling: 10_000)
        // 1,000 a second in force, FCM accepted 900 of them: a limit near 900.
        let lowered = try #require(rate.lowered(State(adapted: 1000, at: t0 - 10), now: t0, accepted: 900))
        #expect(lowered.regain == nil)
        let afterFive = rate.rate(lowered, now: t0 + 5)
        #expect(afterFive > lowered.adapted! && afterFive < 1000, "\(afterFive)")
    }

    @Test func aStormOfQuotaAnswersIsClimbedBackFromInSecondsNotMinutes() throws {
        // 2,000 a second found; then FCM refuses 80 % of every send for ten seconds, answering
        // each burst after a pause with 429 again.
        let rate = AdaptiveRate(ceiling: 10_000)
        var state = State(adapted: 2000, at: t0 - 300)
        var now = t0
        while now < t0 + 10 {
            let inForce = rate.rate(state, now: now)
            state = rate.lowered(state, now: now, accepted: inForce * 0.2, proven: 2000) ?? state
            now += 1.5
        }
        // Deep down by now, but the rate before the storm is remembered.
        #expect(state.adapted! < 200, "\(state)")
        #expect(state.regain == 2000, "\(state)")
        let end = state.at!
        // Doubling each second it is back to 2,000 within eight seconds of the last answer...
        #expect(rate.rate(state, now: end + 8) >= 2000, "\(state)")
        // ... then rises slowly, 2 % a second.
        #expect(rate.rate(state, now: end + 15) < 2600)
        // Without the memory, it would still be under 400 a minute later.
        var forgetful = state
        forgetful.regain = nil
        #expect(rate.rate(forgetful, now: end + 60) < 400)
    }

    @Test func theRegainIsWhatFCMWasSeenToCarryAndIsForgottenAfterAMinute() throws {
        let rate = AdaptiveRate(ceiling: 10_000)
        // At the ceiling, FCM refusing most: the regain is what it accepted, not the ceiling.
        let first = try #require(rate.lowered(State(), now: t0, accepted: 100, proven: 3000))
        #expect(first.regain == 3000 && first.adapted == 1000)
        // A storm-like answer 30 s later keeps it, though far less is in force and was seen.
        let storm = State(adapted: 100, at: t0, regain: 5000)
        let soon = try #require(rate.lowered(storm, now: t0 + 1.5, accepted: .infinity, proven: 400))
        #expect(soon.regain == 5000)
        // 90 s later it is forgotten: 8,000 a second is set (the ceiling was regained), and what
        // was seen is below that, so nothing is left to regain.
        let late = try #require(rate.lowered(storm, now: t0 + 90, accepted: .infinity, proven: 400))
        #expect(late.regain == nil && late.adapted == 8000, "\(late)")
        // 500 a second in force, 10 accepted, 400 seen: down to 50, back quickly to the 400 seen.
        let slow = try #require(rate.lowered(State(adapted: 100, at: t0 - 200), now: t0, accepted: 10, proven: 400))
        #expect(slow.adapted == 50 && slow.regain == 400, "\(slow)")
        // Nothing seen delivered and nothing remembered: nothing to regain.
        #expect(rate.lowered(State(adapted: 100, at: t0 - 200), now: t0, accepted: 10, proven: 0)?.regain == nil)
    }

    @Test func neverBelowTheFloor() {
        let rate = AdaptiveRate(ceiling: 2)
        #expect(rate.lowered(State(adapted: 1, at: t0 - 1.5), now: t0, accepted: 0)?.adapted == 1)
    }
}

@Suite struct StoreMachineQuotaTests {
    @Test func aProjectQuotaAnswerLowersTheRateOnceThenClaimsGoOn() {
        var machine = StoreMachine(settings: StoreMachineTests.settings, now: 0)
        machine.received([.projectQuota(accepted: 400, proven: 900), .projectQuota(accepted: 300, proven: nil),
                          .projectQuota(accepted: nil, proven: 1200)], now: 1)
        #expect(machine.next(now: 1) == .lowerRate(accepted: 300, proven: 1200, stated: nil))
        machine.rateLowered()
        #expect(machine.next(now: 1) == .maintain)
    }
}

@Suite struct InFlightLimitTests {
    /// Feeds `count` answers of `seconds` each over `duration` seconds from `start`.
    static func feed(_ limit: inout InFlightLimit, seconds: Double, from start: Double, for duration: Double, perSpan: Int = 20) {
        var now = start
        while now < start + duration {
            for _ in 0..<perSpan { limit.answered(after: seconds, now: now) }
            now += 0.1
        }
    }

    @Test func quickAnswersKeepTheWindowAtTheCeiling() {
        var limit = InFlightLimit(floor: 16, ceiling: 256)
        Self.feed(&limit, seconds: 0.002, from: 0, for: 5)
        #expect(limit.window == 256)
    }

    @Test func answersThatSlowDownShrinkTheWindowAndItGrowsBack() {
        var limit = InFlightLimit(floor: 16, ceiling: 256)
        Self.feed(&limit, seconds: 0.002, from: 0, for: 1)
        // Requests queue at FCM: answers take 250 ms.
        Self.feed(&limit, seconds: 0.25, from: 1, for: 2)
        #expect(limit.window < 64, "the window shrank to \(limit.window)")
        #expect(limit.window >= 16, "never below the floor")
        // Quick again: it grows back.
        Self.feed(&limit, seconds: 0.003, from: 3, for: 5)
        #expect(limit.window == 256)
    }

    @Test func aSlowButUnqueuedFCMIsNotMistakenForAQueue() {
        // Every answer takes 80 ms from the start: that is the base, not a queue.
        var limit = InFlightLimit(floor: 16, ceiling: 256)
        Self.feed(&limit, seconds: 0.08, from: 0, for: 5)
        #expect(limit.window == 256)
    }

    @Test func theWindowSettlesWhereAnswersTakeTheSlackAboveTheBase() {
        // A server that serves 2,000 a second: answers take window / 2000 s plus 1 ms.
        var limit = InFlightLimit(floor: 16, ceiling: 256)
        var now = 0.0
        limit.answered(after: 0.001, now: now)
        for _ in 0..<200 {
            let seconds = 0.001 + Double(limit.window) / 2000
            for _ in 0..<20 { limit.answered(after: seconds, now: now) }
            now += 0.1
        }
        let settled = 0.001 + Double(limit.window) / 2000
        #expect(settled < 0.05, "answers settle at \(settled) s with a window of \(limit.window)")
        #expect(limit.window >= 30, "still enough in flight to keep the server busy: \(limit.window)")
    }
}

@Suite struct StoreMachineWindowTests {
    @Test func claimsFollowTheSendersWindow() {
        var machine = StoreMachine(settings: StoreMachineTests.settings, now: 0)
        #expect(machine.next(now: 0) == .maintain)
        machine.maintained(now: 0)
        #expect(machine.next(now: 0) == .promote(limit: 10_000))
        machine.promoted(Promotion(promoted: 0, nextDueIn: nil), now: 0)
        machine.received([.window(20)], now: 0)
        #expect(machine.next(now: 0) == .claim(limit: 20), "at most the window, not --concurrency")
    }
}
