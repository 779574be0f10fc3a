import FCM
import HTTPClient
import Queue

/// The sender thread's decisions, without I/O, as `StoreMachine` is the store thread's: whether
/// a job taken from the inbox goes out, what becomes of a job once FCM answered (or did not), the
/// project's pause, the outage circuit, the devices and topics backing off, and the window of
/// requests in flight. Events come in (a job arrives, an answer, a probe's fate, the clock), and
/// what to carry out comes back: an admission or an outcome, plus `effects` (tell the store
/// thread, log, count) which the sender drains after each call. Time and randomness are passed
/// in, so unit tests drive it with a clock of their own, no socket and no sleep.
///
/// The rules (docs/fcm-limits.md):
/// - a device's or topic's limit holds that target back in this process, and the job's own
///   delay grows with its durable count of quota answers (`Backoff`, herald.jobs.snoozes), so the
///   backoff holds whichever process claims it next;
/// - the project's limit without Retry-After (FCM's production answer): no pause; the project's
///   rate drops (to the stated limit's share at once when the answer states one), the refused
///   message backs off from a minute (doubling with its snoozes, jitter on top), everything else
///   goes on at the rate;
/// - such answers still coming while every pool paces at the stated limit: the quota's window is
///   spent (`QuotaWindowWatch`): every pool holds the project's sends, probing about one message a
///   second, until a probe is accepted (a new window), then paces at the stated limit again;
/// - the project's limit with Retry-After: nothing is sent before it (a pause, shared by every
///   pool), and the rate drops;
/// - FCM not answering at all opens the circuit: a pause, probes, jobs put back unused.
struct SenderMachine {
    struct Settings: Sendable {
        var policy = RetryPolicy()
        /// Processes of the pool (what one process sees accepted is scaled by it).
        var poolProcesses = 1
        var concurrency = WorkerConfiguration.defaultConcurrency
        var minConcurrency = 16
        /// Adapt the window to FCM's answer times; false: always `concurrency`.
        var adaptive = true
        /// Where the adaptive window starts; it grows from there while FCM answers steadily.
        var startWindow = 256
        /// A project quota answer's report to the store thread (a lowering of the rate) comes at
        /// most this often without a pause.
        var reportInterval = 1.0
        /// An answer Herald cannot fully read is logged at most this often.
        var oddityLogInterval = 60.0
        /// Nothing but unprocessed streams (refused, or left out by a GOAWAY) for this long, no
        /// HTTP answer among them: taken as an outage, each such request a lost answer.
        var unprocessedOutage = 10.0
        /// When the project's quota window is taken for spent, and how it is probed.
        var quotaWindow = QuotaWindowWatch.Settings()
    }

    enum Admission: Equatable {
        /// Send it (the sender builds the request from the preparation).
        case send
        /// Settled without a request.
        case settle(JobOutcome)
    }

    /// One answer (or the lack of one) for a job in flight.
    struct Answer {
        var job: ClaimedJob
        var preparation: Preparation
        var reauthenticated: Bool
        var sentAt: Double
        var classification: SendClassification
        /// Why no HTTP answer came, as the HTTP client classified it; nil: FCM answered (any
        /// status).
        var failure: HTTPClientError.Kind? = nil
        /// A project quota answer's stated limit (nil: none stated).
        var stated: ProjectQuotaStatement? = nil

        /// FCM gave an HTTP answer (any status).
        var httpAnswer: Bool { failure == nil }
    }

    /// Whether a request's fate says FCM is failing for everyone, and how (for logs): nil for an
    /// HTTP answer, else the kind of failure. An HTTP answer, a 5xx included, means FCM is
    /// there: a 500 or 503 for a message is that message's, retried with its own jittered
    /// backoff (many at once must not turn into one released batch). No HTTP answer at all
    /// (refused, reset, timed out) is an outage. Left out: TLS failures (a setting to fix, not an
    /// outage) and streams FCM's front end did not process (it answered, by refusing them).
    static func outage(_ failure: HTTPClientError.Kind?) -> String? {
        guard let failure, failure != .tls, failure != .unprocessed else { return nil }
        return TransportFailure.Kind(failure).rawValue
    }

