import APNs
import FCM
import Glibc
import HTTPServer
import JSON
import Synchronization

/// Serves every request of the emulator; one instance is shared by the server's loop threads,
/// with its state split over a few short-held locks (tokens, faults, groups, messages, stats).
final class Backend: Sendable {
    let configuration: EmulatorConfiguration
    let credentials: Credentials
    let store: MessageStore
    let stats = SendStatistics()
    /// FCM's Data API, from the messages delivered.
    let deliveryData: DeliveryDataBook
    /// APNs's provider API, on the same port by path (`/3/device/{token}`).
    let apns: APNsStandIn
    /// The browsers' push services (Web Push), on the same port by path (`/webpush/...`).
    let webPush: WebPushStandIn
    private let groups = Mutex(DeviceGroupRegistry())
    let topics = Mutex(TopicRegistry())
    private let faults: Mutex<FaultState>
    private let nextMessageID = Atomic<Int>(0)
    private let nextSequence = Atomic<Int>(0)
    private let startedAt = realtimeSeconds()
    /// When the emulator started (or was last reset), CLOCK_MONOTONIC: a quota's `start` is
    /// what it allowed then (a minute window with it runs from then).
    private let quotaEpoch = Atomic<UInt64>(monotonicNanoseconds())
    private var startedAtNanoseconds: UInt64 { quotaEpoch.load(ordering: .relaxed) }
    /// Filled in once the server listens (the port is known then).
    let tokenURI = Mutex<String>("")
    let serverStatistics = Mutex<(@Sendable () -> HTTPServerStatistics?)?>(nil)
    let resetServerStatistics = Mutex<(@Sendable () -> Void)?>(nil)

    /// Per-token attempt counts and Retry-After deadlines, and the projects' quotas.
    struct FaultState {
        var attempts: [String: Int] = [:]
        var tokenNotBefore: [String: (deadline: UInt64, code: String, answered: UInt64)] = [:]
        var projectNotBefore: [String: (deadline: UInt64, code: String, answered: UInt64)] = [:]
        /// Each project's quota, counted in the scenario's model (`Scenario.Quota.window`).
        var quotas: [String: ProjectQuotaCounter] = [:]
        /// Per-device (by token) and per-topic limit buckets (`Scenario.limits`).
        var deviceMinute: [String: TokenBucket] = [:]
        var deviceHour: [String: TokenBucket] = [:]
        var collapsible: [String: TokenBucket] = [:]
        var topics: [String: TokenBucket] = [:]
    }

    /// QUOTA_EXCEEDED answers given, for `EmulatorServer.quotaRefusals()`.
    let refusals = Mutex(RefusalLog())
    /// When the serving line is next free (CLOCK_MONOTONIC ns), for the capacity.
    private let lineFree = Mutex<UInt64>(0)
    /// Sends served a second at most (nil: no line).
    private let capacityPerSecond: Double?

    /// Whether plain tokens need counting at all (only for scripts and random choices).
    private let countsEveryAttempt: Bool

    init(configuration: EmulatorConfiguration) {
        self.configuration = configuration
        credentials = Credentials(lifetimeSeconds: configuration.tokenLifetimeSeconds, tokenBytes: configuration.tokenBytes)
        store = MessageStore(capacity: configuration.maxStoredMessages)
        deliveryData = DeliveryDataBook(configuration: configuration.deliveryData)
        apns = APNsStandIn(capacity: configuration.maxStoredMessages, maxTokenAge: configuration.apnsProviderTokenMaxAge)
        webPush = WebPushStandIn(capacity: configuration.maxStoredMessages)
        faults = Mutex(FaultState())
        let scenario = configuration.scenario
        var ranged = false
        if configuration.latencyMilliseconds == nil, case .range = scenario.latency { ranged = true }
        countsEveryAttempt = !scenario.scripts.isEmpty || scenario.errorRate > 0 || ranged
        capacityPerSecond = configuration.capacityPerSecond ?? scenario.capacityPerSecond
    }

    /// Takes this send's turn in the serving line: nanoseconds until it is served and answered
    /// (its wait plus its own share of a second), and until it is served (0 without a capacity).
    private func takeTurn(now: UInt64) -> (answered: UInt64, served: UInt64) {
        guard let capacity = capacityPerSecond else { return (0, 0) }
        let service = UInt64(max(1, 1e9 / capacity))
        let start = lineFree.withLock { free -> UInt64 in
            let start = max(free, now)
            free = start + service
            return start
        }
        return (start - now + service, start - now)
    }

