import Queue
import Testing
@testable import Worker

/// The store thread's decisions, driven with a clock of the test's own: no database, no sleep.
@Suite struct StoreMachineTests {
    static let settings = StoreMachine.Settings(concurrency: 100, batch: 40, leaseSeconds: 60, pollInterval: 1,
                                                shutdownTimeout: 30, drain: false)
    let t0 = 1_000_000.0

    func jobs(_ ids: ClosedRange<Int>, attempt: Int = 1) -> [ClaimedJob] {
        ids.map { ClaimedJob(id: $0, message: Array(#"{"token":"t"}"#.utf8), attempt: attempt) }
    }

    /// A machine past its start-up: first maintenance pass done, first promotion done (nothing
    /// scheduled), first claim done (empty), now waiting.
    func idle(_ settings: StoreMachine.Settings = StoreMachineTests.settings) -> StoreMachine {
        var machine = StoreMachine(settings: settings, now: t0)
        #expect(machine.next(now: t0) == .maintain)
        machine.maintained(now: t0)
        #expect(machine.next(now: t0) == .promote(limit: 10_000))
        machine.promoted(Promotion(promoted: 0, nextDueIn: nil), now: t0)
        #expect(machine.next(now: t0) == .claim(limit: 40))
        machine.claimed([], limit: 40, now: t0)
        return machine
    }

    // MARK: Running

    @Test func startsByMaintainingPromotingAndClaimingThenWaitsForThePoll() {
        var machine = idle()
        #expect(machine.next(now: t0) == .wait(until: t0 + 1), "nothing to do until the poll interval")
        #expect(machine.next(now: t0 + 1) == .promote(limit: 10_000), "the poll promotes, then claims")
        machine.promoted(Promotion(promoted: 0, nextDueIn: nil), now: t0 + 1)
        #expect(machine.next(now: t0 + 1) == .claim(limit: 40))
    }

    @Test func aFullClaimIsFollowedByAnotherWhileTheSenderHasRoom() {
        var machine = idle()
        machine.notified(now: t0)
        #expect(machine.next(now: t0) == .promote(limit: 10_000))
        machine.promoted(Promotion(promoted: 0, nextDueIn: nil), now: t0)
        #expect(machine.next(now: t0) == .claim(limit: 40))
        machine.claimed(jobs(1...40), limit: 40, now: t0)
        #expect(machine.next(now: t0) == .claim(limit: 40), "a full batch: probably more")
        machine.claimed(jobs(41...80), limit: 40, now: t0)
        #expect(machine.next(now: t0) == .claim(limit: 20), "only the room left")
        machine.claimed(jobs(81...100), limit: 20, now: t0)
        guard case .wait = machine.next(now: t0) else { Issue.record("no room: wait"); return }
        // Five answers back: still less room than a quarter batch, so no claim of five jobs.
        machine.received([.outcomes((1...5).map { JobOutcome(id: $0, attempt: 1, .completed(messageName: "n")) })], now: t0)
        #expect(machine.next(now: t0) == .record((1...5).map { JobOutcome(id: $0, attempt: 1, .completed(messageName: "n")) }))
        machine.recorded(count: 5)
        guard case .wait = machine.next(now: t0) else { Issue.record("five free of 100: wait for more room"); return }
        machine.received([.outcomes((6...10).map { JobOutcome(id: $0, attempt: 1, .completed(messageName: "n")) })], now: t0)
        _ = machine.next(now: t0)
        machine.recorded(count: 5)
        #expect(machine.next(now: t0) == .claim(limit: 10), "ten free is a quarter batch")
    }

    @Test func aPartialClaimWaitsForANotification() {
        var machine = idle()
        machine.notified(now: t0)
        _ = machine.next(now: t0)
        machine.promoted(Promotion(promoted: 0, nextDueIn: nil), now: t0)
        _ = machine.next(now: t0)
        machine.claimed(jobs(1...3), limit: 40, now: t0)
        #expect(machine.next(now: t0 + 0.1) == .wait(until: t0 + 1))
        machine.notified(now: t0 + 0.2)
        #expect(machine.next(now: t0 + 0.2) == .promote(limit: 10_000), "jobs were inserted: promote, then claim")
        machine.promoted(Promotion(promoted: 0, nextDueIn: nil), now: t0 + 0.2)
        #expect(machine.next(now: t0 + 0.2) == .claim(limit: 40))
    }

    @Test func outcomesAreRecordedAndTheirLeasesLetGo() {
        var machine = idle()
        machine.notified(now: t0)
        _ = machine.next(now: t0); machine.promoted(Promotion(promoted: 0, nextDueIn: nil), now: t0)
        _ = machine.next(now: t0); machine.claimed(jobs(1...2), limit: 40, now: t0)
        #expect(machine.outstanding == 2 && machine.leases.count == 2)
        let outcomes = [JobOutcome(id: 1, attempt: 1, .completed(messageName: "a")), JobOutcome(id: 2, attempt: 1, .dead(reason: "x"))]
        machine.received([.outcomes(outcomes)], now: t0 + 0.01)
        #expect(machine.next(now: t0 + 0.01) == .record(outcomes))
        // Not recorded yet (say PostgreSQL failed): asked again, nothing lost.
        #expect(machine.next(now: t0 + 0.02) == .record(outcomes))
        machine.recorded(count: 2)
        #expect(machine.outstanding == 0 && machine.leases.count == 0 && machine.pending.isEmpty)
    }

    @Test func aRefusedBatchIsRecordedOneByOneAndARefusedOutcomeBecomesARetry() {
        var machine = idle()
        machine.notified(now: t0)
        _ = machine.next(now: t0); machine.promoted(Promotion(promoted: 0, nextDueIn: nil), now: t0)
        _ = machine.next(now: t0); machine.claimed(jobs(1...3), limit: 40, now: t0)
        let outcomes = (1...3).map { JobOutcome(id: $0, attempt: 1, .completed(messageName: "n\($0)")) }
        machine.received([.outcomes(outcomes)], now: t0)
        #expect(machine.next(now: t0) == .record(outcomes))
        // PostgreSQL refuses the batch (one of its outcomes is bad): one at a time.
        #expect(machine.recordRefused(outcomes, code: "22P02", now: t0) == .oneByOne(count: 3))
        #expect(machine.next(now: t0) == .record([outcomes[0]]))
        machine.recorded(count: 1)
        #expect(machine.next(now: t0) == .record([outcomes[1]]))
        // The second is the bad one: a retry in a minute stands in for it, recorded on its own.
        let refusal = machine.recordRefused([outcomes[1]], code: "22P02", now: t0)
        let standIn = JobOutcome(id: 2, attempt: 1, .retry(
            error: "herald could not record this job's outcome (22P02); sending it again", delay: 60))
        #expect(refusal == .replaced(outcomes[1], by: standIn))
        #expect(machine.next(now: t0) == .record([standIn]))
        machine.recorded(count: 1)
        #expect(machine.next(now: t0) == .record([outcomes[2]]))
        machine.recorded(count: 1)
        #expect(machine.pending.isEmpty && machine.leases.count == 0)

        // Outcomes that arrive later are recorded as a batch again.
        _ = machine.next(now: t0); machine.claimed(jobs(4...5), limit: 40, now: t0)
        let later = (4...5).map { JobOutcome(id: $0, attempt: 1, .completed(messageName: nil)) }
        machine.received([.outcomes(later)], now: t0)
        #expect(machine.next(now: t0) == .record(later))
    }

    @Test func aRefusedStandInIsGivenUpAndItsLeaseLeftToRunOut() {
        var machine = idle()
        machine.notified(now: t0)
        _ = machine.next(now: t0); machine.promoted(Promotion(promoted: 0, nextDueIn: nil), now: t0)
        _ = machine.next(now: t0); machine.claimed(jobs(7...7), limit: 40, now: t0)
        let outcome = JobOutcome(id: 7, attempt: 1, .dead(reason: "x"))
        machine.received([.outcomes([outcome])], now: t0)
        guard case .replaced(_, let standIn) = machine.recordRefused([outcome], code: nil, now: t0) else {
            Issue.record("a refused outcome is replaced by a retry"); return
        }
        #expect(machine.next(now: t0) == .record([standIn]))
        #expect(machine.recordRefused([standIn], code: nil, now: t0) == .givenUp(standIn))
        #expect(machine.pending.isEmpty, "nothing left to record")
        #expect(machine.leases.count == 0, "no heartbeat keeps its lease: the job comes back when it runs out")
        guard case .wait = machine.next(now: t0) else { Issue.record("nothing to do"); return }
    }

    @Test func newJobsAreClaimedWithWhateverRoomThereIs() {
        var machine = idle()
        machine.notified(now: t0)
        _ = machine.next(now: t0); machine.promoted(Promotion(promoted: 0, nextDueIn: nil), now: t0)
        _ = machine.next(now: t0); machine.claimed(jobs(1...40), limit: 40, now: t0)
        _ = machine.next(now: t0); machine.claimed(jobs(41...80), limit: 40, now: t0)
        _ = machine.next(now: t0); machine.claimed(jobs(81...95), limit: 20, now: t0)
        guard case .wait = machine.next(now: t0) else { Issue.record("five free of 100: no claim for a backlog"); return }
        // A one-time code arrives: it may not wait for a quarter batch of answers.
        machine.notified(now: t0 + 0.01)
        #expect(machine.next(now: t0 + 0.01) == .promote(limit: 10_000))
        machine.promoted(Promotion(promoted: 0, nextDueIn: nil), now: t0 + 0.01)
        #expect(machine.next(now: t0 + 0.01) == .claim(limit: 5))
    }

    @Test func aClaimHeldBackByARateLimitComesBackWhenTheLimitAllows() {
        var machine = idle()
        machine.notified(now: t0)
        _ = machine.next(now: t0); machine.promoted(Promotion(promoted: 0, nextDueIn: nil), now: t0)
        _ = machine.next(now: t0); machine.claimed(jobs(1...7), limit: 40, heldBackFor: 0.05, now: t0)
        #expect(machine.next(now: t0 + 0.01) == .wait(until: t0 + 0.05), "more jobs wait for the rate, not for the poll")
        #expect(machine.next(now: t0 + 0.05) == .claim(limit: 40))
    }

    @Test func newJobsAreClaimedAtOnceWhileARateLimitHoldsOthersBack() {
        var machine = idle()
        machine.notified(now: t0)
        _ = machine.next(now: t0); machine.promoted(Promotion(promoted: 0, nextDueIn: nil), now: t0)
        // A campaign's rate (or another project's) holds its jobs back for a second.
        _ = machine.next(now: t0); machine.claimed(jobs(1...7), limit: 40, heldBackFor: 1, now: t0)
        #expect(machine.next(now: t0 + 0.01) == .wait(until: t0 + 1))
        // A one-time code of another queue arrives: claimed now, not after the campaign's second.
        machine.notified(now: t0 + 0.02)
        #expect(machine.next(now: t0 + 0.02) == .promote(limit: 10_000))
        machine.promoted(Promotion(promoted: 0, nextDueIn: nil), now: t0 + 0.02)
        #expect(machine.next(now: t0 + 0.02) == .claim(limit: 40))
    }

    // MARK: Time

    @Test func aRetryIsADueTimeTheWorkerKnowsWithoutAsking() {
        var machine = idle()
        machine.notified(now: t0)
        _ = machine.next(now: t0); machine.promoted(Promotion(promoted: 0, nextDueIn: nil), now: t0)
        _ = machine.next(now: t0); machine.claimed(jobs(1...1), limit: 40, now: t0)
        machine.received([.outcomes([JobOutcome(id: 1, attempt: 1, .retry(error: "INTERNAL", delay: 0.3))])], now: t0 + 0.01)
        _ = machine.next(now: t0 + 0.01)
        machine.recorded(count: 1)
        #expect(machine.next(now: t0 + 0.02) == .wait(until: t0 + 0.31), "wakes when the retry is due, not at the poll")
        #expect(machine.next(now: t0 + 0.31) == .promote(limit: 10_000))
        machine.promoted(Promotion(promoted: 1, nextDueIn: nil), now: t0 + 0.31)
        #expect(machine.next(now: t0 + 0.31) == .claim(limit: 40))
    }

    @Test func theNextScheduledJobTheDatabaseReportsSetsTheTimer() {
        var machine = idle()
        machine.notified(now: t0)
        _ = machine.next(now: t0)
        machine.promoted(Promotion(promoted: 0, nextDueIn: 0.25), now: t0)
        _ = machine.next(now: t0); machine.claimed([], limit: 40, now: t0)
        #expect(machine.next(now: t0) == .wait(until: t0 + 0.25))
        #expect(machine.next(now: t0 + 0.25) == .promote(limit: 10_000))
        // Far ahead: the poll comes first.
        machine.promoted(Promotion(promoted: 1, nextDueIn: 86_400), now: t0 + 0.25)
        _ = machine.next(now: t0 + 0.25); machine.claimed(jobs(1...1), limit: 40, now: t0 + 0.25)
        #expect(machine.next(now: t0 + 0.3) == .wait(until: t0 + 1.25))
    }

    @Test func aPromotionThatHitItsLimitPromotesAgainAtOnce() {
        var machine = idle()
        machine.notified(now: t0)
        _ = machine.next(now: t0)
        machine.promoted(Promotion(promoted: 10_000, nextDueIn: nil), now: t0)
        #expect(machine.next(now: t0) == .promote(limit: 10_000))
    }

    // MARK: Leases and maintenance

    @Test func leasesHeldForAThirdOfTheirLengthAreExtended() {
        var settings = Self.settings
        settings.pollInterval = 1000  // keep the poll out of the way
        var machine = idle(settings)
        machine.notified(now: t0)
        _ = machine.next(now: t0); machine.promoted(Promotion(promoted: 0, nextDueIn: nil), now: t0)
        _ = machine.next(now: t0); machine.claimed(jobs(1...3), limit: 40, now: t0)
        // Heartbeat every 15 s (a quarter lease); a lease is extended after 20 s (a third).
        #expect(machine.next(now: t0 + 15) == .maintain)
        machine.maintained(now: t0 + 15)
        guard case .wait = machine.next(now: t0 + 15) else { Issue.record("15 s: nothing to extend yet"); return }
        _ = machine.next(now: t0 + 30) // maintenance again
        machine.maintained(now: t0 + 30)
        #expect(machine.next(now: t0 + 30) == .extendLeases([1, 2, 3]))
        machine.leasesExtended([1, 2, 3], now: t0 + 30)
        #expect(machine.leases.due(now: t0 + 31).isEmpty)
    }

    @Test func leadershipWaitsOneLeaseBeforeRescuingAndIsLostWithTheConnection() {
        var leadership = Leadership(grace: 60, ttl: 15, margin: 5)
        #expect(!leadership.mayRescue(now: t0))
        leadership.acquired(now: t0)
        for second in stride(from: 5.0, through: 55, by: 5) { leadership.acquired(now: t0 + second) }
        #expect(!leadership.mayRescue(now: t0 + 59))
        leadership.acquired(now: t0 + 60)
        #expect(leadership.mayRescue(now: t0 + 60))
        leadership.acquired(now: t0 + 100)
        #expect(leadership.since == t0, "renewing the lease does not restart the grace")
        leadership.lost()
        leadership.acquired(now: t0 + 200)
        #expect(!leadership.mayRescue(now: t0 + 230), "a new leader after an outage waits again")
    }

    @Test func aLeaderThatCannotRenewStopsActingBeforeItsLeaseEnds() {
        var leadership = Leadership(grace: 0, ttl: 15, margin: 5)
        leadership.acquired(now: t0)
        #expect(leadership.mayRescue(now: t0 + 9.9))
        // Not renewed since t0: its lease ends at t0 + 15 by the database's clock; it stops at t0 + 10.
        #expect(!leadership.holds(now: t0 + 10) && !leadership.mayRescue(now: t0 + 10))
        #expect(leadership.isLeader, "it has not learnt that another took over; it only stops acting")
        leadership.acquired(now: t0 + 12)
        #expect(leadership.mayRescue(now: t0 + 12), "a renewal in time makes it act again")
    }

    @Test func aJobIsSentOnlyWhileItsLeaseIsProven() {
        let book = LeaseBook(leaseSeconds: 10)
        #expect(book.margin == 2.5)
        book.held([1, 2], sentAt: t0, leaseSeconds: 10)
        #expect(book.maySend(1, now: t0 + 7.4))
        #expect(!book.maySend(1, now: t0 + 7.6), "less than a quarter lease left: not sent")
        // An extension sent at t0 + 5 proves job 1 until t0 + 15; job 2 was not extended.
        book.held([1, 3], sentAt: t0 + 5, leaseSeconds: 10, onlyKnown: true)
        #expect(book.maySend(1, now: t0 + 12) && !book.maySend(2, now: t0 + 12))
        #expect(!book.maySend(3, now: t0 + 6), "an extension does not make a job this worker's")
        book.settled([1])
        #expect(!book.maySend(1, now: t0 + 6), "a recorded job is not sent again")
    }

    @Test func heartbeatForgetsSettledJobs() {
        var heartbeat = LeaseHeartbeat(leaseSeconds: 30)
        heartbeat.claimed([1, 2], now: t0)
        heartbeat.settled([1])
        #expect(heartbeat.due(now: t0 + 10) == [2])
        heartbeat.extended([1, 2], now: t0 + 10)
        #expect(heartbeat.count == 1 && heartbeat.due(now: t0 + 19).isEmpty)
    }

    // MARK: Quota pause

    @Test func aQuotaPauseIsPublishedOnceAndHoldsBackClaims() {
        var machine = idle()
        machine.received([.projectPaused(until: t0 + 60)], now: t0)
        #expect(machine.next(now: t0) == .publishProjectPause(until: t0 + 60))
        machine.projectPausePublished(until: t0 + 60)
        machine.notified(now: t0 + 1)
        #expect(machine.next(now: t0 + 1) == .promote(limit: 10_000))
        machine.promoted(Promotion(promoted: 0, nextDueIn: nil), now: t0 + 1)
        #expect(machine.next(now: t0 + 1) == .wait(until: t0 + 2), "no claim while paused")
        machine.received([.projectPaused(until: t0 + 60.01)], now: t0 + 1.5)
        guard case .wait = machine.next(now: t0 + 1.5) else { Issue.record("a pause barely longer is not published again"); return }
        // A longer one is: FCM counts its Retry-After from its latest answer.
        machine.received([.projectPaused(until: t0 + 60.2)], now: t0 + 1.6)
        #expect(machine.next(now: t0 + 1.6) == .publishProjectPause(until: t0 + 60.2))
        machine.projectPausePublished(until: t0 + 60.2)
        #expect(machine.next(now: t0 + 60.3) == .maintain)
        machine.maintained(now: t0 + 60.3)
        #expect(machine.next(now: t0 + 60.3) == .promote(limit: 10_000))
        machine.promoted(Promotion(promoted: 0, nextDueIn: nil), now: t0 + 60.3)
        #expect(machine.next(now: t0 + 60.3) == .claim(limit: 40), "claims resume when the pause ends")
    }

    @Test func anOutagePauseIsPublishedWithItsOwnReasonAndExtendedProbeByProbe() {
        var machine = idle()
        machine.received([.projectPaused(until: t0 + 1, reason: "FCM_UNREACHABLE (CONNECTION)")], now: t0)
        #expect(machine.next(now: t0) == .publishProjectPause(until: t0 + 1))
        #expect(machine.projectPauseReason == "FCM_UNREACHABLE (CONNECTION)", "herald.project_pauses says why, not QUOTA_EXCEEDED")
        machine.projectPausePublished(until: t0 + 1)
        // A failed probe holds back longer: the longer pause is published too.
        machine.received([.projectPaused(until: t0 + 2.5, reason: "FCM_UNREACHABLE (probe: CONNECTION)")], now: t0 + 1)
        #expect(machine.next(now: t0 + 1) == .publishProjectPause(until: t0 + 2.5))
        machine.projectPausePublished(until: t0 + 2.5)
        machine.received([.projectPaused(until: t0 + 70)], now: t0 + 2)
        #expect(machine.projectPauseReason == "QUOTA_EXCEEDED")
    }

    // MARK: Stopping

    @Test func aStopRecordsWhatComesBackAndExitsOnceTheSenderHasFinished() {
        var machine = idle()
        machine.notified(now: t0)
        _ = machine.next(now: t0); machine.promoted(Promotion(promoted: 0, nextDueIn: nil), now: t0)
        _ = machine.next(now: t0); machine.claimed(jobs(1...4), limit: 40, now: t0)
        machine.stopRequested(now: t0 + 1)
        #expect(machine.phase == .stopping(since: t0 + 1))
        machine.notified(now: t0 + 1)
        guard case .wait = machine.next(now: t0 + 1) else { Issue.record("no claim, no promotion while stopping"); return }
        machine.received([.outcomes([JobOutcome(id: 1, attempt: 1, .completed(messageName: "a"))]), .finished], now: t0 + 2)
        // Jobs 2 and 3 were handed over but never taken by the sender: back, uncounted.
        machine.unsent(jobs(2...3))
        #expect(machine.next(now: t0 + 2) == .record([JobOutcome(id: 1, attempt: 1, .completed(messageName: "a")),
                                                      JobOutcome(id: 2, attempt: 1, .released()),
                                                      JobOutcome(id: 3, attempt: 1, .released())]))
        machine.recorded(count: 3)
        guard case .wait = machine.next(now: t0 + 2) else { Issue.record("job 4 is still out"); return }
        machine.received([.outcomes([JobOutcome(id: 4, attempt: 1, .released())])], now: t0 + 3)
        _ = machine.next(now: t0 + 3)
        machine.recorded(count: 1)
        #expect(machine.next(now: t0 + 3) == .exit(status: 0))
        #expect(machine.next(now: t0 + 4) == .exit(status: 0))
    }