    enum Verdict: Equatable {
        case outcome(JobOutcome)
        /// 401 on the access token: renew it and send the job again (once).
        case reauthenticate
    }

    enum Effect: Equatable {
        /// Tell the store thread.
        case tell(SenderEvent)
        case warning(String)
        case info(String)
        case debug(String, job: Int, code: String)
        /// A quota answer, by the limit it was taken for (herald_fcm_quota_exceeded_total).
        case quotaAnswer(QuotaLimit)
        /// A job snoozed (herald_jobs_snoozed_total).
        case snoozed
        /// The window changed (herald_in_flight_limit).
        case window(Int)
    }

    let settings: Settings
    let project: String
    private(set) var pause = ProjectPause()
    private(set) var circuit = FCMCircuit()
    private(set) var tracker: QuotaTracker
    /// Whether the project's quota window is spent, and the hold while it is.
    private(set) var quotaWindow: QuotaWindowWatch
    private(set) var limiter: InFlightLimit?
    private var random: JitterRandom
    private(set) var effects: [Effect] = []
    /// When the last project quota answer was reported to the store thread, and the limit it
    /// stated (a new figure is reported at once).
    private var lastReport = -Double.infinity
    private var lastStated: Double?
    private var lastOddityLog = -Double.infinity
    /// When the run of unprocessed streams since the last HTTP answer began (nil: none).
    private var unprocessedSince: Double?

    init(settings: Settings, project: String, random: JitterRandom = JitterRandom()) {
        self.settings = settings
        self.project = project
        self.random = random
        tracker = QuotaTracker(policy: settings.policy)
        quotaWindow = QuotaWindowWatch(settings: settings.quotaWindow)
        if settings.adaptive {
            limiter = InFlightLimit(floor: settings.minConcurrency, ceiling: settings.concurrency, start: settings.startWindow)
        }
    }

    /// Requests in flight wanted at most now.
    var window: Int { limiter?.window ?? settings.concurrency }

    /// The effects gathered since the last call, for the sender to carry out.
    mutating func takeEffects() -> [Effect] {
        defer { effects.removeAll(keepingCapacity: true) }
        return effects
    }

    private mutating func draw() -> Double { Double.random(in: 0..<1, using: &random) }

    // MARK: Jobs arriving

    /// A job taken from the inbox, prepared: send it, or settle it now. Paused or FCM unreachable:
    /// put back unsent (no attempt used) for after the pause; a target backing off: snoozed
    /// without a request.
    mutating func admit(_ job: ClaimedJob, _ preparation: Preparation, now: Double) -> Admission {
        if pause.isPaused(at: now) || circuit.isOpen {
            return .settle(job.outcome(.released(delay: pause.releaseDelay(now: now, jitter: settings.policy.jitter, random: draw()))))
        }
        if case .settled(let outcome) = preparation { return .settle(outcome) }
        if case .send = preparation, !quotaWindow.probe(now: now) {
            // The project's quota window is spent: one probe now and then, the others back unsent
            // (no attempt used); every pool's claims come about one a second meanwhile.
            return .settle(job.outcome(.released(delay: settings.quotaWindow.probeSpacing * 2 + draw())))
        }
        guard !tracker.isEmpty, case .send(let body, let token) = preparation,
              let target = QuotaTracker.target(token: token, body: body), let remaining = tracker.held(target, now: now) else { return .send }
        let delay = remaining * (1 + settings.policy.jitter * draw())
        effects.append(.snoozed)
        return .settle(job.outcome(.snoozed(error: "QUOTA_EXCEEDED: not sent: \(Sender.describe(target)) is backing off after FCM's quota answer",
                                            delay: delay, cap: settings.policy.snoozeCap)))
    }

    // MARK: Answers