    func handle(_ request: HTTPServerRequest) -> HTTPServerResponse {
        switch Route.match(method: request.method, path: request.path) {
        case .send(let project): return send(project: project, request)
        case .apnsSend(let deviceToken): return apns.handle(request, deviceToken: deviceToken)
        case .apnsBadPath: return APNsStandIn.answer(404, reason: "BadPath", apnsID: APNsIdentifier.random())
        case .webPushSubscribe: return webPush.subscribe(request)
        case .webPushSend(let id): return webPush.handle(request, subscriptionID: id)
        case .webPushMessages: return webPush.listMessages(request)
        case .token: return credentials.exchange(request, tokenURI: tokenURI.withLock { $0 }, now: realtimeSeconds())
        case .manageDeviceGroup: return manageDeviceGroup(request)
        case .topicBatch(let add): return topicBatch(request, add: add)
        case .lookUpDeviceGroup: return lookUpDeviceGroup(request)
        case .listMessages: return listMessages(request)
        case .listRefusals: return listRefusals(request)
        case .listAPNsMessages: return listAPNsMessages(request)
        case .reset:
            reset()
            return HTTPServerResponse(status: 204)
        case .stats: return FCMResponses.json(200, statisticsJSON())
        case .health: return FCMResponses.json(200, ["status": "ok"])
        case .deliveryData(let project, let app):
            let (authorization, scopes) = credentials.authorizeWithScopes(request.header("authorization"), now: realtimeSeconds())
            return deliveryData.list(request, project: project, app: app, authorization: authorization, scopes: scopes)
        case .deliveryDataControl: return deliveryData.control(request)
        case .methodNotAllowed(let allowed):
            return FCMResponses.json(405, ["error": ["code": 405, "message": .string("Method \(request.method) is not allowed here; use \(allowed)."), "status": "METHOD_NOT_ALLOWED"]],
                                     headers: [HTTPHeader(name: "allow", value: allowed)])
        case .notFound:
            return FCMResponses.json(404, ["error": ["code": 404, "message": .string("The requested URL \(request.path) was not found on this server."), "status": "NOT_FOUND"]])
        }
    }

    // MARK: send

    private enum Decision {
        case deliver(latency: Int)
        case fail(ErrorAnswer, latency: Int)
        case invalid(FieldViolation, latency: Int)
    }

    private func send(project: String, _ request: HTTPServerRequest) -> HTTPServerResponse {
        let now = realtimeSeconds()
        let second = Int(now)
        switch credentials.authorize(request.header("authorization"), now: now) {
        case .project(let owner) where owner == project:
            break
        case .project:
            let answer = ErrorAnswer(code: .permissionDenied,
                                     message: "Permission 'cloudmessaging.messages.create' denied on resource '//cloudresourcemanager.googleapis.com/projects/\(project)' (or it may not exist).")
            return finish(FCMResponses.error(answer), answer.code.rawValue, second: second)
        case .missing:
            let answer = ErrorAnswer(code: .unauthenticated,
                                     message: "Request is missing required authentication credential. Expected OAuth 2 access token, login cookie or other valid authentication credential. See https://developers.google.com/identity/sign-in/web/devconsole-project.")
            return finish(FCMResponses.error(answer), answer.code.rawValue, second: second)
        case .invalid, .expired:
            let answer = ErrorAnswer(code: .unauthenticated)
            return finish(FCMResponses.error(answer), answer.code.rawValue, second: second)
        }

        let turn = takeTurn(now: monotonicNanoseconds())
        let queuedMilliseconds = Int((Double(turn.answered) / 1e6).rounded(.up))
        // Parse and validate before taking any lock; the verdict is applied after the quota.
        let verdict: Result<ValidatedSend, FieldViolation>
        do throws(JSONParseError) {
            verdict = RequestChecker.validate(body: try JSONValue.parse(request.body))
        } catch {
            verdict = .failure(FieldViolation(field: "", message: "Invalid JSON payload received. \(error.reason) at byte \(error.offset).",
                                              detail: "Invalid JSON payload received. \(error.reason) at byte \(error.offset)."))
        }
        var key: String? = nil
        var token: String? = nil
        if case .success(let send) = verdict {
            switch send.target {
            case .token(let t):
                token = t
                key = t
            case .topic(let topic): key = "topic:" + topic
            case .condition(let condition): key = "condition:" + condition
            case .fid(let fid): key = "fid:" + fid
            }
        }

        let decision = decide(project: project, key: key, token: token, verdict: verdict, queuedMilliseconds: queuedMilliseconds)
        switch decision {
        case .invalid(let violation, let latency):
            var response = FCMResponses.invalid(violation)
            response.delayMilliseconds = latency
            return finish(response, FCMErrorCode.invalidArgument.rawValue, second: second)
        case .fail(let answer, let latency):
            var response = FCMResponses.error(answer)
            response.delayMilliseconds = latency
            return finish(response, answer.code.rawValue, second: second)
        case .deliver(let latency):
            guard case .success(let send) = verdict else { fatalError("deliver without a valid message") }
            let id = nextMessageID.wrappingAdd(1, ordering: .relaxed).newValue
            let name = "projects/\(project)/messages/\(id)"
            if !send.validateOnly {
                deliver(send, name: name, project: project, body: request.body, now: now + Double(turn.served) / 1e9)
            }
            var response = FCMResponses.sent(name: name)
            response.delayMilliseconds = latency
            stats.recordSend(status: 200, errorCode: nil, delivered: !send.validateOnly, validateOnly: send.validateOnly, second: second)
            return response
        }
    }

