import FCM
import Foundation
import HTTPClient
import Metrics
import Queue

/// The sender thread: takes claimed jobs from its inbox, keeps up to `concurrency` requests in
/// flight on one libcurl multi handle (HTTP/2, about 100 streams per connection), classifies
/// every answer and hands one outcome per job to the store thread.
///
/// It sends for one project, or, in a worker that carries several (`shared`), for each project
/// its jobs name: every request carries its own project's URL and bearer token over the same
/// connections, and each project has a lane of its own (its `SenderMachine`: quota holds, pause,
/// outage circuit), made when its first job comes and dropped once it has been idle a while.
/// The window of requests in flight is the process's.
final class Sender: @unchecked Sendable {
    struct InFlight {
        var job: ClaimedJob
        var preparation: Preparation
        /// The keys it went out with (a 401 renews that provider's token).
        var keys: ProjectKeys
        var authorization: String
        var reauthenticated: Bool
        /// When the request was handed to the HTTP client (for herald_fcm_request_duration_seconds).
        var sentAt: Double
    }

    /// One project's part of the sender: its decisions and its keys.
    struct Lane {
        var machine: SenderMachine
        var keys: ProjectKeys
        var groups: DeviceGroupClient
        /// The send headers for the current access token (see `headers(_:)`).
        var sendHeaders: (authorization: String, lines: [String]) = ("", [])
        var inFlight = 0
        var lastUsed: Double
        /// The tag of the lane's circuit probe; message tags count up from 1 and never reach it.
        let probeTag: UInt64
    }

    let configuration: WorkerConfiguration
    let client: HTTPClient
    /// The keys of the projects this worker carries (one, fixed, unless `shared`).
    let ring: ProjectKeyRing
    /// Several projects: lanes made as jobs come, events to the store thread name their project.
    let shared: Bool
    let inbox: Mailbox<ClaimedJob>
    let outbox: Mailbox<SenderEvent>
    let stop: Flag
    let log: Logger
    let metrics: WorkerMetrics
    /// Whose lease is still proven: nothing goes on the wire for a job whose lease may run out.
    let leases: LeaseBook
    /// Jobs not sent because their lease was about to end (logged once a second).
    private var notSentLeaseEnding = 0
    /// The validation rules with the operator's extra fields.
    let rules: MessageRuleSet
    private var inFlight: [JobKey: InFlight] = [:]
    private var nextTag: UInt64 = 1
    /// Whether the last request for an access token got one (readiness: /readyz).
    private var holdsToken = true
    private var random = JitterRandom()
    /// Each project's decisions about what goes out and what becomes of an answer
    /// (SenderMachine.swift), by project; this thread carries them out.
    private(set) var lanes: [String?: Lane] = [:]
    /// Which lane a probe tag belongs to.
    private var probes: [UInt64: String?] = [:]
    private var nextProbeTag = UInt64.max
    /// With several projects, the window of requests in flight is the process's (each lane's
    /// machine is made without one).
    private var windowLimit: InFlightLimit?
    /// A lane idle this long (nothing in flight, no pause) is dropped with its state.
    static let idleLaneSeconds = 300.0
    private var lastPrune = 0.0
    private(set) var counters = Counters()
    /// The APNs apps' part (APNsSender.swift): its own tags, lanes and answers.
    let apns: APNsSender

    struct Counters { var sent = 0; var delivered = 0; var retried = 0; var failed = 0 }

    init(configuration: WorkerConfiguration, client: HTTPClient, ring: ProjectKeyRing, shared: Bool,
         inbox: Mailbox<ClaimedJob>, outbox: Mailbox<SenderEvent>, stop: Flag, log: Logger, metrics: WorkerMetrics, leases: LeaseBook) {
        self.leases = leases
        self.configuration = configuration
        self.client = client
        self.ring = ring
        self.shared = shared
        self.inbox = inbox
        self.outbox = outbox
        self.stop = stop
        self.log = log
        self.metrics = metrics
        rules = MessageValidator.rules.allowing(extraFields: configuration.extraMessageFields)
        apns = APNsSender(configuration: configuration, client: client, ring: ring.apns, metrics: metrics, log: log, leases: leases)
        if shared && configuration.adaptiveConcurrency {
            windowLimit = InFlightLimit(floor: configuration.minConcurrency, ceiling: configuration.concurrency,
                                        start: SenderMachine.Settings().startWindow)
        }
    }