    /// A batch of answers came in: counts what FCM accepted at this moment, before any quota
    /// answer of the batch is judged.
    mutating func batchAnswered(accepted: Int, now: Double) {
        tracker.countDeliveries(accepted, now: now)
    }

    /// FCM's answer (or its absence) for a job: what becomes of the job.
    mutating func answered(_ answer: Answer, now: Double) -> Verdict {
        var outage = Self.outage(answer.failure)
        if answer.failure == .unprocessed {
            // FCM's front end did not process it (a refused stream, or one above its GOAWAY's
            // last stream): it goes again at once, the attempt not counted, and says nothing of
            // FCM's health or answer times. Unless nothing but such streams came back for
            // `unprocessedOutage` seconds: a front end (or a proxy) that processes nothing is
            // down, and each such request is then a lost answer, so a job is not sent forever
            // without using its attempts.
            let since = unprocessedSince ?? now
            unprocessedSince = since
            guard now - since >= settings.unprocessedOutage else { return .outcome(answer.job.outcome(.released())) }
            outage = "UNPROCESSED (every request for \(Self.seconds(now - since)) s ended unprocessed)"
        } else if answer.failure == nil {
            unprocessedSince = nil
        }
        circuitChanged(outage.map { _ in circuit.failed(now: now) } ?? circuit.answered(), detail: outage ?? "answer", now: now)
        // Only an HTTP answer's time says how quickly FCM answers.
        if answer.httpAnswer { answeredIn(now - answer.sentAt, now: now) }
        if outage != nil && circuit.isOpen {
            // FCM is down for everyone: this job goes back unsent, its attempt not counted.
            return .outcome(answer.job.outcome(.released(delay: pause.releaseDelay(now: now, jitter: settings.policy.jitter, random: draw()))))
        }
        let target = Self.target(answer.preparation)
        if case .delivered = answer.classification {
            if !tracker.isEmpty, let target { tracker.cleared(target) }
            if let change = quotaWindow.accepted(sent: answer.sentAt, now: now) { quotaWindowChanged(change, now: now) }
        }
        if case .retry(let code, let message, let retryAfter, let limit?) = answer.classification {
            return .outcome(quota(answer, limit: limit, code: code, message: message, retryAfter: retryAfter, target: target, now: now))
        }
        let decision = Planning.decide(job: answer.job, preparation: answer.preparation, classification: answer.classification,
                                       reauthenticated: answer.reauthenticated, policy: settings.policy, random: draw())
        switch decision {
        case .reauthenticate: return .reauthenticate
        case .outcome(let outcome): return .outcome(outcome)
        }
    }

    /// An HTTP answer that took `seconds`: the window follows FCM's answer times.
    private mutating func answeredIn(_ seconds: Double, now: Double) {
        guard var limiter else { return }
        let changed = limiter.answered(after: seconds, now: now)
        self.limiter = limiter
        if changed {
            effects.append(.tell(.window(limiter.window)))
            effects.append(.window(limiter.window))
        }
    }

    static func target(_ preparation: Preparation) -> String? {
        if case .send(let body, let token) = preparation { return QuotaTracker.target(token: token, body: body) }
        return nil
    }