    private func finish(_ response: HTTPServerResponse, _ code: String?, second: Int) -> HTTPServerResponse {
        stats.recordSend(status: response.status, errorCode: code, delivered: false, validateOnly: false, second: second)
        return response
    }

    /// Quota, Retry-After bookkeeping, scripts, fault tokens and random errors, under one lock.
    private func decide(project: String, key: String?, token: String?, verdict: Result<ValidatedSend, FieldViolation>,
                        queuedMilliseconds: Int) -> Decision {
        let scenario = configuration.scenario
        let fault = token.flatMap(FaultToken.parse)
        let script = key.flatMap { scenario.script(for: $0) }
        let counting = key != nil && (countsEveryAttempt || fault?.countsAttempts == true || script != nil)
        let limits = scenario.limits
        let needsLock = counting || scenario.quota != nil || !limits.isEmpty || hasDeadlines.load(ordering: .relaxed)
        let now = monotonicNanoseconds()
        // The limits that apply to this send: its device's or its topic's.
        var limitTarget: (subject: QuotaSubjectChoice, name: String, collapsible: Bool)? = nil
        if !limits.isEmpty, case .success(let send) = verdict {
            switch send.target {
            case .token(let t): limitTarget = (.device, t, Self.isCollapsible(send.message))
            case .topic(let topic) where limits.topicPerMinute != nil: limitTarget = (.topic, topic, false)
            default: break
            }
        }

        var attempt = 1
        var violations: [RetryAfterViolation] = []
        var quotaWait: Int? = nil
        var limitWait: Int? = nil
        if needsLock {
            faults.withLock { state in
                // A send before a Retry-After deadline of its project or token breaks it; a
                // deadline passed is forgotten.
                func check(_ notBefore: inout [String: (deadline: UInt64, code: String, answered: UInt64)], _ subject: String, scope: String) {
                    guard let deadline = notBefore[subject] else { return }
                    guard now < deadline.deadline else {
                        notBefore[subject] = nil
                        return
                    }
                    violations.append(RetryAfterViolation(scope: scope, subject: subject, errorCode: deadline.code,
                                                          earlyByMilliseconds: Int((deadline.deadline - now) / 1_000_000),
                                                          afterAnswerMilliseconds: Int(now > deadline.answered ? (now - deadline.answered) / 1_000_000 : 0)))
                }
                check(&state.projectNotBefore, project, scope: "project")
                if let key { check(&state.tokenNotBefore, key, scope: "token") }
                if let target = limitTarget {
                    limitWait = Self.takeLimits(limits, target: target, state: &state, now: now)
                }
                if limitWait == nil, let quota = scenario.quota {
                    var counter = state.quotas[project] ?? ProjectQuotaCounter(quota, epoch: startedAtNanoseconds, now: now)
                    quotaWait = counter.take(now: now)
                    state.quotas[project] = counter
                }
                if quotaWait == nil, limitWait == nil, counting, let key {
                    attempt = (state.attempts[key] ?? 0) + 1
                    state.attempts[key] = attempt
                }
            }
        }
        for violation in violations { stats.recordViolation(violation) }

        let latency = latencyMilliseconds(key: key ?? project, attempt: attempt) + queuedMilliseconds
        if let limitWait, let target = limitTarget {
            let answer: ErrorAnswer
            switch scenario.quotaAnswer {
            case .production:
                // FCM's ErrorCode reference names the target's limit and asks for exponential
                // backoff; no Retry-After is documented or reported for it (docs/fcm-limits.md).
                answer = ErrorAnswer(code: .quotaExceeded,
                                     message: target.subject == .device ? "Device message rate exceeded." : "Topic message rate exceeded.",
                                     quotaSubject: target.subject, quotaName: target.name)
            case .legacy:
                answer = ErrorAnswer(code: .quotaExceeded, retryAfter: limitWait, quotaSubject: target.subject, quotaName: target.name)
                remember(retryAfter: limitWait, latency: latency, code: answer.code, project: project, key: key, now: now)
            }
            noteRefusal(answer, key: key ?? project)
            return .fail(answer, latency: latency)
        }
        if let quotaWait, let quota = scenario.quota {
            let answer: ErrorAnswer
            switch scenario.quotaAnswer {
            case .production:
                // The body production was seen to send: the limit stated, nothing about when.
                answer = ErrorAnswer(code: .quotaExceeded, quotaSubject: .rateLimit, quotaName: project, quotaLimitValue: String(quota.perMinute))
            case .legacy:
                answer = ErrorAnswer(code: .quotaExceeded, retryAfter: quotaWait, quotaSubject: .project, quotaName: project)
                remember(retryAfter: quotaWait, latency: latency, code: answer.code, project: project, key: nil, now: now)
            }
            noteRefusal(answer, key: key ?? project)
            return .fail(answer, latency: latency)
        }
        if case .failure(let violation) = verdict { return .invalid(violation, latency: latency) }

        var answer: ErrorAnswer? = nil
        if let script {
            if case .error(let scripted) = script.behaviour(attempt: attempt) { answer = scripted }
        } else if let fault {
            answer = fault.answer(attempt: attempt)
        } else if scenario.errorRate > 0, let key,
                  SeededRandom.unit(seed: scenario.seed, key: key, attempt: attempt, salt: 1) < scenario.errorRate {
            let pick = SeededRandom.unit(seed: scenario.seed, key: key, attempt: attempt, salt: 2)
            answer = scenario.randomErrors[min(scenario.randomErrors.count - 1, Int(pick * Double(scenario.randomErrors.count)))]
        }
        guard var answer else { return .deliver(latency: latency) }
        if answer.code == .quotaExceeded {
            switch answer.quotaSubject ?? .project {
            case .project: answer.quotaName = project
            case .rateLimit:
                answer.quotaName = project
                if answer.quotaLimitValue == nil, let quota = scenario.quota { answer.quotaLimitValue = String(quota.perMinute) }
            case .device, .legacyDevice: answer.quotaName = token ?? key
            case .topic, .legacyTopic:
                if case .success(let send) = verdict, case .topic(let topic) = send.target { answer.quotaName = topic } else { answer.quotaName = key }
            case .none: break
            }
            noteRefusal(answer, key: key ?? project)
        }
        if let seconds = answer.retryAfter, let key {
            remember(retryAfter: seconds, latency: latency, code: answer.code, project: project, key: key, now: now)
        }
        return .fail(answer, latency: latency)
    }