    /// The window of requests in flight the store thread claims for.
    private var window: Int {
        if shared { return windowLimit?.window ?? configuration.concurrency }
        return lanes.values.first?.machine.window ?? min(configuration.concurrency, SenderMachine.Settings().startWindow)
    }

    /// The lane of `project`, made from its keys when its first job comes (nil: the store thread
    /// holds no keys for it now: it was dropped or its key broke after the claim). A rotated key
    /// replaces the lane's keys and keeps its state.
    func lane(_ project: String?, now: Double) -> Bool {
        guard let keys = ring.keys(for: project) else { return false }
        if var lane = lanes[project] {
            if lane.keys !== keys {
                lane.keys = keys
                lane.groups = DeviceGroupClient(endpoint: keys.endpoint, auth: keys.auth, client: client)
                lane.sendHeaders = ("", [])
            }
            lane.lastUsed = now
            lanes[project] = lane
            return true
        }
        let settings = SenderMachine.Settings(policy: configuration.retryPolicy, poolProcesses: configuration.poolProcesses,
                                              concurrency: configuration.concurrency, minConcurrency: configuration.minConcurrency,
                                              adaptive: configuration.adaptiveConcurrency && !shared)
        let tag = nextProbeTag
        nextProbeTag -= 1
        probes[tag] = project
        lanes[project] = Lane(machine: SenderMachine(settings: settings, project: keys.endpoint.projectID), keys: keys,
                              groups: DeviceGroupClient(endpoint: keys.endpoint, auth: keys.auth, client: client),
                              lastUsed: now, probeTag: tag)
        return true
    }

    /// Hands settled jobs to the store thread (each project's machine spreads retries that would
    /// end inside its pause over the window after it).
    private func hand(_ outcomes: [JobOutcome], of project: String?) {
        guard !outcomes.isEmpty else { return }
        let now = Date().timeIntervalSince1970
        if let spread = lanes[project]?.machine.spread(outcomes, now: now) {
            outbox.put(.outcomes(spread))
        } else {
            outbox.put(.outcomes(outcomes))
        }
    }

    /// The process's window changed: the store thread claims for it, the gauge shows it.
    private func windowChanged() {
        guard let size = windowLimit?.window else { return }
        outbox.put(.window(size))
        metrics.window(size)
    }

    /// What the APNs part settled and asked for: the store thread's events first (an app's pause
    /// before its jobs are put back).
    private func hand(_ result: APNsSender.Result) {
        // The window of requests in flight is the process's: APNs's answer times count as FCM's do.
        if windowLimit != nil, !result.answerTimes.isEmpty {
            let now = Date().timeIntervalSince1970
            var changed = false
            for seconds in result.answerTimes where windowLimit?.answered(after: seconds, now: now) == true { changed = true }
            if changed { windowChanged() }
        }
        for event in result.events { outbox.put(event) }
        for (_, settled) in result.outcomes where !settled.isEmpty { outbox.put(.outcomes(settled)) }
        counters.sent += result.sent
        counters.delivered += result.delivered
        counters.retried += result.retried
        counters.failed += result.failed
    }

    /// Outcomes gathered over several projects, handed by project.
    private func hand(_ outcomes: [String?: [JobOutcome]]) {
        for (project, settled) in outcomes { hand(settled, of: project) }
    }

    /// Carries out what a project's machine decided besides the jobs' fates: tell the store
    /// thread, log, count.
    private func applyEffects(_ project: String?) {
        guard var lane = lanes[project] else { return }
        let effects = lane.machine.takeEffects()
        lanes[project] = lane
        guard !effects.isEmpty else { return }
        let prefix = shared ? "\(ProjectKeys.label(project)): " : ""
        for effect in effects {
            switch effect {
            case .tell(let event):
                if case .window = event, shared { continue }  // the window is the process's
                outbox.put(shared ? .forProject(project, event) : event)
                // herald_quota_paused: a carried project's in its row; the slot's own is the jobs of
                // no project's pause (or, in a worker of one project, that project's).
                // A spent quota window holds the project's sends too, until a probe is accepted.
                var pausedUntil: Double? = nil
                switch event {
                case .projectPaused(let until, _), .quotaWindowSpent(let until, _): pausedUntil = until
                case .quotaWindowRenewed: pausedUntil = max(0, lane.machine.pause.until)
                default: break
                }
                if let until = pausedUntil {
                    if let project = rowProject(project) { metrics.fcmProjectPausedUntil(until, project: project) } else { metrics.fcmProjectPausedUntil(until) }
                }
            case .warning(let text): log.warning(prefix + text)
            case .info(let text): log.info(prefix + text)
            case .debug(let text, let job, let code): log.debug(text, ["job_id": .int(job), "code": .string(code)])
            case .quotaAnswer(let limit): metrics.quotaExceeded(limit, project: rowProject(project))
            case .snoozed: metrics.snoozed(project: rowProject(project))
            case .window(let size): metrics.window(size)
            }
        }
    }

