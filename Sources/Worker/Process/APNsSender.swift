import APNs
import FCM
import Foundation
import HTTPClient
import JSON
import Queue

/// The sender thread's part for APNs apps: a claimed job whose project is an APNs app the store
/// thread took up (`ProjectKeyRing.apns`) goes to `{APNs}/3/device/{token}` over the sender's
/// HTTP/2 client, with the app's provider token (one per signing key, reused until it is due:
/// `APNsProviderToken`), the topic its push type needs, one `apns-id` per job (every attempt
/// sends the same), the priority its push type defaults to (`APNsRequest`). Apple's answer is
/// acted on as docs/apns.md's table says (`APNsAnswer`):
/// - 200: completed, with the `apns-id`;
/// - 410 Unregistered / ExpiredToken: the token pruned, unless it was registered again after
///   Apple's timestamp (the store thread asks herald.device_tokens);
/// - 400 / 413: dead-lettered with Apple's reason (BadDeviceToken saying the token may belong to
///   the other environment);
/// - 403 ExpiredProviderToken: a new provider token and the job sent again at once, no attempt
///   used; other 403s, TopicDisallowed, 404/405: the app paused with the reason (the store thread
///   records it), its jobs put back unsent;
/// - 429 TooManyRequests: that device backs off, in this process and durably (the job's own
///   count of quota answers, herald.jobs.snoozes, as FCM's device limit);
///   TooManyProviderTokenUpdates: no renewal for 20 minutes, the job put back a little later;
/// - 500 / 503: retried after the backoff, or Apple's Retry-After;
/// - no answer at all, over and over: the app's outage circuit opens (a pause, probes, jobs put
///   back without using an attempt); a stream never sent or refused goes again unused.
/// Tags are this part's own range, so the sender tells its completions apart.
final class APNsSender {
    struct InFlight {
        var job: ClaimedJob
        var request: APNsRequest
        /// The token as the message wrote it (what herald.device_tokens holds).
        var token: String
        var keys: APNsAppKeys
        var providerToken: String
        /// Sent again after ExpiredProviderToken already (once per claim).
        var renewed: Bool
        var sentAt: Double
    }

    struct Lane {
        var keys: APNsAppKeys
        var circuit = FCMCircuit()
        var pause = ProjectPause()
        var devices: QuotaTracker
        /// APNs refused the app (`pauseApp`): nothing more goes out with these keys; the store
        /// thread pauses the app, and keys taken up again (after `herald apns resume`) clear it.
        var refused = false
        var inFlight = 0
        var lastUsed: Double
        let probeTag: UInt64
        /// When the run of unprocessed streams since Apple's last HTTP answer began (nil: none).
        var unprocessedSince: Double?
    }

    static let firstTag: UInt64 = 1 << 60
    static let lastTag: UInt64 = 1 << 61
    static func owns(_ tag: UInt64) -> Bool { tag >= firstTag && tag < lastTag }

    let configuration: WorkerConfiguration
    let client: HTTPClient
    let ring: APNsKeyRing
    let metrics: WorkerMetrics
    let log: Logger
    let leases: LeaseBook
    private(set) var inFlight: [UInt64: InFlight] = [:]
    private var lanes: [String: Lane] = [:]
    private var probes: [UInt64: String] = [:]
    private var nextTag = APNsSender.firstTag
    private var nextProbeTag = APNsSender.lastTag - 1
    private var random = JitterRandom()
    private let rules = APNsMessageRules.standard
    /// Apps already warned about a Live-Activity-shaped payload sent as an alert (once each).
    private var warnedLiveActivity: Set<String> = []

    /// What came of a batch: outcomes by app, and events for the store thread.
    struct Result {
        var outcomes: [String: [JobOutcome]] = [:]
        var events: [SenderEvent] = []
        var sent = 0
        /// How long each HTTP answer took (the process's window of requests in flight follows them).
        var answerTimes: [Double] = []
        var delivered = 0
        var retried = 0
        var failed = 0
    }

    init(configuration: WorkerConfiguration, client: HTTPClient, ring: APNsKeyRing, metrics: WorkerMetrics, log: Logger, leases: LeaseBook) {
        self.configuration = configuration
        self.client = client
        self.ring = ring
        self.metrics = metrics
        self.log = log
        self.leases = leases
    }

    var count: Int { inFlight.count }

    /// Whether `project` is an APNs app this worker holds keys for.
    func carries(_ project: String?) -> Bool {
        guard let project else { return false }
        return ring.contains(project)
    }

    private func draw() -> Double { Double.random(in: 0..<1, using: &random) }