    /// Whether a message collapses: `android.collapse_key`, or an `apns-collapse-id` header.
    static func isCollapsible(_ message: JSONObject) -> Bool {
        if message["android"]?["collapse_key"]?.stringValue != nil { return true }
        if message["apns"]?["headers"]?["apns-collapse-id"]?.stringValue != nil { return true }
        return false
    }

    /// Takes one send from every bucket that applies to `target` when all of them hold one (nil);
    /// otherwise takes nothing and returns the whole seconds until the emptiest allows a send.
    static func takeLimits(_ limits: Scenario.Limits, target: (subject: QuotaSubjectChoice, name: String, collapsible: Bool),
                           state: inout FaultState, now: UInt64) -> Int? {
        var wait: Int? = nil
        func check(_ buckets: inout [String: TokenBucket], perSecond: Double, capacity: Double) {
            var bucket = buckets[target.name] ?? TokenBucket(perSecond: perSecond, capacity: capacity, now: now)
            if let w = bucket.wait(now: now) { wait = max(wait ?? 0, w) }
            buckets[target.name] = bucket
        }
        switch target.subject {
        case .device:
            if let n = limits.devicePerMinute { check(&state.deviceMinute, perSecond: Double(n) / 60, capacity: Double(n)) }
            if let n = limits.devicePerHour { check(&state.deviceHour, perSecond: Double(n) / 3600, capacity: Double(n)) }
            if target.collapsible, let burst = limits.collapsibleBurst, let every = limits.collapsibleEverySeconds {
                check(&state.collapsible, perSecond: 1 / every, capacity: Double(burst))
            }
            guard wait == nil else { return wait }
            if limits.devicePerMinute != nil { state.deviceMinute[target.name]?.takeOne() }
            if limits.devicePerHour != nil { state.deviceHour[target.name]?.takeOne() }
            if target.collapsible, limits.collapsibleBurst != nil { state.collapsible[target.name]?.takeOne() }
        default:
            if let n = limits.topicPerMinute { check(&state.topics, perSecond: Double(n) / 60, capacity: Double(n)) }
            guard wait == nil else { return wait }
            if limits.topicPerMinute != nil { state.topics[target.name]?.takeOne() }
        }
        return nil
    }

