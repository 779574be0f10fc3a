import FCM
import Foundation
import HTTPClient
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
    }

    let configuration: WorkerConfiguration
    let client: HTTPClient
    let auth: AccessTokenProvider
    let endpoint: FCMEndpoint
    let groups: DeviceGroupClient
    let inbox: Mailbox<ClaimedJob>
    let outbox: Mailbox<JobOutcome>
    let stop: Flag
    let finished = Flag()
    let log: Logger
    /// The validation rules with the operator's extra fields.
    let rules: MessageRuleSet
    private var inFlight: [UInt64: InFlight] = [:]
    private var nextTag: UInt64 = 1
    private var random = SystemRandomNumberGenerator()
    private let pauseLock = NSLock()
    private var pausedUntilStorage: Double = 0
    private(set) var counters = Counters()

    struct Counters { var sent = 0; var delivered = 0; var retried = 0; var failed = 0 }

    init(configuration: WorkerConfiguration, client: HTTPClient, auth: AccessTokenProvider, endpoint: FCMEndpoint,
         inbox: Mailbox<ClaimedJob>, outbox: Mailbox<JobOutcome>, stop: Flag, log: Logger) {
        self.configuration = configuration
        self.client = client
        self.auth = auth
        self.endpoint = endpoint
        self.groups = DeviceGroupClient(endpoint: endpoint, auth: auth, client: client)
        self.inbox = inbox
        self.outbox = outbox
        self.stop = stop
        self.log = log
        rules = MessageValidator.rules.allowing(extraFields: configuration.extraMessageFields)
    }

    /// Seconds since 1970 before which nothing new is sent (a project or topic quota answer).
    var pausedUntil: Double {
        pauseLock.lock(); defer { pauseLock.unlock() }
        return pausedUntilStorage
    }
    private func pause(until: Double) {
        pauseLock.lock()
        pausedUntilStorage = max(pausedUntilStorage, until)
        pauseLock.unlock()
    }

    func run() {
        var shutdownDeadline: Double? = nil
        while true {
            let now = Date().timeIntervalSince1970
            let arrived = inbox.take()
            if stop.isSet {
                if shutdownDeadline == nil {
                    shutdownDeadline = now + configuration.shutdownTimeout
                    log.info("stopping: \(inFlight.count) requests in flight, waiting up to \(Int(configuration.shutdownTimeout)) s")
                }
                // Not sent yet: back to available, the attempt not counted.
                outbox.put(arrived.map { JobOutcome.released(id: $0.id) })
            } else {
                let pausedFor = pausedUntil - now
                var outcomes: [JobOutcome] = []
                for job in arrived {
                    if pausedFor > 0 {
                        outcomes.append(.released(id: job.id, delay: pausedFor))
                        continue
                    }
                    let preparation = Planning.prepare(job, rules: rules)
                    if case .settled(let outcome) = preparation {
                        outcomes.append(outcome)
                    } else {
                        submit(job, preparation, reauthenticated: false, into: &outcomes)
                    }
                }
                outbox.put(outcomes)
            }
            if let deadline = shutdownDeadline, inFlight.isEmpty || now >= deadline {
                if !inFlight.isEmpty {
                    log.warning("shutdown timeout: \(inFlight.count) requests got no answer; they will be retried")
                    outbox.put(inFlight.values.map {
                        .retry(id: $0.job.id, error: "shutdown: no answer within the shutdown timeout", delay: 0)
                    })
                    inFlight.removeAll()
                }
                finished.set()
                outbox.signal()
                return
            }
            let completions = client.poll(timeoutMilliseconds: 200, extraFileDescriptor: inbox.fileDescriptor)
            if !completions.isEmpty { handle(completions) }
        }
    }

    private func submit(_ job: ClaimedJob, _ preparation: Preparation, reauthenticated: Bool, into outcomes: inout [JobOutcome]) {
        let authorization: String
        do {
            authorization = try auth.authorizationHeader()
        } catch {
            // The token endpoint is down or refuses us: nothing was sent; retry with backoff.
            let job = job
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
            request = HTTPRequest(method: "POST", url: endpoint.sendURL,
                                  headers: ["Authorization: \(authorization)", "Content-Type: application/json"], body: body)
        case .group(let operation, let name, let key, let tokens):
            do {
                request = try groups.request(operation: operation, name: name, key: key, tokens: tokens)
            } catch {
                outcomes.append(.dead(id: job.id, reason: error.message))
                return
            }
        case .settled(let outcome):
            outcomes.append(outcome)
            return
        }
        let tag = nextTag
        nextTag &+= 1
        inFlight[tag] = InFlight(job: job, preparation: preparation, authorization: authorization, reauthenticated: reauthenticated)
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
        for completion in completions {
            guard let entry = inFlight.removeValue(forKey: completion.tag) else { continue }
            let classification: SendClassification
            switch completion.result {
            case .success(let response):
                // A 2xx answer keeps no text, so there is nothing to redact.
                classification = SendClassification(httpStatus: response.status, headers: response.headers, body: response.body, now: now,
                                                    redacting: (200..<300).contains(response.status) ? [] : Self.secrets(of: entry))
            case .failure(let error):
                classification = SendClassification(transport: TransportFailure(error), redacting: Self.secrets(of: entry))
            }
            if let pause = Planning.pause(for: classification, policy: configuration.retryPolicy) {
                self.pause(until: now.timeIntervalSince1970 + pause)
                log.warning("FCM quota exceeded for project \(endpoint.projectID): holding back new sends for \(Int(pause.rounded(.up))) s")
            }
            let decision = Planning.decide(job: entry.job, preparation: entry.preparation, classification: classification,
                                           reauthenticated: entry.reauthenticated, policy: configuration.retryPolicy,
                                           random: Double.random(in: 0..<1, using: &random))
            switch decision {
            case .reauthenticate:
                auth.invalidate(ifHeader: entry.authorization)
                log.info("FCM refused the access token (401); renewing it and sending job \(entry.job.id) again")
                submit(entry.job, entry.preparation, reauthenticated: true, into: &outcomes)
            case .outcome(let outcome):
                switch outcome {
                case .completed: counters.delivered += 1
                case .retry: counters.retried += 1
                default: counters.failed += 1
                }
                if case .retry(_, let reason, let delay) = outcome {
                    log.debug("job \(entry.job.id) attempt \(entry.job.attempt): \(reason); retry in \(String(format: "%.1f", delay)) s")
                } else if case .dead(_, let reason) = outcome {
                    log.info("job \(entry.job.id) dead-lettered: \(reason)")
                }
                outcomes.append(outcome)
            }
        }
        outbox.put(outcomes)
    }

}