    private func lane(_ name: String, now: Double) -> Bool {
        guard let keys = ring.keys(for: name) else { return false }
        if var lane = lanes[name] {
            if lane.keys !== keys {
                // Taken up again (a resume, a changed key): a refusal of the old keys is over.
                lane.keys = keys
                lane.refused = false
            }
            lane.lastUsed = now
            lanes[name] = lane
            return true
        }
        let tag = nextProbeTag
        nextProbeTag -= 1
        probes[tag] = name
        lanes[name] = Lane(keys: keys, devices: QuotaTracker(policy: configuration.retryPolicy), lastUsed: now, probeTag: tag)
        return true
    }

    // MARK: Jobs arriving

    /// A claimed job of an APNs app: sent, or settled at once (into `result`).
    func arrive(_ job: ClaimedJob, now: Double, into result: inout Result) {
        guard let name = job.project, lane(name, now: now), let lane = lanes[name] else {
            // The app's keys are gone (dropped, removed, or its key broke after the claim).
            result.outcomes[job.project ?? "", default: []].append(job.outcome(.released(delay: 1)))
            return
        }
        let policy = configuration.retryPolicy
        if lane.refused {
            // The app is being paused: back unsent; the claim no longer takes its jobs.
            result.outcomes[name, default: []].append(job.outcome(.released(delay: 1)))
            return
        }
        if lane.pause.isPaused(at: now) || lane.circuit.isOpen {
            result.outcomes[name, default: []].append(job.outcome(.released(delay: lane.pause.releaseDelay(now: now, jitter: policy.jitter, random: draw()))))
            return
        }
        if job.attempt > job.maxAttempts {
            let last = job.lastError.map { "; last error: \($0)" } ?? ""
            settle(job, .dead(reason: "gave up after \(job.maxAttempts) attempts (max_attempts)\(last)"), code: "NOT_SENT", into: &result)
            return
        }
        let message: JSONValue
        do {
            message = try JSONValue.parse(job.message)
        } catch {
            settle(job, .dead(reason: "message: not valid JSON (\(error))"), code: "NOT_SENT", into: &result)
            return
        }
        // The rules enqueue checked (a row written before them, or past the trigger, meets them
        // here). The payload they measured is the request's body, written once.
        var payload: [UInt8] = []
        let issues = rules.validate(message, payload: &payload)
        if !issues.isEmpty {
            settle(job, .dead(reason: issues.map(\.description).joined(separator: "; ")), code: "NOT_SENT", into: &result)
            return
        }
        // The claim flagged its token: pruned after an earlier 410 (herald.pruned_tokens), or
        // stale for a campaign that skips stale tokens. Discarded unsent, as an FCM job is.
        if job.tokenPruned, let token = message["apns_token"]?.stringValue {
            settle(job, .discarded(reason: Planning.prunedReason(job, token, service: "APNs")), code: "NOT_SENT", into: &result)
            return
        }
        let request: APNsRequest
        do {
            request = try APNsRequest(message: message, bundleID: lane.keys.app.topic, jobID: Int64(job.id), ttlSeconds: nil, now: Int64(now),
                                      payload: payload)
        } catch {
            settle(job, .dead(reason: error.description), code: "NOT_SENT", into: &result)
            return
        }
        // A payload shaped like a Live Activity update goes out as the alert it was enqueued as
        // (Apple shows it as an ordinary notification, or not at all): said once per app.
        if request.pushType == .alert, APNsRequest.isLiveActivityShaped(message), warnedLiveActivity.insert(name).inserted {
            log.warning("APNs app \(name): job \(job.id)'s payload looks like a Live Activity update (aps.event with aps.content-state or aps.timestamp) but goes out as apns-push-type alert; give it apns.headers.apns-push-type \"liveactivity\" (Herald then sends it to \(lane.keys.app.topic).push-type.liveactivity). Said once for this app.",
                        Sender.fields(job, code: "LIVE_ACTIVITY_AS_ALERT"))
        }
        if let remaining = lane.devices.held(Self.target(request), now: now) {
            metrics.snoozed(project: name)
            let delay = remaining * (1 + policy.jitter * draw())
            result.outcomes[name, default: []].append(job.outcome(.snoozed(
                error: "TooManyRequests: not sent: device \(Planning.abbreviated(request.deviceToken)) is backing off after APNs's answer",
                delay: delay, cap: policy.snoozeCap)))
            return
        }
        send(job, request, token: message["apns_token"]?.stringValue ?? request.deviceToken, renewed: false, into: &result)
    }