    private func noteRefusal(_ answer: ErrorAnswer, key: String) {
        let refusal = QuotaRefusal(target: key, subject: (answer.quotaSubject ?? .project).limitName,
                                   atMilliseconds: Int64(realtimeSeconds() * 1000), retryAfter: answer.retryAfter)
        refusals.withLock { $0.append(refusal) }
    }

    /// Set once any Retry-After was given, so sends skip the lock until then.
    private let hasDeadlines = Atomic<Bool>(false)

    /// The instant before which a request (for `key`, or for the whole project when `key` is nil)
    /// breaks the Retry-After: counted from when the answer leaves, after its latency.
    private func remember(retryAfter seconds: Int, latency: Int, code: FCMErrorCode, project: String, key: String?, now: UInt64) {
        let answered = now + UInt64(latency) * 1_000_000
        let deadline = answered + UInt64(seconds) * 1_000_000_000
        hasDeadlines.store(true, ordering: .relaxed)
        faults.withLock { state in
            if let key {
                state.tokenNotBefore[key] = (deadline, code.rawValue, answered)
            } else {
                state.projectNotBefore[project] = (deadline, code.rawValue, answered)
            }
        }
    }

    private func latencyMilliseconds(key: String, attempt: Int) -> Int {
        if let fixed = configuration.latencyMilliseconds { return fixed }
        switch configuration.scenario.latency {
        case nil: return 0
        case .fixed(let ms): return ms
        case .range(let low, let high):
            let unit = SeededRandom.unit(seed: configuration.scenario.seed, key: key, attempt: attempt, salt: 3)
            return low + Int(unit * Double(high - low + 1)).clamped(to: 0...(high - low))
        }
    }

    private func deliver(_ send: ValidatedSend, name: String, project: String, body: [UInt8], now: Double) {
        let millis = Int64(now * 1000)
        // What FCM's Data API will report: one message per device it reached.
        var devices = 0
        defer { deliveryData.count(project: project, label: DeliveryDataBook.label(of: send.message), messages: devices, now: now) }
        func message(_ target: String, group: String?) -> DeliveredMessage {
            DeliveredMessage(sequence: nextSequence.wrappingAdd(1, ordering: .relaxed).newValue, name: name, projectID: project,
                             target: target, deviceGroup: group, receivedAtMilliseconds: millis, body: body)
        }
        switch send.target {
        case .token(let token):
            // A device group's key as token reaches every member (and is recorded under the key too).
            if token.hasPrefix("APA91b"), let members = groups.withLock({ $0.members(ofKey: token, projectID: project) }) {
                var records = members.map { message("token:" + $0, group: token) }
                devices = records.count
                records.append(message("token:" + token, group: token))
                store.record(records)
            } else {
                devices = 1
                store.record(message("token:" + token, group: nil))
            }
        case .topic(let topic):
            // Every token subscribed through batchAdd gets its copy, recorded under the token.
            let subscribers = topics.withLock { $0.subscribers(project: project, topic: topic) }
            var records = [message("topic:" + topic, group: nil)]
            for token in subscribers.sorted() {
                var copy = message("token:" + token, group: nil)
                copy.viaTopic = topic
                records.append(copy)
            }
            devices = subscribers.count
            store.record(records)
        case .condition(let condition): store.record(message("condition:" + condition, group: nil))
        case .fid(let fid):
            devices = 1
            store.record(message("fid:" + fid, group: nil))
        }
    }