    func run() {
        if !shared {
            // The one project's lane from the start: its window is the process's.
            _ = lane(configuration.project, now: Date().timeIntervalSince1970)
        }
        metrics.window(window)
        // The store thread claims for this window from the start (it grows from there).
        outbox.put(.window(window))
        var shutdownDeadline: Double? = nil
        var lastTokenCount = 0.0
        while true {
            let now = Date().timeIntervalSince1970
            let arrived = inbox.take()
            if stop.isSet {
                if shutdownDeadline == nil {
                    shutdownDeadline = now + configuration.shutdownTimeout
                    log.info("stopping: \(inFlight.count) requests in flight, waiting up to \(Int(configuration.shutdownTimeout)) s")
                }
                // Not sent yet: back to available, the attempt not counted.
                if !arrived.isEmpty { outbox.put(.outcomes(arrived.map { $0.outcome(.released()) })) }
            } else {
                var outcomes: [String?: [JobOutcome]] = [:]
                var touched: Set<String?> = []
                var apnsResult = APNsSender.Result()
                for job in arrived {
                    let project = job.project
                    if shared, apns.carries(project) {
                        apns.arrive(job, now: now, into: &apnsResult)
                        continue
                    }
                    guard lane(project, now: now) else {
                        // Its project's keys are gone (dropped, removed, or the key broke after
                        // the claim): back unsent, the attempt not counted.
                        outcomes[job.project, default: []].append(job.outcome(.released(delay: 1)))
                        continue
                    }
                    touched.insert(project)
                    // The loop's clock: a legacy payload's apns-expiration counts from it.
                    let preparation = Planning.prepare(job, rules: rules, now: now)
                    switch lanes[project]!.machine.admit(job, preparation, now: now) {
                    case .settle(let outcome):
                        logEnd(job, outcome, code: "NOT_SENT")
                        outcomes[project, default: []].append(outcome)
                    case .send: submit(job, preparation, reauthenticated: false, into: &outcomes[project, default: []])
                    }
                }
                if now - lastPrune >= 60 {
                    lastPrune = now
                    pruneLanes(now: now)
                    apns.prune(now: now)
                }
                for project in touched { applyEffects(project) }
                hand(outcomes)
                hand(apnsResult)
            }
            if let deadline = shutdownDeadline, (inFlight.isEmpty && apns.count == 0) || now >= deadline {
                if apns.count > 0 { outbox.put(.outcomes(apns.abandon())) }
                if !inFlight.isEmpty {
                    log.warning("shutdown timeout: \(inFlight.count) requests got no answer; they will be retried")
                    for entry in inFlight.values { metrics.answered(code: "TRANSPORT", seconds: now - entry.sentAt, project: rowProject(entry.job.project)) }
                    outbox.put(.outcomes(inFlight.values.map {
                        $0.job.outcome(.retry(error: "shutdown: no answer within the shutdown timeout", delay: 0))
                    }))
                    inFlight.removeAll()
                }
                metrics.inFlight(0)
                outbox.put(.finished)
                return
            }
            if shutdownDeadline == nil {
                for (project, lane) in lanes where lane.machine.probeDue(now: now) { sendProbe(project) }
                apns.sendProbes(now: now)
            }
            let completions = client.poll(timeoutMilliseconds: 200, extraFileDescriptor: inbox.fileDescriptor)
            if !completions.isEmpty {
                if apns.count > 0 || completions.contains(where: { APNsSender.owns($0.tag) }) {
                    var result = APNsSender.Result()
                    apns.handle(completions.filter { APNsSender.owns($0.tag) }, into: &result)
                    hand(result)
                    handle(completions.filter { !APNsSender.owns($0.tag) })
                } else {
                    handle(completions)
                }
            }
            metrics.inFlight(inFlight.count + apns.count)
            if now - lastTokenCount >= 1 {
                lastTokenCount = now
                metrics.tokenFetches(ring.renewals)
                metrics.logWritesDropped(StandardStreams.droppedWrites)
                if notSentLeaseEnding > 0 {
                    log.warning("\(notSentLeaseEnding) jobs not sent: their lease ends within \(leases.margin) s and could not be extended (PostgreSQL unreachable?); another worker takes them once it has")
                    notSentLeaseEnding = 0
                }
            }
        }
    }

