import FCM
import Foundation
import HTTPClient
import Metrics
import Queue

/// The sender thread: takes claimed jobs from its inbox, keeps up to `concurrency` requests in
/// flight on one libcurl multi handle (HTTP/2, about 100 streams per connection), classifies
/// every answer and hands one outcome per job to the store thread.
final class Sender: @unchecked Sendable {
    struct InFlight {
        var job: ClaimedJob
        var preparation: Preparation
        var authorization: String
        var reauthenticated: Bool
        /// When the request was handed to the HTTP client (for herald_fcm_request_duration_seconds).
        var sentAt: Double
    }

    let configuration: WorkerConfiguration
    let client: HTTPClient
    let auth: AccessTokenProvider
    let endpoint: FCMEndpoint
    /// `endpoint.sendURL`, built once: the same String for every message.
    let sendURL: String
    let groups: DeviceGroupClient
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
    /// Seconds since 1970 before which nothing new is sent (a project quota answer, or FCM
    /// unreachable).
    private var projectPausedUntil: Double = 0
    /// Whether FCM answers at all (see FCMCircuit): open, nothing but probes goes out.
    private var circuit = FCMCircuit()
    /// The part of `projectPausedUntil` a quota answer asked for, which a closing circuit keeps.
    private var projectPausedUntilByQuota: Double = 0
    /// The tag of the circuit's probe request; message tags count up from 1 and never reach it.
    private static let probeTag = UInt64.max
    /// How long the current (or last) pause was when it was set.
    private var pauseLength: Double = 0
    /// Devices and topics backing off after their own quota answers.
    private var tracker: QuotaTracker
    /// The window of requests in flight, following FCM's answer times (nil: fixed).
    private var limiter: InFlightLimit?
    private var lastPrune = 0.0
    private(set) var counters = Counters()
    /// The send headers for the current access token (see `headers(_:)`).
    private var sendHeaders: (authorization: String, lines: [String]) = ("", [])

    struct Counters { var sent = 0; var delivered = 0; var retried = 0; var failed = 0 }

    init(configuration: WorkerConfiguration, client: HTTPClient, auth: AccessTokenProvider, endpoint: FCMEndpoint,
         inbox: Mailbox<ClaimedJob>, outbox: Mailbox<SenderEvent>, stop: Flag, log: Logger, metrics: WorkerMetrics, leases: LeaseBook) {
        self.leases = leases
        self.configuration = configuration
        self.client = client
        self.auth = auth
        self.endpoint = endpoint
        sendURL = endpoint.sendURL
        self.groups = DeviceGroupClient(endpoint: endpoint, auth: auth, client: client)
        self.inbox = inbox
        self.outbox = outbox
        self.stop = stop
        self.log = log
        self.metrics = metrics
        rules = MessageValidator.rules.allowing(extraFields: configuration.extraMessageFields)
        tracker = QuotaTracker(policy: configuration.retryPolicy)
        if configuration.adaptiveConcurrency {
            limiter = InFlightLimit(floor: configuration.minConcurrency, ceiling: configuration.concurrency)
        }
    }

    /// Hands settled jobs to the store thread. While the project is paused, a retry that would
    /// come back before the pause ends comes back over the window after it instead (as the
    /// store thread spreads the retries already in the database), so the pause does not gather
    /// them into one burst at its end.
    private func hand(_ outcomes: [JobOutcome]) {
        guard !outcomes.isEmpty else { return }
        let now = Date().timeIntervalSince1970
        guard projectPausedUntil > now else {
            outbox.put(.outcomes(outcomes))
            return
        }
        let spread = outcomes.map { outcome -> JobOutcome in
            var outcome = outcome
            switch outcome.action {
            case .retry(let error, let delay) where now + delay < projectPausedUntil:
                outcome.action = .retry(error: error, delay: releaseDelay(now: now))
            case .snoozed(let error, let delay, let cap) where now + delay < projectPausedUntil:
                outcome.action = .snoozed(error: error, delay: releaseDelay(now: now), cap: cap)
            default:
                break
            }
            return outcome
        }
        outbox.put(.outcomes(spread))
    }