    /// A quota answer: which limit (resolving one that does not say), and what becomes of the job.
    private mutating func quota(_ answer: Answer, limit: QuotaLimit, code: String, message: String, retryAfter: Double?,
                                target: String?, now: Double) -> JobOutcome {
        let policy = settings.policy
        let resolved = tracker.attribute(limit, target: target, now: now)
        effects.append(.quotaAnswer(resolved))
        effects.append(.snoozed)
        let reason = "\(code) (\(resolved.rawValue) limit): \(message)"
        let job = answer.job
        if resolved != .project, let target {
            let delay = tracker.refused(resolved, target: target, retryAfter: retryAfter, now: now, random: draw())
            effects.append(.debug("FCM's \(resolved.rawValue) limit: \(Sender.describe(target)) backs off \(Self.seconds(delay)) s",
                                  job: job.id, code: code))
            // The job's own count of quota answers decides too: another process may claim it next.
            let spread = 1 + policy.jitter * draw()
            return job.outcome(.snoozed(error: reason, delay: delay, cap: policy.snoozeCap,
                                        backoff: Backoff(first: policy.base * spread, most: policy.cap * spread)))
        }
        let stated = answer.stated?.rate
        let processes = Double(max(1, settings.poolProcesses))
        if let retryAfter {
            // FCM said when to come back: nothing goes out before, in any pool of the project.
            let length = policy.projectPause(retryAfter: retryAfter)
            if now + length > pause.until + 0.5 {
                effects.append(.warning("FCM quota exceeded for project \(project): holding back new sends for \(Int(length.rounded(.up))) s (Retry-After) and lowering the project's rate"))
                report(accepted: tracker.accepted(since: pause.until, now: now).map { $0 * processes }, stated: stated, now: now)
            } else if stated != nil && stated != lastStated {
                report(accepted: nil, stated: stated, now: now)
            }
            if pause.extend(to: now + length, reason: "QUOTA_EXCEEDED", byQuota: true, now: now) {
                effects.append(.tell(.projectPaused(until: pause.until, reason: pause.reason)))
            }
            let delay = policy.quotaDelay(.project, streak: 1, retryAfter: retryAfter, random: draw())
            return job.outcome(.snoozed(error: reason, delay: delay, cap: policy.snoozeCap))
        }
        // No Retry-After (FCM's own answer): no pause, so no burst at its end. The rate drops,
        // for every pool; the message FCM refused backs off from a minute, doubling with its
        // snoozes, jitter on top; everything else goes on at the rate.
        if case .perSecond(let rate, let window)? = answer.stated { quotaWindow.stated(rate, window: window, now: now) }
        if quotaWindow.stated != nil, let change = quotaWindow.refused(sent: answer.sentAt, now: now) { quotaWindowChanged(change, now: now) }
        if quotaWindow.isHeld(at: now), let hold = quotaWindow.hold {
            // The window is spent: what it refused goes again once it has ended (its end at the
            // latest, which is at most a minute after its first refusal: "until the quota is
            // refilled in the following minute"), spread over a few seconds; the claims pace it
            // then. A new figure stated meanwhile is still shared.
            if let stated, stated != lastStated { report(accepted: nil, stated: stated, now: now) }
            let delay = max(1, hold.until - now) + draw() * max(1, quotaWindow.windowSeconds * 0.05)
            return job.outcome(.snoozed(error: reason + " (its quota window is spent)", delay: delay, cap: policy.snoozeCap))
        }
        if now - lastReport >= settings.reportInterval || (stated != nil && stated != lastStated) {
            if now - lastReport >= settings.reportInterval {
                effects.append(.warning("FCM quota exceeded for project \(project)\(stated.map { " (its answer states \(StoreLoop.figure($0))/s)" } ?? ""): lowering the project's rate; the messages refused retry from a minute on, the others go on"))
            }
            report(accepted: tracker.accepted(since: max(pause.until, lastReport), now: now).map { $0 * processes }, stated: stated, now: now)
        }
        let spread = 1 + policy.jitter * draw()
        let first = policy.quotaMinimum * spread
        return job.outcome(.snoozed(error: reason, delay: first, cap: policy.snoozeCap,
                                    backoff: Backoff(first: first, most: max(first, policy.cap * spread))))
    }

    /// The quota window was found spent, or a probe found it renewed: every pool is told
    /// (through herald.project_rates), and the log says what happens.
    private mutating func quotaWindowChanged(_ change: QuotaWindowWatch.Change, now: Double) {
        effects.append(.tell(SenderEvent(change)))
        let paced = quotaWindow.stated.map { " (\(StoreLoop.figure($0))/s stated)" } ?? ""
        switch change {
        case .spent(let until, _):
            effects.append(.warning("FCM quota exceeded for project \(project) while every pool paced at its stated limit\(paced): its quota window is spent; every pool holds the project's sends, probing about one message a second until one is accepted (for \(Int((until - now).rounded(.up))) s at most), then paces at the stated limit again; the messages held use no attempt"))
        case .renewed:
            effects.append(.info("FCM accepts project \(project)'s sends again (a new quota window): every pool paces at the stated limit\(paced)"))
        }
    }