    private static func target(_ request: APNsRequest) -> String { "token:" + request.deviceToken }

    private func send(_ job: ClaimedJob, _ request: APNsRequest, token: String, renewed: Bool, into result: inout Result) {
        let now = Date().timeIntervalSince1970
        guard let name = job.project, let lane = lanes[name] else {
            result.outcomes[job.project ?? "", default: []].append(job.outcome(.released(delay: 1)))
            return
        }
        guard leases.maySend(job.id, now: now) else {
            // Its lease may end before an answer: put it back unsent.
            result.outcomes[name, default: []].append(job.outcome(.released()))
            return
        }
        let providerToken: String
        do {
            providerToken = try lane.keys.token.current()
        } catch {
            // The key signed when the app was taken up; a failure now is the machine's (retried).
            if case .outcome(let outcome) = Planning.retry(job: job, reason: "APNs provider token: \(error)", retryAfter: nil, quota: false,
                                                           policy: configuration.retryPolicy, random: draw()) {
                result.outcomes[name, default: []].append(outcome)
            }
            return
        }
        let tag = nextTag
        nextTag = nextTag + 1 >= Self.lastTag - 1_000_000 ? Self.firstTag : nextTag + 1
        inFlight[tag] = InFlight(job: job, request: request, token: token, keys: lane.keys, providerToken: providerToken,
                                 renewed: renewed, sentAt: now)
        lanes[name]?.inFlight += 1
        result.sent += 1
        client.submit(HTTPRequest(method: "POST", url: lane.keys.deviceURL + request.deviceToken,
                                  headers: sharedLines(lane.keys, providerToken, request),
                                  varyingHeaders: request.ownHeaderLines, body: request.body),
                      tag: tag)
    }

    /// The header lines an app's requests share while its keys, provider token, push type and
    /// priority stay the same, made once: the client keeps one curl list of them and links each
    /// request's own lines (`apns-id` and the like) in front of it.
    private struct SharedLines {
        let keys: APNsAppKeys
        let pushType: APNsPushType
        let priority: Int
        var providerToken: String
        var lines: [String]
    }
    private var shared: [SharedLines] = []

    private func sharedLines(_ keys: APNsAppKeys, _ providerToken: String, _ request: APNsRequest) -> [String] {
        let index = shared.firstIndex { $0.keys === keys && $0.priority == request.priority && $0.pushType == request.pushType }
        if let index, shared[index].providerToken == providerToken { return shared[index].lines }
        // The empty Accept: leaves out curl's `accept: */*`, which means nothing to APNs.
        let lines = APNsRequest.sharedHeaderLines(providerToken: providerToken, pushType: request.pushType, topic: request.topic,
                                                  priority: request.priority) + ["Accept:"]
        if let index {
            // A renewed provider token.
            shared[index].providerToken = providerToken
            shared[index].lines = lines
        } else {
            // Keys taken up again are new objects: the lines of the old ones go in time.
            if shared.count >= 64 { shared.removeAll() }
            shared.append(SharedLines(keys: keys, pushType: request.pushType, priority: request.priority, providerToken: providerToken, lines: lines))
        }
        return lines
    }

    private func settle(_ job: ClaimedJob, _ action: OutcomeAction, code: String, into result: inout Result) {
        let outcome = job.outcome(action)
        switch action {
        case .completed: result.delivered += 1
        case .retry, .snoozed, .released: result.retried += 1
        default: result.failed += 1
        }
        switch action {
        case .dead(let reason): log.info("dead-lettered: \(reason)", Sender.fields(job, code: code, outcome: .dead))
        case .discarded(let reason): log.info("discarded: \(reason)", Sender.fields(job, code: code, outcome: .discarded))
        case .pruned(_, let reason, _): log.info("token pruned, job discarded: \(reason)", Sender.fields(job, code: code, outcome: .pruned))
        case .retry(let reason, let delay):
            log.debug("attempt \(job.attempt) failed: \(reason); retry in \(String(format: "%.1f", delay)) s", Sender.fields(job, code: code, outcome: .retried))
        default: break
        }
        result.outcomes[job.project ?? "", default: []].append(outcome)
    }

    // MARK: Answers