    @Test func aDrainStopsOnceNothingIsLeftAnywhere() {
        var settings = Self.settings
        settings.drain = true
        var machine = StoreMachine(settings: settings, now: t0)
        _ = machine.next(now: t0); machine.maintained(now: t0)
        _ = machine.next(now: t0); machine.promoted(Promotion(promoted: 0, nextDueIn: nil), now: t0)
        _ = machine.next(now: t0); machine.claimed([], limit: 40, now: t0)
        #expect(machine.next(now: t0) == .checkDrained)
        machine.drainChecked(workLeft: true, now: t0)
        #expect(machine.next(now: t0) == .wait(until: t0 + 1), "scheduled jobs are left: keep going")
        _ = machine.next(now: t0 + 1); machine.promoted(Promotion(promoted: 0, nextDueIn: nil), now: t0 + 1)
        _ = machine.next(now: t0 + 1); machine.claimed([], limit: 40, now: t0 + 1)
        #expect(machine.next(now: t0 + 1) == .checkDrained)
        machine.drainChecked(workLeft: false, now: t0 + 1)
        #expect(machine.phase == .drained)
        #expect(machine.next(now: t0 + 1) == .stopSender)
        machine.senderStopRequested(now: t0 + 1)
        machine.received([.finished], now: t0 + 1.1)
        #expect(machine.next(now: t0 + 1.1) == .exit(status: 0))
    }