    /// Once a minute: each lane forgets targets whose hold ended long ago, and a lane idle for
    /// `idleLaneSeconds` (nothing in flight, not paused, circuit closed) is dropped, so a worker's
    /// memory follows the projects that have work, not the registry's size.
    func pruneLanes(now: Double) {
        for project in Array(lanes.keys) {
            lanes[project]!.machine.prune(now: now)
            guard shared, let lane = lanes[project] else { continue }
            if lane.inFlight == 0, now - lane.lastUsed >= Self.idleLaneSeconds, !lane.machine.pause.isPaused(at: now), !lane.machine.circuit.isOpen {
                lanes[project] = nil
                probes[lane.probeTag] = nil
            }
        }
    }

    /// One request that delivers nothing (`validate_only`, to a topic) to learn whether FCM
    /// answers again for `project`.
    private func sendProbe(_ project: String?) {
        guard var lane = lanes[project] else { return }
        lane.machine.probeSent()
        lanes[project] = lane
        let authorization: String
        do {
            authorization = try lane.keys.auth.authorizationHeader()
        } catch {
            // No access token, so no way to ask FCM: the token endpoint is down too.
            lanes[project]!.machine.probeAnswered(outage: "no access token", now: Date().timeIntervalSince1970)
            applyEffects(project)
            return
        }
        let message = Array(#"{"topic":"herald-circuit-probe","data":{"probe":"1"}}"#.utf8)
        client.submit(HTTPRequest(method: "POST", url: lane.keys.sendURL, headers: headers(authorization, project),
                                  body: FCMEndpoint.sendBody(messageJSON: message, validateOnly: true)),
                      tag: lane.probeTag)
    }

    /// The send headers for `authorization`: the same array (and so the same libcurl header
    /// list) for every message of the project until its access token changes. The empty
    /// `Accept:` leaves out the `Accept: */*` libcurl adds by default (it means nothing to FCM),
    /// which libcurl 7.88 prints into its text request byte by byte and parses back into an
    /// HTTP/2 header for every message.
    private func headers(_ authorization: String, _ project: String?) -> [String] {
        if let lane = lanes[project], lane.sendHeaders.authorization == authorization { return lane.sendHeaders.lines }
        let lines = ["Authorization: \(authorization)", "Content-Type: application/json", "Accept:"]
        lanes[project]?.sendHeaders = (authorization, lines)
        return lines
    }

    /// Why a request got no HTTP answer, as the HTTP client classified it (nil: it got one).
    private static func failure(_ result: Result<HTTPResponse, HTTPClientError>) -> HTTPClientError.Kind? {
        if case .failure(let error) = result { return error.kind }
        return nil
    }

    /// `device …abcd` or `topic news`, for reasons and logs (a token abbreviated).
    static func describe(_ target: String) -> String {
        if target.hasPrefix("token:") { return "device " + Planning.abbreviated(String(target.dropFirst(6))) }
        if target.hasPrefix("topic:") { return "topic " + target.dropFirst(6) }
        return target.replacingOccurrences(of: ":", with: " ", options: [], range: target.range(of: ":"))
    }

    private func submit(_ job: ClaimedJob, _ preparation: Preparation, reauthenticated: Bool, into outcomes: inout [JobOutcome]) {
        guard leases.maySend(job.id, now: Date().timeIntervalSince1970) else {
            // Its lease may end before an answer: another worker may send it then. Put it back
            // unsent (recorded once PostgreSQL answers; ignored if another worker holds it by then).
            notSentLeaseEnding += 1
            outcomes.append(job.outcome(.released()))
            return
        }
        guard let lane = lanes[job.project] else {
            outcomes.append(job.outcome(.released(delay: 1)))
            return
        }
        let keys = lane.keys
        let authorization: String
        do {
            authorization = try keys.auth.authorizationHeader()
            if !holdsToken { holdsToken = true; metrics.tokenHeld(true) }
        } catch {
            if holdsToken { holdsToken = false; metrics.tokenHeld(false) }
            // The token endpoint is down or refuses us: nothing was sent; retry with backoff.
            if case .outcome(let outcome) = Planning.retry(job: job, reason: "OAUTH2: \(error)", retryAfter: nil, quota: false,
                                                           policy: configuration.retryPolicy,
                                                           random: Double.random(in: 0..<1, using: &random)) {
                outcomes.append(outcome)
            }
            return
        }
        let request: HTTPRequest
        switch preparation {
        case .send(let body, _):
            request = HTTPRequest(method: "POST", url: keys.sendURL, headers: headers(authorization, job.project), body: body)
        case .group(let plan):
            do {
                request = try lane.groups.request(plan)
            } catch {
                let outcome = job.outcome(.dead(reason: error.message))
                logEnd(job, outcome, code: "NOT_SENT")
                outcomes.append(outcome)
                return
            }
        case .settled(let outcome):
            logEnd(job, outcome, code: "NOT_SENT")
            outcomes.append(outcome)
            return
        }
        let tag = nextTag
        nextTag &+= 1
        inFlight[JobKey(Int(bitPattern: UInt(tag)))] = InFlight(job: job, preparation: preparation, keys: keys, authorization: authorization,
                                                                reauthenticated: reauthenticated, sentAt: Date().timeIntervalSince1970)
        lanes[job.project]?.inFlight += 1
        client.submit(request, tag: tag)
        counters.sent += 1
    }

    /// What must never appear in a kept error text: our access token and the job's registration token.
    private static func secrets(of entry: InFlight) -> [String] {
        var secrets = [String(entry.authorization.dropFirst("Bearer ".count))]
        if case .send(_, let token?) = entry.preparation { secrets.append(token) }
        return secrets
    }

    private func handle(_ completions: [HTTPCompletion]) {
        var outcomes: [String?: [JobOutcome]] = [:]
        var touched: Set<String?> = []
        let now = Date()
        // What else FCM accepted at this moment, per project, before any quota answer of the
        // batch is judged.
        var accepted: [String?: Int] = [:]
        for completion in completions {
            if case .success(let response) = completion.result, (200..<300).contains(response.status),
               let entry = inFlight[JobKey(Int(bitPattern: UInt(completion.tag)))] {
                accepted[entry.job.project, default: 0] += 1
            }
        }
        for (project, count) in accepted { lanes[project]?.machine.batchAnswered(accepted: count, now: now.timeIntervalSince1970) }
        for completion in completions {
            let failure = Self.failure(completion.result)
            let answered = now.timeIntervalSince1970
            if let project = probes[completion.tag] {
                lanes[project]?.machine.probeAnswered(outage: SenderMachine.outage(failure), now: answered)
                touched.insert(project)
                continue
            }
            guard let entry = inFlight.removeValue(forKey: JobKey(Int(bitPattern: UInt(completion.tag)))) else { continue }
            let project = entry.job.project
            lanes[project]?.inFlight -= 1
            guard lanes[project] != nil else { continue }
            touched.insert(project)
            // With several projects the window follows every project's answer times.
            if failure == nil, windowLimit?.answered(after: answered - entry.sentAt, now: answered) == true { windowChanged() }
            let classification: SendClassification
            var stated: ProjectQuotaStatement? = nil
            switch completion.result {
            case .success(let response):
                // A 2xx answer keeps no text, so there is nothing to redact.
                classification = SendClassification(response: response, now: now,
                                                    redacting: (200..<300).contains(response.status) ? [] : Self.secrets(of: entry))
                metrics.answered(code: Self.metricCode(classification), seconds: answered - entry.sentAt, project: rowProject(project))
                if case .delivered = classification { metrics.delivered(entry.job, now: answered) }
                if classification.isQuota {
                    stated = Self.statedQuota(response, now: now)
                    if let oddity = FCMFailure.quotaBodyOddity(response.body, now: now) {
                        lanes[project]!.machine.oddQuotaAnswer(oddity, excerpt: FCMFailure.excerpt(response.body, redacting: Self.secrets(of: entry)),
                                               now: answered)
                    }
                }
            case .failure(let error):
                classification = SendClassification(transport: TransportFailure(error), redacting: Self.secrets(of: entry))
                metrics.answered(code: error.kind == .unprocessed ? "UNPROCESSED" : "TRANSPORT", seconds: answered - entry.sentAt, project: rowProject(project))
            }
            let verdict = lanes[project]!.machine.answered(SenderMachine.Answer(job: entry.job, preparation: entry.preparation, reauthenticated: entry.reauthenticated,
                                                                sentAt: entry.sentAt, classification: classification, failure: failure,
                                                                stated: stated),
                                           now: answered)
            switch verdict {
            case .reauthenticate:
                entry.keys.auth.invalidate(ifHeader: entry.authorization)
                log.info("FCM refused the access token (401); renewing it and sending the job again", Self.fields(entry.job, code: "UNAUTHENTICATED"))
                submit(entry.job, entry.preparation, reauthenticated: true, into: &outcomes[project, default: []])
            case .outcome(let outcome):
                switch outcome.action {
                case .completed: counters.delivered += 1
                case .retry, .snoozed, .released: counters.retried += 1
                default: counters.failed += 1
                }
                if case .retry(let reason, let delay) = outcome.action {
                    log.debug("attempt \(entry.job.attempt) failed: \(reason); retry in \(String(format: "%.1f", delay)) s",
                              Self.fields(entry.job, code: Self.metricCode(classification), outcome: .retried))
                } else {
                    logEnd(entry.job, outcome, code: Self.metricCode(classification))
                }
                outcomes[project, default: []].append(outcome)
            }
        }
        for project in touched { applyEffects(project) }
        hand(outcomes)
    }

    /// The project whose row of the slot counts for `project`'s jobs: a registry project of a
    /// worker carrying many; none in a worker of one project (its whole slot is the project's).
    private func rowProject(_ project: String?) -> String? { shared ? project : nil }

    /// The project's limit a quota answer states (ErrorInfo), read from its body.
    static func statedQuota(_ response: HTTPResponse, now: Date) -> ProjectQuotaStatement? {
        FCMFailure(httpStatus: response.status, headers: [], body: response.body, now: now)?.statedQuota
    }

    /// The `code` label of an HTTP answer: `OK` for 2xx, else FCM's error code
    /// (`UNAUTHENTICATED` when FCM refused our access token).
    static func metricCode(_ classification: SendClassification) -> String {
        switch classification {
        case .delivered: "OK"
        case .pruneToken(let code, _), .deadLetter(let code, _), .retry(let code, _, _, _): code
        case .reauthenticate: "UNAUTHENTICATED"
        }
    }

    /// A log line's fields for a job: its id, queue, the answer's code and, when the line is
    /// about one, the job's outcome (the word metrics and SQL use).
    /// Every outcome that ends a job without a delivery, logged the same way whatever decided it
    /// (FCM's answer, the validation or a door limit before any request, a device-group plan):
    /// one line at info with the job, its queue, the code (`NOT_SENT` when no request was made)
    /// and the outcome. Deliveries are counted, not logged (one a message would flood the log).
    private func logEnd(_ job: ClaimedJob, _ outcome: JobOutcome, code: String) {
        switch outcome.action {
        case .dead(let reason): log.info("dead-lettered: \(reason)", Self.fields(job, code: code, outcome: .dead))
        case .discarded(let reason): log.info("discarded: \(reason)", Self.fields(job, code: code, outcome: .discarded))
        case .pruned(_, let reason, _): log.info("token pruned, job discarded: \(reason)", Self.fields(job, code: code, outcome: .pruned))
        default: break
        }
    }

    static func fields(_ job: ClaimedJob, code: String, outcome: MessageOutcome? = nil) -> KeyValuePairs<String, LogValue> {
        if let outcome {
            return ["job_id": .int(job.id), "queue": .string(job.queue), "code": .string(code), "outcome": .string(outcome.rawValue)]
        }
        return ["job_id": .int(job.id), "queue": .string(job.queue), "code": .string(code)]
    }
}