    /// Holds back new sends, and tells the store thread, which holds back the whole project.
    private func pause(until: Double, reason: String = "QUOTA_EXCEEDED") {
        guard until > projectPausedUntil else { return }
        pauseLength = until - Date().timeIntervalSince1970
        projectPausedUntil = until
        outbox.put(.projectPaused(until: until, reason: reason))
        metrics.projectPausedUntil(until)
    }

    func run() {
        metrics.window(limiter?.window ?? configuration.concurrency)
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
                hand(arrived.map { $0.outcome(.released()) })
            } else {
                let pausedFor = projectPausedUntil - now
                var outcomes: [JobOutcome] = []
                for job in arrived {
                    if pausedFor > 0 || circuit.isOpen {
                        outcomes.append(job.outcome(.released(delay: releaseDelay(now: now))))
                        continue
                    }
                    // The loop's clock: a legacy payload's apns-expiration counts from it.
                    let preparation = Planning.prepare(job, rules: rules, now: now)
                    if case .settled(let outcome) = preparation {
                        outcomes.append(outcome)
                    } else if let held = heldBack(job, preparation, now: now) {
                        outcomes.append(held)
                    } else {
                        submit(job, preparation, reauthenticated: false, into: &outcomes)
                    }
                }
                if now - lastPrune >= 60 {
                    lastPrune = now
                    tracker.prune(now: now)
                }
                hand(outcomes)
            }
            if let deadline = shutdownDeadline, inFlight.isEmpty || now >= deadline {
                if !inFlight.isEmpty {
                    log.warning("shutdown timeout: \(inFlight.count) requests got no answer; they will be retried")
                    for entry in inFlight.values { metrics.answered(code: "TRANSPORT", seconds: now - entry.sentAt) }
                    hand(inFlight.values.map {
                        $0.job.outcome(.retry(error: "shutdown: no answer within the shutdown timeout", delay: 0))
                    })
                    inFlight.removeAll()
                }
                metrics.inFlight(0)
                outbox.put(.finished)
                return
            }
            if shutdownDeadline == nil, circuit.probeDue(now: now) { sendProbe() }
            let completions = client.poll(timeoutMilliseconds: 200, extraFileDescriptor: inbox.fileDescriptor)
            if !completions.isEmpty { handle(completions) }
            metrics.inFlight(inFlight.count)
            if now - lastTokenCount >= 1 {
                lastTokenCount = now
                metrics.tokenFetches(auth.renewals)
                metrics.logWritesDropped(StandardStreams.droppedWrites)
                if notSentLeaseEnding > 0 {
                    log.warning("\(notSentLeaseEnding) jobs not sent: their lease ends within \(leases.margin) s and could not be extended (PostgreSQL unreachable?); another worker takes them once it has")
                    notSentLeaseEnding = 0
                }
            }
        }
    }

    /// How long a job put back during a pause waits: to the pause's end, then spread over the
    /// jitter window after it, not all at its end.
    private func releaseDelay(now: Double) -> Double {
        let spread = max(1, pauseLength * configuration.retryPolicy.jitter) * Double.random(in: 0..<1, using: &random)
        return max(0, projectPausedUntil - now) + spread
    }

    /// One request that delivers nothing (`validate_only`, to a topic) to learn whether FCM
    /// answers again.
    private func sendProbe() {
        circuit.probeSent()
        let authorization: String
        do {
            authorization = try auth.authorizationHeader()
        } catch {
            // No access token, so no way to ask FCM: the token endpoint is down too.
            circuitChanged(circuit.probeFailed(now: Date().timeIntervalSince1970), detail: "no access token")
            return
        }
        let message = Array(#"{"topic":"herald-circuit-probe","data":{"probe":"1"}}"#.utf8)
        client.submit(HTTPRequest(method: "POST", url: sendURL, headers: headers(authorization),
                                  body: FCMEndpoint.sendBody(messageJSON: message, validateOnly: true)),
                      tag: Self.probeTag)
    }

    /// The send headers for `authorization`: the same array (and so the same libcurl header
    /// list) for every message until the access token changes. The empty `Accept:` leaves out
    /// the `Accept: */*` libcurl adds by default (it means nothing to FCM), which libcurl 7.88
    /// prints into its text request byte by byte and parses back into an HTTP/2 header for every
    /// message.
    private func headers(_ authorization: String) -> [String] {
        if sendHeaders.authorization != authorization {
            sendHeaders = (authorization, ["Authorization: \(authorization)", "Content-Type: application/json", "Accept:"])
        }
        return sendHeaders.lines
    }

    /// Whether an answer says FCM is failing for everyone, and how (for logs): nil for an HTTP
    /// answer, else the kind of failure. An HTTP answer, a 5xx included, means FCM is there: a 500
    /// or 503 for a message is that message's, retried with its own jittered backoff (many at once
    /// must not turn into one released batch). No HTTP answer at all (refused, reset, timed out)
    /// is an outage. TLS failures are left out: they are a setting to fix, not an outage.
    private static func outage(_ result: Result<HTTPResponse, HTTPClientError>) -> String? {
        guard case .failure(let error) = result, error.kind != .tls, error.kind != .unprocessed else { return nil }
        return TransportFailure(error).kind.rawValue
    }

    private func circuitChanged(_ change: FCMCircuit.Change?, detail: String) {
        switch change {
        case .opened(let until)?:
            pause(until: until, reason: "FCM_UNREACHABLE (\(detail))")
            log.warning("FCM unreachable or failing for every message (\(detail)): holding back every send and probing until it answers; jobs held are put back without using an attempt")
        case .stillDown(let until)?:
            pause(until: until, reason: "FCM_UNREACHABLE (\(detail))")
        case .closed?:
            // The pause already published runs out by itself within a probe interval.
            projectPausedUntil = min(projectPausedUntil, max(projectPausedUntilByQuota, Date().timeIntervalSince1970))
            log.info("FCM answers again: sending")
        case nil:
            break
        }
    }

    /// A job for a device or topic that is backing off: snoozed until its target's hold ends
    /// (spread over the jitter window), without a request.
    private func heldBack(_ job: ClaimedJob, _ preparation: Preparation, now: Double) -> JobOutcome? {
        guard !tracker.isEmpty, case .send(let body, let token) = preparation,
              let target = QuotaTracker.target(token: token, body: body), let remaining = tracker.held(target, now: now) else { return nil }
        let delay = remaining * (1 + configuration.retryPolicy.jitter * Double.random(in: 0..<1, using: &random))
        metrics.snoozed()
        return job.outcome(.snoozed(error: "QUOTA_EXCEEDED: not sent: \(Self.describe(target)) is backing off after FCM's quota answer",
                                    delay: delay, cap: configuration.retryPolicy.snoozeCap))
    }

    /// `device …abcd` or `topic news`, for reasons and logs (a token abbreviated).
    static func describe(_ target: String) -> String {
        if target.hasPrefix("token:") { return "device " + Planning.abbreviated(String(target.dropFirst(6))) }
        if target.hasPrefix("topic:") { return "topic " + target.dropFirst(6) }
        return target.replacingOccurrences(of: ":", with: " ", options: [], range: target.range(of: ":"))
    }

    /// A quota answer: which limit (resolving one that does not say), and what becomes of the
    /// job. A device's or topic's limit holds back that target only; the project's pauses every
    /// send of the project (every pool, through the database) and lowers its adapted rate.
    private func quotaOutcome(_ entry: InFlight, limit: QuotaLimit, code: String, message: String, retryAfter: Double?,
                              now: Double) -> JobOutcome {
        let policy = configuration.retryPolicy
        var target: String? = nil
        if case .send(let body, let token) = entry.preparation { target = QuotaTracker.target(token: token, body: body) }
        let resolved = tracker.attribute(limit, target: target, now: now)
        metrics.quotaExceeded(resolved)
        metrics.snoozed()
        let reason = "\(code) (\(resolved.rawValue) limit): \(message)"
        if resolved != .project, let target {
            let delay = tracker.refused(resolved, target: target, retryAfter: retryAfter, now: now,
                                        random: Double.random(in: 0..<1, using: &random))
            log.debug("FCM's \(resolved.rawValue) limit: \(Self.describe(target)) backs off \(String(format: "%.1f", delay)) s",
                      Self.fields(entry.job, code: code))
            return entry.job.outcome(.snoozed(error: reason, delay: delay, cap: policy.snoozeCap))
        }
        let pause = policy.projectPause(retryAfter: retryAfter)
        if now + pause > projectPausedUntil + 0.5 {
            log.warning("FCM quota exceeded for project \(endpoint.projectID): holding back new sends for \(Int(pause.rounded(.up))) s and lowering the project's rate")
            // What this process saw accepted, as the pool's (its processes share the work evenly).
            let processes = Double(max(1, configuration.poolProcesses))
            let accepted = tracker.accepted(since: projectPausedUntil, now: now).map { $0 * processes }
            outbox.put(.projectQuota(accepted: accepted, proven: tracker.proven(now: now).map { $0 * processes }))
        }
        self.pause(until: now + pause)
        projectPausedUntilByQuota = max(projectPausedUntilByQuota, now + pause)
        let delay = policy.quotaDelay(.project, streak: 1, retryAfter: retryAfter, random: Double.random(in: 0..<1, using: &random))
        return entry.job.outcome(.snoozed(error: reason, delay: delay, cap: policy.snoozeCap))
    }

    private func submit(_ job: ClaimedJob, _ preparation: Preparation, reauthenticated: Bool, into outcomes: inout [JobOutcome]) {
        guard leases.maySend(job.id, now: Date().timeIntervalSince1970) else {
            // Its lease may end before an answer: another worker may send it then. Put it back
            // unsent (recorded once PostgreSQL answers; ignored if another worker holds it by then).
            notSentLeaseEnding += 1
            outcomes.append(job.outcome(.released()))
            return
        }
        let authorization: String
        do {
            authorization = try auth.authorizationHeader()
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
            request = HTTPRequest(method: "POST", url: sendURL, headers: headers(authorization), body: body)
        case .group(let plan):
            do {
                request = try groups.request(plan)
            } catch {
                outcomes.append(job.outcome(.dead(reason: error.message)))
                return
            }
        case .settled(let outcome):
            outcomes.append(outcome)
            return
        }
        let tag = nextTag
        nextTag &+= 1
        inFlight[JobKey(Int(bitPattern: UInt(tag)))] = InFlight(job: job, preparation: preparation, authorization: authorization, reauthenticated: reauthenticated,
                                 sentAt: Date().timeIntervalSince1970)
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
        var outcomes: [JobOutcome] = []
        let now = Date()
        // What else FCM accepted at this moment, before any quota answer of the batch is judged.
        var accepted = 0
        for completion in completions {
            if case .success(let response) = completion.result, (200..<300).contains(response.status) { accepted += 1 }
        }
        tracker.countDeliveries(accepted, now: now.timeIntervalSince1970)
        for completion in completions {
            let outage = Self.outage(completion.result)
            if completion.tag == Self.probeTag {
                if let outage {
                    circuitChanged(circuit.probeFailed(now: now.timeIntervalSince1970), detail: "probe: " + outage)
                } else {
                    circuitChanged(circuit.answered(), detail: "probe")
                }
                continue
            }
            guard let entry = inFlight.removeValue(forKey: JobKey(Int(bitPattern: UInt(completion.tag)))) else { continue }
            if case .failure(let error) = completion.result, error.kind == .unprocessed {
                // FCM's front end did not process it (a refused stream, or one above its GOAWAY's
                // last stream): it goes again at once, the attempt not counted.
                counters.retried += 1
                metrics.answered(code: "UNPROCESSED", seconds: now.timeIntervalSince1970 - entry.sentAt)
                outcomes.append(entry.job.outcome(.released()))
                continue
            }
            if let outage {
                circuitChanged(circuit.failed(now: now.timeIntervalSince1970), detail: outage)
            } else {
                circuitChanged(circuit.answered(), detail: "answer")
            }
            let classification: SendClassification
            let answered = now.timeIntervalSince1970
            switch completion.result {
            case .success(let response):
                if limiter?.answered(after: answered - entry.sentAt, now: answered) == true, let window = limiter?.window {
                    outbox.put(.window(window))
                    metrics.window(window)
                }
                // A 2xx answer keeps no text, so there is nothing to redact.
                classification = SendClassification(response: response, now: now,
                                                    redacting: (200..<300).contains(response.status) ? [] : Self.secrets(of: entry))
                metrics.answered(code: Self.metricCode(classification), seconds: answered - entry.sentAt)
                if case .delivered = classification { metrics.delivered(entry.job, now: answered) }
            case .failure(let error):
                classification = SendClassification(transport: TransportFailure(error), redacting: Self.secrets(of: entry))
                metrics.answered(code: "TRANSPORT", seconds: answered - entry.sentAt)
            }
            if outage != nil && circuit.isOpen {
                // FCM is down for everyone: this job goes back unsent, its attempt not counted.
                counters.retried += 1
                outcomes.append(entry.job.outcome(.released(delay: releaseDelay(now: answered))))
                continue
            }
            if case .delivered = classification, !tracker.isEmpty, case .send(let body, let token) = entry.preparation,
               let target = QuotaTracker.target(token: token, body: body) {
                tracker.cleared(target)
            }
            if case .retry(let code, let message, let retryAfter, let limit?) = classification {
                counters.retried += 1
                outcomes.append(quotaOutcome(entry, limit: limit, code: code, message: message, retryAfter: retryAfter,
                                             now: answered))
                continue
            }
            let decision = Planning.decide(job: entry.job, preparation: entry.preparation, classification: classification,
                                           reauthenticated: entry.reauthenticated, policy: configuration.retryPolicy,
                                           random: Double.random(in: 0..<1, using: &random))
            switch decision {
            case .reauthenticate:
                auth.invalidate(ifHeader: entry.authorization)
                log.info("FCM refused the access token (401); renewing it and sending the job again", Self.fields(entry.job, code: "UNAUTHENTICATED"))
                submit(entry.job, entry.preparation, reauthenticated: true, into: &outcomes)
            case .outcome(let outcome):
                switch outcome.action {
                case .completed: counters.delivered += 1
                case .retry: counters.retried += 1
                default: counters.failed += 1
                }
                if case .retry(let reason, let delay) = outcome.action {
                    log.debug("attempt \(entry.job.attempt) failed: \(reason); retry in \(String(format: "%.1f", delay)) s",
                              Self.fields(entry.job, code: Self.metricCode(classification), outcome: .retried))
                } else if case .dead(let reason) = outcome.action {
                    log.info("dead-lettered: \(reason)", Self.fields(entry.job, code: Self.metricCode(classification), outcome: .dead))
                }
                outcomes.append(outcome)
            }
        }
        hand(outcomes)
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
    static func fields(_ job: ClaimedJob, code: String, outcome: MessageOutcome? = nil) -> KeyValuePairs<String, LogValue> {
        if let outcome {
            return ["job_id": .int(job.id), "queue": .string(job.queue), "code": .string(code), "outcome": .string(outcome.rawValue)]
        }
        return ["job_id": .int(job.id), "queue": .string(job.queue), "code": .string(code)]
    }
}