    // MARK: The database

    @Test func aLostConnectionIsRetriedWithGrowingDelaysAndResumesWork() {
        var machine = idle()
        machine.connectionLost(now: t0)
        #expect(machine.next(now: t0) == .wait(until: t0 + 0.5))
        #expect(machine.next(now: t0 + 0.5) == .reconnect)
        machine.reconnectFailed(now: t0 + 0.5)
        #expect(machine.next(now: t0 + 0.6) == .wait(until: t0 + 1.5))
        var now = t0 + 1.5
        for _ in 0..<6 {
            _ = machine.next(now: now)
            machine.reconnectFailed(now: now)
            guard case .down(let retryAt, let delay) = machine.database else { Issue.record("still down"); return }
            #expect(delay <= 10)
            now = retryAt
        }
        #expect(machine.database == .down(retryAt: now, delay: 10), "the delay stops growing at 10 s")
        // Outcomes that arrive meanwhile wait for the database.
        machine.received([.outcomes([JobOutcome(id: 9, attempt: 2, .completed(messageName: "z"))])], now: now)
        #expect(machine.next(now: now) == .reconnect)
        machine.reconnected(now: now)
        #expect(machine.next(now: now) == .record([JobOutcome(id: 9, attempt: 2, .completed(messageName: "z"))]))
        machine.recorded(count: 1)
        #expect(machine.next(now: now) == .maintain, "a new connection runs maintenance (and may lead) again")
        machine.maintained(now: now)
        #expect(machine.next(now: now) == .promote(limit: 10_000))
    }