    private mutating func report(accepted: Double?, stated: Double?, now: Double) {
        lastReport = now
        if let stated { lastStated = stated }
        let processes = Double(max(1, settings.poolProcesses))
        effects.append(.tell(.projectQuota(accepted: accepted, proven: tracker.proven(now: now).map { $0 * processes }, stated: stated)))
    }

    /// A 429 whose body Herald could not fully read (`oddity`): logged at most once a minute,
    /// with the body's first bytes (`excerpt`, already cut and redacted). The answer itself is
    /// judged as any quota answer without what could not be read.
    mutating func oddQuotaAnswer(_ oddity: String, excerpt: String, now: Double) {
        guard now - lastOddityLog >= settings.oddityLogInterval else { return }
        lastOddityLog = now
        effects.append(.warning("FCM project \(project): a quota answer Herald could not fully read (\(oddity)); judged without it, never sending faster; its first 200 bytes: \(excerpt)"))
    }

    // MARK: The circuit

    func probeDue(now: Double) -> Bool { circuit.probeDue(now: now) }

    mutating func probeSent() { circuit.probeSent() }

    /// The probe's fate: `outage` nil when FCM gave any HTTP answer.
    mutating func probeAnswered(outage: String?, now: Double) {
        if let outage {
            circuitChanged(circuit.probeFailed(now: now), detail: "probe: " + outage, now: now)
        } else {
            unprocessedSince = nil
            circuitChanged(circuit.answered(), detail: "probe", now: now)
        }
    }

    private mutating func circuitChanged(_ change: FCMCircuit.Change?, detail: String, now: Double) {
        switch change {
        case .opened(let until)?:
            holdForOutage(until: until, detail: detail, now: now)
            effects.append(.warning("FCM unreachable or failing for every message (\(detail)): holding back every send and probing until it answers; jobs held are put back without using an attempt"))
        case .stillDown(let until)?:
            holdForOutage(until: until, detail: detail, now: now)
        case .closed?:
            // The pause already published runs out by itself within a probe interval.
            pause.outageEnded(now: now)
            effects.append(.info("FCM answers again: sending"))
        case nil:
            break
        }
    }

    private mutating func holdForOutage(until: Double, detail: String, now: Double) {
        if pause.extend(to: until, reason: "FCM_UNREACHABLE (\(detail))", byQuota: false, now: now) {
            effects.append(.tell(.projectPaused(until: pause.until, reason: pause.reason)))
        }
    }

    // MARK: Handing outcomes back

    /// Outcomes on their way to the store thread. While the project is paused, a retry that
    /// would come back before the pause ends comes back over the window after it instead (as the
    /// store thread spreads the retries already in the database), so the pause does not gather
    /// them into one burst at its end.
    mutating func spread(_ outcomes: [JobOutcome], now: Double) -> [JobOutcome] {
        guard pause.isPaused(at: now) else { return outcomes }
        return outcomes.map { outcome in
            var outcome = outcome
            switch outcome.action {
            case .retry(let error, let delay) where now + delay < pause.until:
                outcome.action = .retry(error: error, delay: pause.releaseDelay(now: now, jitter: settings.policy.jitter, random: draw()))
            case .snoozed(let error, let delay, let cap, let backoff) where now + delay < pause.until:
                outcome.action = .snoozed(error: error, delay: pause.releaseDelay(now: now, jitter: settings.policy.jitter, random: draw()),
                                          cap: cap, backoff: backoff)
            default:
                break
            }
            return outcome
        }
    }

    /// Once a minute: forget targets whose hold ended long ago.
    mutating func prune(now: Double) { tracker.prune(now: now) }

    static func seconds(_ value: Double) -> String {
        let tenths = Int((value * 10).rounded())
        return "\(tenths / 10).\(tenths % 10)"
    }
}