    /// The completions of this part's tags.
    func handle(_ completions: [HTTPCompletion], into result: inout Result) {
        let now = Date().timeIntervalSince1970
        for completion in completions {
            if let name = probes[completion.tag] {
                probeAnswered(name, completion.result, now: now, into: &result)
                continue
            }
            guard let entry = inFlight.removeValue(forKey: completion.tag) else { continue }
            let job = entry.job
            let name = job.project ?? ""
            lanes[name]?.inFlight -= 1
            guard lanes[name] != nil else { continue }
            let action: APNsAction
            switch completion.result {
            case .success(let response):
                // Apple's 200 echoes the apns-id sent (the job's), and only a 5xx may carry
                // Retry-After: the answer's headers are read only when they can matter.
                action = APNsAnswer.action(status: response.status, body: response.body, apnsID: nil,
                                           retryAfter: response.status >= 500 ? response.header("retry-after") : nil)
                lanes[name]?.circuit.answered().map { changed($0, name, detail: "answer", now: now, into: &result) }
                lanes[name]?.unprocessedSince = nil
                result.answerTimes.append(now - entry.sentAt)
                metrics.answeredAPNs(code: response.status == 200 ? "OK" : (Self.reason(response) ?? "HTTP_\(response.status)"),
                                     seconds: now - entry.sentAt, app: name)
            case .failure(let error):
                var answer = APNsAnswer.action(error)
                if case .resend = answer {
                    // Sent again unused, as the FCM sender does, unless Apple's front end has
                    // processed nothing for `unprocessedOutage` seconds: then it is down.
                    let since = lanes[name]?.unprocessedSince ?? now
                    lanes[name]?.unprocessedSince = since
                    if now - since >= SenderMachine.Settings().unprocessedOutage {
                        answer = .outage(reason: "UNPROCESSED (every request for \(SenderMachine.seconds(now - since)) s ended unprocessed)")
                    }
                }
                action = answer
                metrics.answeredAPNs(code: error.kind == .unprocessed ? "UNPROCESSED" : "TRANSPORT", seconds: now - entry.sentAt, app: name)
            }
            act(action, entry, now: now, into: &result)
        }
    }

    private static func reason(_ response: HTTPResponse) -> String? {
        (try? JSONValue.parse(response.body))?["reason"]?.stringValue
    }

    private func act(_ action: APNsAction, _ entry: InFlight, now: Double, into result: inout Result) {
        let job = entry.job
        let name = job.project ?? ""
        let policy = configuration.retryPolicy
        switch action {
        case .delivered(let apnsID):
            metrics.delivered(job, now: now, provider: "apns")
            lanes[name]?.devices.cleared(Self.target(entry.request))
            settle(job, .completed(messageName: apnsID ?? entry.request.apnsID), code: "OK", into: &result)
        case .pruneToken(let reason, let since):
            settle(job, .pruned(token: entry.token, reason: "APNs 410 \(reason): device \(Planning.abbreviated(entry.request.deviceToken))",
                                invalidSince: since.map { Double($0) / 1000 }),
                   code: reason, into: &result)
        case .deadLetter(let reason):
            settle(job, .dead(reason: "APNs: " + reason), code: String(reason.prefix { $0 != ":" }), into: &result)
        case .renewProviderToken:
            entry.keys.token.expired(entry.providerToken)
            if entry.renewed {
                // Expired again with a token made just now: the machine's clock is off, or APNs's.
                settle(job, .released(delay: 5), code: "ExpiredProviderToken", into: &result)
                log.warning("APNs app \(name): ExpiredProviderToken for a token made just now; is this machine's clock right?")
            } else {
                log.info("APNs answered ExpiredProviderToken; a new provider token is made and the job sent again", Sender.fields(job, code: "ExpiredProviderToken"))
                send(job, entry.request, token: entry.token, renewed: true, into: &result)
            }
        case .pauseApp(let reason):
            // Once per refusal: the answers of the requests still in flight say the same.
            if lanes[name]?.refused == false {
                result.events.append(.forProject(name, .apnsAppRefused(reason: reason)))
                lanes[name]?.refused = true
            }
            settle(job, .released(delay: 1), code: String(reason.prefix { $0 != ":" }), into: &result)
        case .deviceBackoff(let reason):
            guard var lane = lanes[name] else { return }
            let delay = lane.devices.refused(.device, target: Self.target(entry.request), retryAfter: nil, now: now, random: draw())
            lanes[name] = lane
            metrics.snoozed(project: name)
            log.debug("APNs TooManyRequests: device \(Planning.abbreviated(entry.request.deviceToken)) backs off \(SenderMachine.seconds(delay)) s",
                      ["job_id": .int(job.id), "code": .string("TooManyRequests")])
            // The job's own count of these answers decides too: another process may claim it next.
            let spread = 1 + policy.jitter * draw()
            settle(job, .snoozed(error: "APNs 429 \(reason)", delay: delay, cap: policy.snoozeCap,
                                 backoff: Backoff(first: policy.base * spread, most: policy.cap * spread)),
                   code: "TooManyRequests", into: &result)
        case .holdTokenRenewals(let reason):
            entry.keys.token.tooManyUpdates()
            log.warning("APNs app \(name): \(reason); its provider token is kept and renewed no sooner than in 20 minutes")
            settle(job, .released(delay: 5 * (1 + draw())), code: "TooManyProviderTokenUpdates", into: &result)
        case .retry(let reason, let retryAfter):
            if case .outcome(let outcome) = Planning.retry(job: job, reason: "APNs: " + reason, retryAfter: retryAfter.map(Double.init), quota: false,
                                                           policy: policy, random: draw()) {
                settle(job, outcome.action, code: reason, into: &result)
            }
        case .resend:
            settle(job, .released(delay: draw()), code: "UNPROCESSED", into: &result)
        case .outage(let reason):
            guard var lane = lanes[name] else { return }
            let change = lane.circuit.failed(now: now)
            lanes[name] = lane
            if let change { changed(change, name, detail: reason, now: now, into: &result) }
            if lanes[name]?.circuit.isOpen == true {
                settle(job, .released(delay: lanes[name]!.pause.releaseDelay(now: now, jitter: policy.jitter, random: draw())), code: "TRANSPORT", into: &result)
            } else if case .outcome(let outcome) = Planning.retry(job: job, reason: "APNs unreachable: " + reason, retryAfter: nil, quota: false,
                                                                  policy: policy, random: draw()) {
                settle(job, outcome.action, code: "TRANSPORT", into: &result)
            }
        }
    }