    @Test func stoppingWithTheDatabaseDownGivesUpAfterTheShutdownTimeout() {
        var machine = idle()
        machine.received([.outcomes([JobOutcome(id: 1, attempt: 1, .completed(messageName: "a"))])], now: t0)
        machine.connectionLost(now: t0)
        machine.stopRequested(now: t0)
        machine.received([.finished], now: t0)
        #expect(machine.next(now: t0 + 0.5) == .reconnect)
        machine.reconnectFailed(now: t0 + 0.5)
        #expect(machine.next(now: t0 + 30) == .exit(status: 1), "the outcomes cannot be recorded; their leases bring the jobs back")
    }

    @Test func aStatementThatFailsOnAHealthyConnectionPausesClaimsBriefly() {
        var machine = idle()
        machine.notified(now: t0)
        machine.statementFailed(now: t0)
        #expect(machine.next(now: t0) == .wait(until: t0 + 0.2))
        #expect(machine.next(now: t0 + 0.2) == .promote(limit: 10_000))
    }

    /// A drain leaves a paused entry's due jobs waiting, and its last line says whose they are
    /// (an app paused by Apple's refusal would otherwise look like a queue that is empty).
    @Test func theDrainsLastLineNamesThePausedEntriesHoldingDueJobs() {
        var work = Claimer.PendingWork(due: false)
        #expect(StoreLoop.drainedMessage(work, horizon: 60) == "drained: no job available, running or due within 1m00s left")
        work.paused = ["bad-team", "bad-topic"]
        #expect(StoreLoop.drainedMessage(work, horizon: 60)
                == "drained: no job available, running or due within 1m00s left; due jobs of paused bad-team, bad-topic wait (herald stats says why; resume them to send)")
    }
}