    // MARK: topic subscriptions (Instance ID)

    private func topicBatch(_ request: HTTPServerRequest, add: Bool) -> HTTPServerResponse {
        guard request.header("access_token_auth")?.lowercased() == "true" else {
            return FCMResponses.legacyError(401, "access_token_auth: true is required with an OAuth2 access token")
        }
        let project: String
        switch credentials.authorize(request.header("authorization"), now: realtimeSeconds()) {
        case .project(let owner): project = owner
        case .missing: return FCMResponses.legacyError(401, "Unauthorized: the Authorization: Bearer header is missing")
        case .invalid, .expired: return FCMResponses.legacyError(401, "Unauthorized: the access token is invalid or expired")
        }
        guard let body = try? JSONValue.parse(request.body) else { return FCMResponses.legacyError(400, "the body is not valid JSON") }
        let now = Int64(realtimeSeconds() * 1000)
        switch topics.withLock({ $0.apply(body, project: project, add: add, nowMilliseconds: now) }) {
        case .success(let results):
            var response = FCMResponses.json(200, ["results": .array(results)])
            response.delayMilliseconds = configuration.latencyMilliseconds ?? 0
            return response
        case .failure(let refused):
            if let seconds = refused.retryAfter {
                return FCMResponses.json(refused.status, ["error": .string(refused.message)],
                                         headers: [HTTPHeader(name: "retry-after", value: String(seconds))])
            }
            return FCMResponses.legacyError(refused.status, refused.message)
        }
    }

    // MARK: device groups

    private func deviceGroupProject(_ request: HTTPServerRequest) -> Result<String, DeviceGroupRegistry.Failure> {
        stats.recordDeviceGroupRequest()
        let now = realtimeSeconds()
        guard request.header("access_token_auth")?.lowercased() == "true" else {
            return .failure(.init(status: 401, message: "access_token_auth: true is required with an OAuth2 access token"))
        }
        let owner: String
        switch credentials.authorize(request.header("authorization"), now: now) {
        case .project(let project): owner = project
        case .missing: return .failure(.init(status: 401, message: "Unauthorized: the Authorization: Bearer header is missing"))
        case .invalid, .expired: return .failure(.init(status: 401, message: "Unauthorized: the access token is invalid or expired"))
        }
        guard let sender = request.header("project_id"), !sender.isEmpty else {
            return .failure(.init(status: 400, message: "the project_id header (the sender ID) is required"))
        }
        guard sender == owner else {
            return .failure(.init(status: 401, message: "Unauthorized: the access token does not belong to project \(sender)"))
        }
        return .success(owner)
    }

    private func manageDeviceGroup(_ request: HTTPServerRequest) -> HTTPServerResponse {
        let project: String
        switch deviceGroupProject(request) {
        case .success(let p): project = p
        case .failure(let failure): return FCMResponses.legacyError(failure.status, failure.message)
        }
        guard let body = try? JSONValue.parse(request.body) else {
            return FCMResponses.legacyError(400, "the body is not valid JSON")
        }
        switch groups.withLock({ $0.apply(body, projectID: project) }) {
        case .success(let key): return FCMResponses.json(200, ["notification_key": .string(key)])
        case .failure(let failure): return FCMResponses.legacyError(failure.status, failure.message)
        }
    }

    private func lookUpDeviceGroup(_ request: HTTPServerRequest) -> HTTPServerResponse {
        let project: String
        switch deviceGroupProject(request) {
        case .success(let p): project = p
        case .failure(let failure): return FCMResponses.legacyError(failure.status, failure.message)
        }
        guard let name = request.queryValue("notification_key_name"), !name.isEmpty else {
            return FCMResponses.legacyError(400, "notification_key_name is required")
        }
        switch groups.withLock({ $0.lookUp(name: name, projectID: project) }) {
        case .success(let key): return FCMResponses.json(200, ["notification_key": .string(key)])
        case .failure(let failure): return FCMResponses.legacyError(failure.status, failure.message)
        }
    }

    // MARK: observation

