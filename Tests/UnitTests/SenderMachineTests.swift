import FCM
import Foundation
import HTTPClient
@testable import Queue
import Testing
@testable import Worker

/// FCM's project quota as it answers in production (an ErrorInfo stating the limit, no
/// QuotaFailure, no FcmError, no Retry-After), and bodies that do not read as expected.
@Suite struct ProductionQuotaAnswerTests {
    static func body(value: String = "18000", unit: String = "1/min/{project}", extraDetail: String = "") -> String {
        let extra = extraDetail.isEmpty ? "" : "," + extraDetail
        return #"{"error": {"code": 429, "status": "RESOURCE_EXHAUSTED", "message": "Quota exceeded for quota metric 'Send requests' and limit 'Send requests per minute' of service 'fcm.googleapis.com' for consumer 'project_number:123'.", "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "RATE_LIMIT_EXCEEDED", "domain": "googleapis.com", "metadata": {"quota_limit": "SendsPerMinutePerProject", "quota_metric": "fcm.googleapis.com/send_requests", "quota_unit": "\#(unit)", "quota_limit_value": "\#(value)", "consumer": "projects/123", "service": "fcm.googleapis.com", "quota_location": "global"}}, {"@type": "type.googleapis.com/google.rpc.Help", "links": [{"description": "Request a higher quota limit.", "url": "https://cloud.google.com/docs/quotas/help/request_increase"}]}\#(extra)]}}"#
    }

    static let now = Date(timeIntervalSince1970: 1_700_000_000)

    static func failure(_ body: String) -> FCMFailure? {
        FCMFailure(httpStatus: 429, headers: [], body: Array(body.utf8), now: now)
    }

    @Test func theProductionAnswerIsTheProjectsLimitAndStatesIt() throws {
        let classification = SendClassification(httpStatus: 429, headers: [], body: Array(Self.body().utf8), now: Self.now)
        guard case .retry(let code, _, let retryAfter, let limit) = classification else {
            Issue.record("not a retry: \(classification)")
            return
        }
        #expect(code == "QUOTA_EXCEEDED")
        #expect(retryAfter == nil)
        #expect(limit == .project)
        #expect(Self.failure(Self.body())?.statedQuota == .perSecond(300, window: 60))
        #expect(Self.failure(Self.body(value: "600000"))?.statedQuota?.rate == 10_000)
        #expect(FCMFailure.quotaBodyOddity(Array(Self.body().utf8), now: Self.now) == nil)
    }

    @Test func aStatedLimitThatCannotBeUsedIsIgnoredWithWhy() throws {
        for value in ["abc", "0", "1000000000000", "-5", "1e5", ""] {
            let failure = try #require(Self.failure(Self.body(value: value)))
            // Still the project's limit: the ErrorInfo names it.
            #expect(failure.quotaLimit == .project)
            guard case .unusable(let why)? = failure.statedQuota else {
                Issue.record("\(value): \(String(describing: failure.statedQuota))")
                continue
            }
            #expect(why.hasPrefix("quota_limit_value"), "\(value): \(why)")
            #expect(FCMFailure.quotaBodyOddity(Array(Self.body(value: value).utf8), now: Self.now) == why)
        }
        guard case .unusable(let why)? = Self.failure(Self.body(unit: "1/fortnight/{project}"))?.statedQuota else {
            Issue.record("a unit of fortnights was read")
            return
        }
        #expect(why.hasPrefix("quota_unit"))
    }