    // MARK: The outage circuit

    private func changed(_ change: FCMCircuit.Change, _ name: String, detail: String, now: Double, into result: inout Result) {
        guard var lane = lanes[name] else { return }
        switch change {
        case .opened(let until):
            if lane.pause.extend(to: until, reason: "APNS_UNREACHABLE (\(detail))", byQuota: false, now: now) {
                result.events.append(.forProject(name, .projectPaused(until: lane.pause.until, reason: lane.pause.reason)))
            }
            log.warning("APNs app \(name): APNs unreachable for every request (\(detail)): holding back its sends and probing until it answers; jobs held are put back without using an attempt")
        case .stillDown(let until):
            if lane.pause.extend(to: until, reason: "APNS_UNREACHABLE (\(detail))", byQuota: false, now: now) {
                result.events.append(.forProject(name, .projectPaused(until: lane.pause.until, reason: lane.pause.reason)))
            }
        case .closed:
            lane.pause.outageEnded(now: now)
            log.info("APNs app \(name): APNs answers again: sending")
        }
        lanes[name] = lane
    }

    /// Probes of the apps whose circuit is open: a GET of the device path, which any APNs answers
    /// (405) without delivering anything; any HTTP answer means it is reachable.
    func sendProbes(now: Double) {
        for (name, lane) in lanes where lane.circuit.probeDue(now: now) {
            lanes[name]?.circuit.probeSent()
            client.submit(HTTPRequest(method: "GET", url: lane.keys.deviceURL + String(repeating: "0", count: 64)), tag: lane.probeTag)
        }
    }

    private func probeAnswered(_ name: String, _ answer: Swift.Result<HTTPResponse, HTTPClientError>, now: Double, into result: inout Result) {
        guard var lane = lanes[name] else { return }
        let change: FCMCircuit.Change?
        switch answer {
        case .success: change = lane.circuit.answered()
        case .failure: change = lane.circuit.probeFailed(now: now)
        }
        lanes[name] = lane
        if let change { changed(change, name, detail: "probe", now: now, into: &result) }
    }

    // MARK: Upkeep

    /// Once a minute: forget device holds long over, and lanes idle a while.
    func prune(now: Double) {
        for name in Array(lanes.keys) {
            lanes[name]!.devices.prune(now: now)
            let lane = lanes[name]!
            if lane.inFlight == 0, now - lane.lastUsed >= Sender.idleLaneSeconds, !lane.pause.isPaused(at: now), !lane.circuit.isOpen {
                lanes[name] = nil
                probes[lane.probeTag] = nil
            }
        }
    }

    /// At shutdown: what never got an answer, to retry.
    func abandon() -> [JobOutcome] {
        defer { inFlight.removeAll() }
        return inFlight.values.map { $0.job.outcome(.retry(error: "shutdown: no answer within the shutdown timeout", delay: 0)) }
    }
}