    private func listMessages(_ request: HTTPServerRequest) -> HTTPServerResponse {
        var target: String? = nil
        var limit: Int? = nil
        for item in request.queryItems {
            switch item.name {
            case "token": target = "token:" + item.value
            case "topic": target = "topic:" + item.value
            case "condition": target = "condition:" + item.value
            case "fid": target = "fid:" + item.value
            case "limit":
                guard let n = Int(item.value), n >= 0 else {
                    return FCMResponses.json(400, ["error": .string("limit must be a whole number, not \(item.value)")])
                }
                limit = n
            default:
                return FCMResponses.json(400, ["error": .string("unknown parameter \(item.name); use token, topic, condition, fid or limit")])
            }
        }
        var listed = store.messages(target: target, limit: limit).map(\.json)
        // The APNs side's pushes are listed too, after FCM's, when the listing is of every
        // message or of one token (an APNs device token is hex, matched without regard to case);
        // each says "provider": "apns". /emulator/apns/messages lists them alone.
        let token = target.flatMap { $0.hasPrefix("token:") ? String($0.dropFirst(6)).lowercased() : nil }
        if target == nil || token != nil {
            listed += apns.deliveries(deviceToken: nil).filter { token == nil || $0.deviceToken.lowercased() == token }.map { delivery in
                guard case .object(var object) = delivery.json else { return delivery.json }
                object["provider"] = "apns"
                return .object(object)
            }
            if let limit, listed.count > limit { listed = Array(listed.suffix(limit)) }
        }
        return FCMResponses.json(200, ["count": JSONValue(listed.count), "messages": .array(listed)])
    }

    /// What the APNs side accepted, oldest first: every push, or those to one device token
    /// (`token`, matched without regard to case, as APNs reads hex), the last `limit` of them.
    private func listAPNsMessages(_ request: HTTPServerRequest) -> HTTPServerResponse {
        var token: String? = nil
        var limit: Int? = nil
        for item in request.queryItems {
            switch item.name {
            case "token": token = item.value.lowercased()
            case "limit":
                guard let n = Int(item.value), n >= 0 else {
                    return FCMResponses.json(400, ["error": .string("limit must be a whole number, not \(item.value)")])
                }
                limit = n
            default:
                return FCMResponses.json(400, ["error": .string("unknown parameter \(item.name); use token or limit")])
            }
        }
        var deliveries = apns.deliveries(deviceToken: nil)
        if let token { deliveries = deliveries.filter { $0.deviceToken.lowercased() == token } }
        if let limit, deliveries.count > limit { deliveries = Array(deliveries.suffix(limit)) }
        return FCMResponses.json(200, ["count": JSONValue(deliveries.count), "messages": .array(deliveries.map(\.json))])
    }

    /// The quota answers given, oldest first (the last `RefusalLog.limit` of them): what a
    /// benchmark needs to tell a message's first send from its retries, measured at FCM's side.
    private func listRefusals(_ request: HTTPServerRequest) -> HTTPServerResponse {
        var limit: Int? = nil
        for item in request.queryItems {
            guard item.name == "limit" else {
                return FCMResponses.json(400, ["error": .string("unknown parameter \(item.name); use limit")])
            }
            guard let n = Int(item.value), n >= 0 else {
                return FCMResponses.json(400, ["error": .string("limit must be a whole number, not \(item.value)")])
            }
            limit = n
        }
        var items = refusals.withLock { $0.items }
        if let limit, items.count > limit { items = Array(items.prefix(limit)) }
        let listed: [JSONValue] = items.map { refusal in
            ["target": .string(refusal.target), "limit": .string(refusal.subject),
             "time": .string(Timestamp.rfc3339(milliseconds: refusal.atMilliseconds)),
             "retry_after": refusal.retryAfter.map { JSONValue($0) } ?? .null]
        }
        return FCMResponses.json(200, ["count": JSONValue(listed.count), "refusals": .array(listed)])
    }

    func reset() {
        store.reset()
        deliveryData.reset()
        stats.reset()
        apns.reset()
        webPush.reset()
        topics.withLock { $0 = TopicRegistry() }
        faults.withLock { $0 = FaultState() }
        quotaEpoch.store(monotonicNanoseconds(), ordering: .relaxed)
        refusals.withLock { $0 = RefusalLog() }
        lineFree.withLock { $0 = 0 }
        hasDeadlines.store(false, ordering: .relaxed)
        resetServerStatistics.withLock { $0 }?()
    }