extension StoreMachineTests {
    @Test func aSpentQuotaWindowIsWrittenAfterTheOutcomesAndItsEndLetsTheClaimsGoAtOnce() {
        var machine = idle()
        let refused = JobOutcome(id: 1, attempt: 1, .snoozed(error: "QUOTA_EXCEEDED", delay: 60, cap: 20))
        // Two findings of the same kind in a row: the latest is written, once.
        machine.received([.outcomes([refused]), .quotaWindowSpent(until: t0 + 60, seenAt: t0 - 1),
                          .quotaWindowSpent(until: t0 + 61, seenAt: t0 - 0.5)], now: t0)
        #expect(machine.next(now: t0) == .record([refused]), "the outcomes first, as for a pause")
        machine.recorded(count: 1)
        #expect(machine.next(now: t0) == .holdQuotaWindow(until: t0 + 61, seenAt: t0 - 0.5))
        machine.quotaWindowWritten()
        // The probes' one a second holds the next claims back.
        machine.notified(now: t0)
        _ = machine.next(now: t0)
        machine.promoted(Promotion(promoted: 0, nextDueIn: nil), now: t0)
        #expect(machine.next(now: t0) == .claim(limit: 40))
        machine.claimed(jobs(2...2), limit: 40, heldBackFor: 0.9, now: t0)
        guard case .wait = machine.next(now: t0 + 0.1) else { Issue.record("claimed within the probes' second"); return }
        // A probe accepted: the end is written, and the claims go at once at the paced rate.
        machine.received([.quotaWindowRenewed(seenAt: t0 + 0.05)], now: t0 + 0.1)
        #expect(machine.next(now: t0 + 0.1) == .endQuotaWindowHold(seenAt: t0 + 0.05))
        machine.quotaWindowWritten()
        #expect(machine.next(now: t0 + 0.1) == .claim(limit: 40))
    }
}