    @Test func oddBodiesAreNamedAndNeverCrash() {
        #expect(FCMFailure.quotaBodyOddity(Array("<html>Too Many Requests</html>".utf8), now: Self.now) == "the body is not JSON")
        #expect(FCMFailure.quotaBodyOddity(Array(#"{"status": 429}"#.utf8), now: Self.now) == "the body has no error object")
        let unknown = Self.body(extraDetail: #"{"@type": "type.googleapis.com/google.rpc.Novel", "x": 1}"#)
        #expect(FCMFailure.quotaBodyOddity(Array(unknown.utf8), now: Self.now) == "details of unknown types: type.googleapis.com/google.rpc.Novel")
        // A bare 429 is no oddity: it is judged by what else is accepted, as before.
        #expect(FCMFailure.quotaBodyOddity([], now: Self.now) == nil)
        #expect(SendClassification(httpStatus: 429, headers: [], body: Array("<html>".utf8), now: Self.now).quotaLimit == .unattributed)
    }

    @Test func theExcerptIsCutAndCarriesNoCredential() {
        let body = Array((#"{"error": {"message": "Bearer ya29.a0AfH6SMBsecretsecretsecret token abcdef"}} "# + String(repeating: "x", count: 400)).utf8)
        let excerpt = FCMFailure.excerpt(body, redacting: ["abcdef"])
        #expect(!excerpt.contains("ya29.a0AfH6SMBsecret"))
        #expect(!excerpt.contains("abcdef"))
        #expect(excerpt.utf8.count <= 200)
    }
}

/// The sender's decisions, driven with a clock the test gives.
@Suite struct SenderMachineTests {
    static let t0 = 1_700_000_000.0
    var settings = SenderMachine.Settings()

    static func job(_ id: Int, token: String) -> (ClaimedJob, Preparation) {
        let message = #"{"token":"\#(token)","data":{"k":"v"}}"#
        return (ClaimedJob(id: id, message: Array(message.utf8)), .send(body: Array(#"{"message":\#(message)}"#.utf8), token: token))
    }

    static func answer(_ job: (ClaimedJob, Preparation), _ classification: SendClassification, at sentAt: Double,
                       stated: ProjectQuotaStatement? = nil, failure: HTTPClientError.Kind? = nil) -> SenderMachine.Answer {
        SenderMachine.Answer(job: job.0, preparation: job.1, reauthenticated: false, sentAt: sentAt, classification: classification,
                             failure: failure, stated: stated)
    }

    static let productionQuota = SendClassification.retry(code: "QUOTA_EXCEEDED", message: "Quota exceeded", retryAfter: nil, quota: .project)

    func machine() -> SenderMachine {
        var settings = settings
        settings.poolProcesses = 2
        return SenderMachine(settings: settings, project: "p", random: JitterRandom(seed: 7))
    }

    @Test func aProjectQuotaAnswerWithoutRetryAfterPausesNothingAndBacksTheRefusedOffFromAMinute() throws {
        var machine = machine()
        let refused = Self.job(1, token: "a")
        guard case .outcome(let outcome) = machine.answered(Self.answer(refused, Self.productionQuota, at: Self.t0, stated: .perSecond(300, window: 60)),
                                                            now: Self.t0 + 0.01) else {
            Issue.record("no outcome")
            return
        }
        guard case .snoozed(_, let delay, _, let backoff?) = outcome.action else {
            Issue.record("not a snooze with a backoff: \(outcome)")
            return
        }
        #expect(delay >= 60 && delay <= 90)
        // The job's own count of quota answers doubles it from there, whichever process claims it.
        #expect(backoff.first == delay && backoff.most >= 3600)
        // The rate is set from the stated limit, once; no pause is published.
        let effects = machine.takeEffects()
        #expect(effects.contains(.tell(.projectQuota(accepted: nil, proven: nil, stated: 300))))
        #expect(!effects.contains { if case .tell(.projectPaused) = $0 { true } else { false } })
        // Every other job goes on at once: no flat pause of the project, so no burst at its end.
        #expect(machine.admit(Self.job(2, token: "b").0, Self.job(2, token: "b").1, now: Self.t0 + 0.02) == .send)
        #expect(!machine.pause.isPaused(at: Self.t0 + 0.02))
        // More answers of the same storm report nothing new within the second...
        _ = machine.answered(Self.answer(Self.job(3, token: "c"), Self.productionQuota, at: Self.t0, stated: .perSecond(300, window: 60)),
                             now: Self.t0 + 0.5)
        #expect(!machine.takeEffects().contains { if case .tell = $0 { true } else { false } })
        // ...but a different stated figure is reported at once.
        _ = machine.answered(Self.answer(Self.job(4, token: "d"), Self.productionQuota, at: Self.t0, stated: .perSecond(200, window: 60)),
                             now: Self.t0 + 0.6)
        #expect(machine.takeEffects().contains(.tell(.projectQuota(accepted: nil, proven: nil, stated: 200))))
    }

    @Test func aRetryAfterIsStillHonouredByEveryPool() throws {
        var machine = machine()
        let quota = SendClassification.retry(code: "QUOTA_EXCEEDED", message: "Quota exceeded", retryAfter: 2, quota: .project)
        _ = machine.answered(Self.answer(Self.job(1, token: "a"), quota, at: Self.t0), now: Self.t0)
        #expect(machine.takeEffects().contains(.tell(.projectPaused(until: Self.t0 + 2, reason: "QUOTA_EXCEEDED"))))
        // Nothing goes out inside it: the job comes back after, spread over the window after it.
        guard case .settle(let held) = machine.admit(Self.job(2, token: "b").0, Self.job(2, token: "b").1, now: Self.t0 + 1),
              case .released(let delay) = held.action else {
            Issue.record("sent inside a Retry-After")
            return
        }
        #expect(delay >= 1 && delay <= 2)
        #expect(machine.admit(Self.job(3, token: "c").0, Self.job(3, token: "c").1, now: Self.t0 + 2.01) == .send)
    }

    @Test func aDevicesLimitHoldsThatDeviceAloneAndTheJobCarriesItsBackoff() throws {
        var machine = machine()
        let hot = Self.job(1, token: "hot")
        let deviceQuota = SendClassification.retry(code: "QUOTA_EXCEEDED", message: "device", retryAfter: nil, quota: .device)
        guard case .outcome(let outcome) = machine.answered(Self.answer(hot, deviceQuota, at: Self.t0), now: Self.t0),
              case .snoozed(_, let delay, _, let backoff?) = outcome.action else {
            Issue.record("not snoozed with a backoff")
            return
        }
        #expect(delay >= 1 && delay < 1.5)
        #expect(backoff.first >= 1 && backoff.first < 1.5)
        // Another job to the same device is held without a request; another device is sent.
        guard case .settle(let held) = machine.admit(Self.job(2, token: "hot").0, Self.job(2, token: "hot").1, now: Self.t0 + 0.5),
              case .snoozed = held.action else {
            Issue.record("the hot device was sent to during its backoff")
            return
        }
        #expect(machine.admit(Self.job(3, token: "calm").0, Self.job(3, token: "calm").1, now: Self.t0 + 0.5) == .send)
        #expect(machine.takeEffects().contains(.quotaAnswer(.device)))
    }

    @Test func anOutageOpensTheCircuitAndAnAnswerClosesIt() {
        var machine = machine()
        let timeout = SendClassification.retry(code: "TIMEOUT", message: "timed out", retryAfter: nil, quota: nil)
        for id in 1...8 {
            _ = machine.answered(Self.answer(Self.job(id, token: "t\(id)"), timeout, at: Self.t0, failure: .timeout), now: Self.t0 + Double(id) * 0.1)
        }
        #expect(machine.circuit.isOpen)
        #expect(machine.takeEffects().contains { if case .tell(.projectPaused(_, let reason)) = $0 { reason.hasPrefix("FCM_UNREACHABLE") } else { false } })
        guard case .settle(let held) = machine.admit(Self.job(9, token: "x").0, Self.job(9, token: "x").1, now: Self.t0 + 1),
              case .released = held.action else {
            Issue.record("sent while FCM was unreachable")
            return
        }
        #expect(machine.probeDue(now: Self.t0 + 1.4))
        machine.probeSent()
        machine.probeAnswered(outage: nil, now: Self.t0 + 1.5)
        #expect(!machine.circuit.isOpen)
        #expect(!machine.pause.isPaused(at: Self.t0 + 1.5))
    }

    @Test func anOddQuotaAnswerIsLoggedAtMostOnceAMinute() {
        var machine = machine()
        machine.oddQuotaAnswer("the body is not JSON", excerpt: "<html>", now: Self.t0)
        machine.oddQuotaAnswer("the body is not JSON", excerpt: "<html>", now: Self.t0 + 30)
        #expect(machine.takeEffects().filter { if case .warning = $0 { true } else { false } }.count == 1)
        machine.oddQuotaAnswer("the body is not JSON", excerpt: "<html>", now: Self.t0 + 61)
        #expect(machine.takeEffects().count == 1)
    }
}

/// The project's rate after quota answers that state the limit, and after those that do not.
@Suite struct StatedRateTests {
    let t0 = 1_000_000.0
    typealias State = AdaptiveRate.State

    @Test func aStatedLimitSetsTheRateAtOnceAndItNeverClimbsPastIt() throws {
        let rate = AdaptiveRate(ceiling: 10_000)
        // A process opening at 1,000/s meets a quota of 300/s.
        let set = try #require(rate.stated(State(), perSecond: 300, now: t0, started: t0))
        #expect(set.adapted == 285 && set.stated == 300 && set.regain == nil)
        #expect(rate.rate(set, now: t0) == 285)
        #expect(rate.rate(set, now: t0 + 600) == 285, "climbed past the stated limit")
        // The same figure again: nothing to write.
        #expect(rate.stated(set, perSecond: 300, now: t0 + 1) == nil)
        // 600,000 a minute: 10,000/s, paced at 9,500.
        #expect(rate.stated(State(), perSecond: 10_000, now: t0)?.adapted == 9_500)
        // After an hour without another answer it may climb again (the quota may have been raised).
        #expect(rate.rate(set, now: t0 + 3700) > 285)
    }

    @Test func aStatedLimitNeverRaisesTheRate() throws {
        let rate = AdaptiveRate(ceiling: 10_000)
        let low = State(adapted: 100, at: t0 - 1)
        let set = try #require(rate.stated(low, perSecond: 300, now: t0))
        #expect(rate.rate(set, now: t0) <= rate.rate(low, now: t0))
    }

    @Test func aHeldWindowIsProbedAtOneASecondAndThePaceIsKeptForAfter() throws {
        let rate = AdaptiveRate(ceiling: 10_000)
        let paced = try #require(rate.stated(State(), perSecond: 100, now: t0, started: t0))
        var held = paced
        held.windowHeldUntil = t0 + 60
        #expect(rate.rate(held, now: t0 + 1) == 1, "every pool together: one message a second")
        #expect(rate.rate(held, now: t0 + 60.01) == 95, "the hold over: the stated limit's share again")
        // The same figure stated by a probe's refusal writes nothing; a new one sets the pace
        // from the paced rate, not from the probes', and keeps the hold.
        #expect(rate.stated(held, perSecond: 100, now: t0 + 2) == nil)
        let raised = try #require(rate.stated(held, perSecond: 80, now: t0 + 2))
        #expect(raised.adapted == 76 && raised.windowHeldUntil == t0 + 60)
        // A lowering meanwhile starts from the paced rate too.
        let lowered = try #require(rate.lowered(State(adapted: 500, at: t0 - 100, windowHeldUntil: t0 + 60), now: t0 + 2, accepted: .infinity))
        #expect(lowered.adapted! > 100 && lowered.windowHeldUntil == t0 + 60)
    }

    @Test func loweringsAMinuteApartNeverRaiseTheRate() throws {
        // The storms seen: lowered to 959/s, then a minute's pause while the rate in force kept
        // climbing 2 % a second, so 80 % of it was 1,690, then 2,980.
        let rate = AdaptiveRate(ceiling: 10_000)
        var state = State(adapted: 959, at: t0)
        for minute in 1...3 {
            let next = try #require(rate.lowered(state, now: t0 + 61 * Double(minute), accepted: .infinity))
            #expect(next.adapted! <= state.adapted!, "minute \(minute): \(state.adapted!) -> \(next.adapted!)")
            state = next
        }
    }
}

@Suite struct SnoozeBackoffRowTests {
    @Test func aSnoozeWithABackoffCarriesItToTheDatabase() {
        var row: [UInt8] = []
        OutcomeAction.snoozed(error: "QUOTA_EXCEEDED", delay: 1.2, cap: 20, backoff: Backoff(first: 1.2, most: 4320)).appendRecordFields(to: &row)
        let text = String(decoding: row, as: UTF8.self)
        #expect(text.contains(#""grow":1.2"#) && text.contains(#""most":4320.0"#), "\(text)")
        var plain: [UInt8] = []
        OutcomeAction.snoozed(error: "QUOTA_EXCEEDED", delay: 1.2, cap: 20).appendRecordFields(to: &plain)
        #expect(!String(decoding: plain, as: UTF8.self).contains("grow"))
    }
}

extension SenderMachineTests {
    @Test func aStreamFCMNeverProcessedGoesAgainAtOnceWithoutUsingAnAttempt() {
        var machine = machine()
        // What the HTTP client makes of a refused stream, or one above a GOAWAY's last stream.
        let unprocessed = SendClassification(transport: TransportFailure(HTTPClientError(kind: .unprocessed, message: "REFUSED_STREAM")))
        // A job on its third attempt: a retry would use it up, a release gives it back unused.
        let job = (ClaimedJob(id: 1, message: Self.job(1, token: "a").0.message, attempt: 3), Self.job(1, token: "a").1)
        for sent in 0..<20 {
            let at = Self.t0 + Double(sent) * 0.4
            guard case .outcome(let outcome) = machine.answered(Self.answer(job, unprocessed, at: at, failure: .unprocessed), now: at + 0.01),
                  case .released(let delay) = outcome.action else {
                Issue.record("answer \(sent): not put back unsent")
                return
            }
            #expect(outcome.id == 1 && outcome.attempt == 3)
            #expect(delay == 0, "waited \(delay) s before going again")
        }
        // Twenty refusals in 8 s are no outage: FCM answered each by refusing it.
        #expect(!machine.circuit.isOpen)
        #expect(machine.takeEffects().isEmpty)
        #expect(machine.admit(Self.job(2, token: "b").0, Self.job(2, token: "b").1, now: Self.t0 + 8) == .send)
    }

    @Test func nothingButUnprocessedStreamsForTenSecondsIsAnOutageAndUsesTheAttempts() {
        var machine = machine()
        let unprocessed = SendClassification(transport: TransportFailure(HTTPClientError(kind: .unprocessed, message: "Error in the HTTP2 framing layer")))
        let delivered = SendClassification.delivered(name: "projects/p/messages/1")
        func fate(_ id: Int, at: Double, _ classification: SendClassification, failure: HTTPClientError.Kind?) -> OutcomeAction? {
            let job = (ClaimedJob(id: id, message: Self.job(id, token: "t\(id)").0.message, attempt: 1), Self.job(id, token: "t\(id)").1)
            guard case .outcome(let outcome) = machine.answered(Self.answer(job, classification, at: at - 0.01, failure: failure), now: at) else { return nil }
            return outcome.action
        }
        func released(_ action: OutcomeAction?) -> Bool { if case .released(let delay)? = action { delay == 0 } else { false } }
        // An answer now and then among the unprocessed streams (GOAWAYs of a healthy front end):
        // every unprocessed one goes again unused, however long it lasts.
        for second in 0..<30 {
            let at = Self.t0 + Double(second)
            #expect(released(fate(second, at: at, unprocessed, failure: .unprocessed)), "at \(second) s")
            if second % 9 == 8 || second == 29 { _ = fate(100 + second, at: at + 0.5, delivered, failure: nil) }
        }
        #expect(!machine.circuit.isOpen)
        // Then nothing but unprocessed streams: gone again unused for 10 s, after that each is
        // a lost answer (an attempt used, a retry with backoff), and the circuit opens.
        var usedAttempts = 0
        for tenth in 0..<120 {
            let at = Self.t0 + 30 + Double(tenth) * 0.1
            let action = fate(200 + tenth, at: at, unprocessed, failure: .unprocessed)
            if at - (Self.t0 + 30) < 9.95 {
                #expect(released(action), "at \(tenth) tenths")
            } else if case .retry? = action {
                usedAttempts += 1
            } else if case .released(let delay)? = action, delay > 0, machine.circuit.isOpen {
                // Held for the outage: put back for after it, unused, as any job while FCM is down.
            } else {
                Issue.record("at \(tenth) tenths: \(String(describing: action))")
            }
        }
        #expect(usedAttempts >= 1, "no unprocessed stream counted as a lost answer after 10 s of nothing else")
        #expect(machine.circuit.isOpen, "10 s of nothing but unprocessed streams opened no circuit")
        #expect(machine.takeEffects().contains { if case .tell(.projectPaused(_, let reason)) = $0 { reason.contains("UNPROCESSED") } else { false } })
    }
}

/// The window grows past where it starts while FCM answers steadily, and shrinks when FCM slows.
@Suite struct InFlightLimitGrowthTests {
    @Test func steadyAnswersGrowTheWindowToTheCeilingAndSlowerOnesShrinkIt() {
        var limit = InFlightLimit(floor: 16, ceiling: 1024, start: 256)
        #expect(limit.window == 256)
        // FCM answering every request in 100 ms, 1,000 answers a second, for four seconds.
        var now = 0.0
        while now < 4 {
            now += 0.001
            limit.answered(after: 0.1, now: now)
        }
        #expect(limit.window == 1024, "grew to \(limit.window) in 4 s of steady 100 ms answers")
        // FCM slows down (its queue grows): answers take 300 ms.
        while now < 5 {
            now += 0.001
            limit.answered(after: 0.3, now: now)
        }
        #expect(limit.window < 512, "still \(limit.window) after a second of answers three times slower")
    }

    @Test func atTheStartSteadyAnswersGrowTheWindowByHalfASpanUntilTheFirstQueue() {
        var limit = InFlightLimit(floor: 16, ceiling: 1024, start: 256)
        var now = 0.0
        // FCM answering in 100 ms, 1,000 answers a second: 256, 384, 576, 864, 1,024.
        while now < 0.45 {
            now += 0.001
            limit.answered(after: 0.1, now: now)
        }
        #expect(limit.window == 1024, "\(limit.window) after 0.45 s of steady answers")
        // A queue (answers three times the base) ends the start: later growth is by the square root.
        while now < 0.8 {
            now += 0.001
            limit.answered(after: 0.3, now: now)
        }
        #expect(!limit.startingUp)
        let shrunk = limit.window
        #expect(shrunk < 1024)
        var spans = 0
        var before = limit.window
        while spans < 1 {
            now += 0.001
            if limit.answered(after: 0.1, now: now) || limit.window != before { spans += 1 }
            before = limit.window
        }
        #expect(limit.window <= shrunk + Int(Double(shrunk).squareRoot()) + 1, "grew from \(shrunk) to \(limit.window) in one span")
    }

    @Test func farFromFCMTheWindowAllowsHalfTheBaseOfQueueing() {
        // FCM 100 ms away: answers 48 ms over the quickest (more than 35 ms, less than half of
        // 100 ms) are its own spread, not a queue, so the window keeps growing; near FCM the
        // same 70 ms over a 10 ms base is a queue, and a 100 ms FCM answering in 200 ms is too.
        var far = InFlightLimit(floor: 16, ceiling: 1024, start: 256)
        var near = InFlightLimit(floor: 16, ceiling: 1024, start: 256)
        var now = 0.0
        while now < 2 {
            now += 0.001
            far.answered(after: Int(now * 1000) % 10 == 0 ? 0.1 : 0.148, now: now)
            near.answered(after: Int(now * 1000) % 10 == 0 ? 0.01 : 0.08, now: now)
        }
        #expect(far.window > 512, "a 100 ms FCM answering in 148 ms: window \(far.window)")
        #expect(near.window < 256, "a 10 ms FCM answering in 80 ms is queueing: window \(near.window)")
        var slowing = InFlightLimit(floor: 16, ceiling: 1024, start: 512)
        now = 0
        while now < 1 {
            now += 0.001
            slowing.answered(after: Int(now * 1000) % 10 == 0 ? 0.1 : 0.2, now: now)
        }
        #expect(slowing.window < 256, "a 100 ms FCM answering in 200 ms: window \(slowing.window)")
    }

    @Test func theMachineStartsTheWindowAt256UnderTheCeiling() {
        let machine = SenderMachine(settings: SenderMachine.Settings(concurrency: 1024), project: "p")
        #expect(machine.window == 256)
        #expect(SenderMachine(settings: SenderMachine.Settings(concurrency: 100), project: "p").window == 100)
        #expect(SenderMachine(settings: SenderMachine.Settings(concurrency: 1024, adaptive: false), project: "p").window == 1024)
    }
}

/// FCM's minute as it documents it: past the quota every send is refused until the quota is
/// refilled in the following minute. The sender tells a spent window from a quota it paces
/// under, holds the project's sends, probes, and paces again once a probe is accepted.
extension SenderMachineTests {
    static let minuteQuota = ProjectQuotaStatement.perSecond(100, window: 60)
    static let delivered = SendClassification.delivered(name: "projects/p/messages/1")

    /// The outcome of `job` answered with FCM's production quota answer (100/s stated).
    static func refuse(_ machine: inout SenderMachine, _ id: Int, sent: Double, answered: Double) -> JobOutcome? {
        guard case .outcome(let outcome) = machine.answered(answer(job(id, token: "t\(id)"), productionQuota, at: sent, stated: minuteQuota),
                                                            now: answered) else { return nil }
        return outcome
    }

    static func accept(_ machine: inout SenderMachine, _ id: Int, sent: Double, answered: Double) {
        _ = machine.answered(answer(job(id, token: "t\(id)"), delivered, at: sent), now: answered)
    }

    /// What the machine told the store thread about the quota window.
    static func tells(_ effects: [SenderMachine.Effect]) -> [SenderEvent] {
        effects.compactMap {
            switch $0 {
            case .tell(let event):
                switch event {
                case .quotaWindowSpent, .quotaWindowRenewed: event
                default: nil
                }
            default: nil
            }
        }
    }

    @Test func aSpentWindowIsHeldForEveryPoolProbedAndPacedAgainOnceAProbeIsAccepted() throws {
        var machine = machine()
        let t0 = Self.t0
        // The window is spent at t0: the first refusal states the limit, and the pool's rate is
        // set from it; the messages refused back off from a minute.
        let first = try #require(Self.refuse(&machine, 1, sent: t0 - 0.01, answered: t0))
        guard case .snoozed(_, let firstDelay, _, _) = first.action else { Issue.record("\(first)"); return }
        #expect(firstDelay >= 60)
        #expect(machine.takeEffects().contains(.tell(.projectQuota(accepted: nil, proven: nil, stated: 100))))
        // What was claimed or in flight at the old rate is refused within the next second: not
        // yet a sign of anything, whatever their number.
        for id in 2...40 { _ = Self.refuse(&machine, id, sent: t0 + Double(id) * 0.02, answered: t0 + Double(id) * 0.02 + 0.01) }
        #expect(Self.tells(machine.takeEffects()).isEmpty)
        #expect(!machine.quotaWindow.isHeld(at: t0 + 1))
        // Sends paced at the stated limit are refused too, every one: the window is spent.
        for id in 41...44 { _ = Self.refuse(&machine, id, sent: t0 + 1 + Double(id - 40) * 0.01, answered: t0 + 1.1) }
        #expect(Self.tells(machine.takeEffects()).isEmpty, "four refusals in a row hold nothing yet")
        let fifth = try #require(Self.refuse(&machine, 45, sent: t0 + 1.05, answered: t0 + 1.1))
        let effects = machine.takeEffects()
        // Held until a minute after its first refusal at the latest (the window began before it).
        #expect(Self.tells(effects) == [.quotaWindowSpent(until: t0 + 61, seenAt: t0 + 1.05)])
        #expect(effects.contains { if case .warning(let text) = $0 { text.contains("quota window is spent") } else { false } })
        // What the spent window refused goes again once it has ended, not a minute after its
        // own refusal; no attempt is used.
        guard case .snoozed(_, let heldDelay, _, let backoff) = fifth.action else { Issue.record("\(fifth)"); return }
        #expect(heldDelay >= 61 - 1.1 && heldDelay <= 61 - 1.1 + 3.01, "\(heldDelay)")
        #expect(backoff == nil)
        // Held: one probe now and then, the other jobs back unsent (no attempt used).
        let job = Self.job(50, token: "t50")
        #expect(machine.admit(job.0, job.1, now: t0 + 1.2) == .send)
        guard case .settle(let back) = machine.admit(Self.job(51, token: "t51").0, Self.job(51, token: "t51").1, now: t0 + 1.3),
              case .released(let delay) = back.action else {
            Issue.record("a second send within half a second of a probe")
            return
        }
        #expect(delay >= 1 && back.attempt == 1)
        #expect(machine.admit(Self.job(52, token: "t52").0, Self.job(52, token: "t52").1, now: t0 + 1.8) == .send)
        // A probe refused: the hold goes on, nothing more is told.
        guard case .snoozed(_, let probeDelay, _, _)? = Self.refuse(&machine, 50, sent: t0 + 30, answered: t0 + 30.01)?.action else {
            Issue.record("the refused probe was not snoozed")
            return
        }
        #expect(probeDelay >= 61 - 30.01 && probeDelay < 61 - 30 + 3.01)
        #expect(Self.tells(machine.takeEffects()).isEmpty)
        // A send made before the hold, accepted: says nothing of the new window.
        Self.accept(&machine, 46, sent: t0 + 1.01, answered: t0 + 31)
        #expect(Self.tells(machine.takeEffects()).isEmpty)
        #expect(machine.quotaWindow.isHeld(at: t0 + 31))
        // A probe accepted: a new window; every pool paces at the stated limit again.
        Self.accept(&machine, 52, sent: t0 + 59.5, answered: t0 + 59.52)
        #expect(Self.tells(machine.takeEffects()) == [.quotaWindowRenewed(seenAt: t0 + 59.5)])
        #expect(!machine.quotaWindow.isHeld(at: t0 + 59.6))
        for id in 60...65 { #expect(machine.admit(Self.job(id, token: "t\(id)").0, Self.job(id, token: "t\(id)").1, now: t0 + 59.6) == .send) }
    }

    @Test func aQuotaRefilledContinuouslyPacedUnderIsNeverHeld() {
        var machine = machine()
        let t0 = Self.t0
        _ = Self.refuse(&machine, 1, sent: t0 - 0.01, answered: t0)
        _ = machine.takeEffects()
        // Ten seconds at 95 a second against a bucket: now and then a refusal, answered in
        // batches that mix both sides; every refusal has sends accepted around it.
        var id = 2
        for tick in 0..<950 {
            let sent = t0 + 1 + Double(tick) / 95
            if tick % 3 == 0 {
                _ = Self.refuse(&machine, id, sent: sent, answered: sent + 0.05)
            } else {
                Self.accept(&machine, id, sent: sent, answered: sent + 0.05)
            }
            id += 1
        }
        #expect(Self.tells(machine.takeEffects()).allSatisfy { if case .quotaWindowSpent = $0 { false } else { true } })
        #expect(!machine.quotaWindow.isHeld(at: t0 + 11))
        #expect(machine.admit(Self.job(id, token: "x").0, Self.job(id, token: "x").1, now: t0 + 11) == .send)
        #expect(machine.admit(Self.job(id + 1, token: "y").0, Self.job(id + 1, token: "y").1, now: t0 + 11) == .send)
    }

    @Test func refusalsAreOrderedByWhenTheirSendsWentNotWhenTheyCameBack() {
        var machine = machine()
        let t0 = Self.t0
        _ = Self.refuse(&machine, 1, sent: t0 - 0.01, answered: t0)
        _ = machine.takeEffects()
        // Four refusals of sends made at t0 + 2.00 to 2.03, then the acceptance of one made at
        // 2.02 that came back last: FCM accepted a send made among them, so no window was spent.
        for id in 2...5 { _ = Self.refuse(&machine, id, sent: t0 + 2 + Double(id - 2) * 0.01, answered: t0 + 2.1) }
        Self.accept(&machine, 6, sent: t0 + 2.02, answered: t0 + 2.2)
        _ = Self.refuse(&machine, 7, sent: t0 + 2.04, answered: t0 + 2.2)
        #expect(Self.tells(machine.takeEffects()).isEmpty)
        #expect(!machine.quotaWindow.isHeld(at: t0 + 2.2))
        // But five in a row, all sent after the last accepted send, are.
        for id in 8...11 { _ = Self.refuse(&machine, id, sent: t0 + 2.05 + Double(id - 8) * 0.01, answered: t0 + 2.3) }
        #expect(machine.quotaWindow.isHeld(at: t0 + 2.3))
    }

    @Test func aHoldNoProbeEndsRunsOutAndTheNextRunHoldsAWholeWindow() {
        var machine = machine()
        let t0 = Self.t0
        _ = Self.refuse(&machine, 1, sent: t0 - 0.01, answered: t0)
        for id in 2...6 { _ = Self.refuse(&machine, id, sent: t0 + 1.5, answered: t0 + 1.6) }
        #expect(Self.tells(machine.takeEffects()).contains(.quotaWindowSpent(until: t0 + 61, seenAt: t0 + 1.5)))
        // Nothing accepted: the hold ends at its end, and sends go out at the pace again.
        for id in 10...13 { #expect(machine.admit(Self.job(id, token: "t\(id)").0, Self.job(id, token: "t\(id)").1, now: t0 + 61.1) == .send) }
        // Refused still (a quota counted over longer than a minute): held again, a whole window on.
        for id in 20...24 { _ = Self.refuse(&machine, id, sent: t0 + 61.2, answered: t0 + 61.3) }
        #expect(Self.tells(machine.takeEffects()) == [.quotaWindowSpent(until: t0 + 61.3 + 60 + 1, seenAt: t0 + 61.2)])
    }
}