    func statisticsJSON() -> JSONValue {
        let s = stats.snapshot
        let now = realtimeSeconds()
        let second = Int(now)
        let server = serverStatistics.withLock { $0 }?() ?? nil
        let counts = store.counts
        var byStatus = JSONObject()
        for (status, count) in s.byStatus.sorted(by: { $0.key < $1.key }) { byStatus[String(status)] = JSONValue(count) }
        var byError = JSONObject()
        for (code, count) in s.byError.sorted(by: { $0.key < $1.key }) { byError[code] = JSONValue(count) }
        let recent: [JSONValue] = s.recentViolations.map {
            ["scope": .string($0.scope), "subject": .string($0.subject), "error": .string($0.errorCode),
             "early_by_ms": JSONValue($0.earlyByMilliseconds)]
        }
        func rate(_ value: Double) -> JSONValue { .number(String(Int(value.rounded()))) }
        var quotaBySubject = JSONObject()
        for (subject, count) in refusals.withLock({ $0.bySubject }).sorted(by: { $0.key < $1.key }) {
            quotaBySubject[subject] = JSONValue(count)
        }
        return [
            "requests": JSONValue(s.requests),
            "delivered": JSONValue(s.delivered),
            "validate_only": JSONValue(s.validateOnly),
            "by_status": .object(byStatus),
            "by_error": .object(byError),
            "requests_per_second": [
                "last_1s": rate(SendStatistics.rate(s, now: second, span: 1)),
                "last_10s": rate(SendStatistics.rate(s, now: second, span: 10)),
                "last_60s": rate(SendStatistics.rate(s, now: second, span: 60)),
                "peak": JSONValue(s.peakPerSecond),
            ],
            "quota_exceeded_by_limit": .object(quotaBySubject),
            "quota": configuration.scenario.quota.map { quota -> JSONValue in
                ["per_minute": JSONValue(quota.perMinute), "window": .string(quota.window.rawValue),
                 "burst": quota.window == .continuous ? JSONValue(quota.burst ?? quota.perMinute) : .null,
                 "described": .string(quota.described)]
            } ?? .null,
            "retry_after_violations": ["count": JSONValue(s.violations), "recent": .array(recent)],
            "http2_requests": JSONValue(server?.http2Requests ?? 0),
            "http1_requests": JSONValue(server?.http1Requests ?? 0),
            "peak_concurrent_streams": JSONValue(server?.peakConcurrentStreams ?? 0),
            "peak_streams_per_connection": JSONValue(server?.peakStreamsPerConnection ?? 0),
            "goaways_sent": JSONValue(server?.goawaysSent ?? 0),
            "refused_streams": JSONValue(server?.refusedStreams ?? 0),
            "unprocessed_streams": JSONValue(server?.unprocessedStreams ?? 0),
            "active_streams": JSONValue(server?.activeStreams ?? 0),
            "connections_accepted": JSONValue(server?.connectionsAccepted ?? 0),
            "open_connections": JSONValue(server?.openConnections ?? 0),
            "tokens_issued": JSONValue(credentials.tokensIssued),
            "token_grants_rejected": JSONValue(credentials.grantsRejected),
            "device_group_requests": JSONValue(s.deviceGroupRequests),
            "stored_messages": JSONValue(counts.stored),
            "unstored_messages": JSONValue(counts.dropped),
            "uptime_seconds": JSONValue(Int(now - startedAt)),
            "apns": apns.statisticsJSON,
            "webpush": webPush.statisticsJSON,
        ]
    }
}

/// One QUOTA_EXCEEDED answer: the target refused (a token, `topic:NAME`, ...), which limit the
/// answer named (`project` for either shape of the project's quota, `device`, `topic`, `none`,
/// `legacy-device`, `legacy-topic`) and when.
public struct QuotaRefusal: Sendable, Equatable {
    public var target: String
    public var subject: String
    public var atMilliseconds: Int64
    public var retryAfter: Int?
}

/// The last `limit` refusals and counts by limit.
struct RefusalLog {
    static let limit = 200_000
    private(set) var items: [QuotaRefusal] = []
    private(set) var bySubject: [String: Int] = [:]

    mutating func append(_ refusal: QuotaRefusal) {
        if items.count >= Self.limit { items.removeFirst(items.count / 2) }
        items.append(refusal)
        bySubject[refusal.subject, default: 0] += 1
    }
}

/// CLOCK_MONOTONIC in nanoseconds.
func monotonicNanoseconds() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) &* 1_000_000_000 &+ UInt64(ts.tv_nsec)
}

extension Comparable {
    func clamped(to range: ClosedRange<Self>) -> Self { min(max(self, range.lowerBound), range.upperBound) }
}
