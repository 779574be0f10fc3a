import FCM
import Foundation
import HTTPClient
import JSON
import Logging
import Postgres
import Queue

/// Carries out the wishes recorded in herald.topic_subscriptions (herald.subscribe /
/// herald.unsubscribe) with Instance ID batchAdd / batchRemove. One thread per worker process,
/// with its own database connection and HTTP client, so the send path never waits on it.
///
/// - Claims due rows under a lease (`herald.claim_topic_work`, SKIP LOCKED, so every process of
///   every pool shares the work), at most one request's worth (1,000 tokens) a claim.
/// - One request per topic and action, at most 1,000 tokens each; requests are paced through the
///   project's token bucket in PostgreSQL (`herald.take_project_tokens` under the key
///   `iid:PROJECT`), so every pool of the project together stays under 3,000 a second.
/// - Records each token's answer (`herald.record_topic_results`): done, failed with FCM's code
///   (NOT_FOUND, INVALID_ARGUMENT, ...), or due again after a backoff like a send's (Retry-After
///   honoured, exponential with jitter), up to the retry policy's attempts.
/// - Exactly once in effect through crashes: a worker that dies before recording leaves its
///   lease to expire and the request is made again; adding a token to a topic it is already in
///   (or removing one that is gone) changes nothing at FCM.
final class TopicSubscriptionCarrier: @unchecked Sendable {
    /// Requests a second for the whole project, under FCM's 3,000.
    static let requestsPerSecond = 2_900.0
    /// Attempts before a token is given up on (as a send's max_attempts).
    static let maxAttempts = 25

    let configuration: WorkerConfiguration
    let auth: AccessTokenProvider
    let fcmProject: String
    let stop: Flag
    let log: Logger
    let workerID: String
    var random = JitterRandom()
    var lastWarning = Date.distantPast

    init(configuration: WorkerConfiguration, auth: AccessTokenProvider, fcmProject: String, stop: Flag, log: Logger) {
        self.configuration = configuration
        self.auth = auth
        self.fcmProject = fcmProject
        self.stop = stop
        self.log = log
        workerID = "\(ProcessInfo.processInfo.hostName):\(getpid()):topics"
    }

    struct Row {
        var project: String
        var topic: String
        var token: String
        var removing: Bool
        var generation: Int
        var attempts: Int
    }

    func run() {
        var connection: PGConnection? = nil
        var client: HTTPClient? = nil
        while !stop.isSet {
            do {
                if connection == nil { connection = try PGConnection(url: configuration.databaseURL) }
                if client == nil {
                    var settings = HTTPClientConfiguration()
                    settings.maxConnections = 2
                    settings.requestTimeoutMilliseconds = Int(configuration.requestTimeout * 1000)
                    settings.connectTimeoutMilliseconds = Int(configuration.connectTimeout * 1000)
                    settings.caFile = configuration.caFile
                    client = try HTTPClient(configuration: settings)
                }
                let worked = try pass(connection!, client!)
                if !worked { pause(configuration.pollInterval) }
            } catch {
                // Once a minute at most: a database without migration 110 (run herald migrate)
                // or down for a while must not fill the log.
                if Date().timeIntervalSince(lastWarning) >= 60 {
                    log.warning("topic subscriptions: \(error); trying again (herald migrate creates herald.topic_subscriptions)")
                    lastWarning = Date()
                }
                connection = nil
                pause(max(1, configuration.pollInterval))
            }
        }
    }

    /// Sleeps up to `seconds`, waking early when the process stops.
    func pause(_ seconds: Double) {
        let deadline = Date().addingTimeInterval(seconds)
        while !stop.isSet && Date() < deadline { Thread.sleep(forTimeInterval: min(0.05, max(0, deadline.timeIntervalSinceNow))) }
    }

    /// One claim and its requests; false when nothing was due.
    func pass(_ connection: PGConnection, _ client: HTTPClient) throws -> Bool {
        let claimed = try TopicSubscriptions.claimWork(connection, fcmProject: fcmProject, worker: workerID,
                                                       limit: TopicManagement.maxTokensPerRequest, leaseSeconds: configuration.leaseSeconds)
        guard claimed.rowCount > 0 else { return false }
        var groups: [String: [Row]] = [:]
        var order: [String] = []
        for i in 0..<claimed.rowCount {
            let row = Row(project: claimed[i, 0] ?? "", topic: claimed[i, 1] ?? "", token: claimed[i, 2] ?? "",
                          removing: claimed[i, 3] == "removing", generation: claimed.int(i, 4) ?? 0, attempts: claimed.int(i, 5) ?? 1)
            let key = "\(row.removing ? "-" : "+")\(row.topic)"
            if groups[key] == nil { order.append(key) }
            groups[key, default: []].append(row)
        }
        let claimedAt = Date()
        var released: [JSONValue] = []
        for key in order {
            let rows = groups[key]!
            var start = 0
            while start < rows.count {
                let chunk = Array(rows[start..<min(rows.count, start + TopicManagement.maxTokensPerRequest)])
                start += chunk.count
                // A claim of many small topics must not outlive its lease (another process would
                // then ask the same again): past half the lease, the rest goes back unasked.
                if Date().timeIntervalSince(claimedAt) > configuration.leaseSeconds / 2 || stop.isSet {
                    released += chunk.map { outcome($0, "retry", error: nil, delay: 0) }
                    continue
                }
                try pace(connection)
                let results = perform(chunk, client)
                try TopicSubscriptions.recordResults(connection, results)
            }
        }
        if !released.isEmpty {
            try TopicSubscriptions.recordResults(connection, released)
        }
        return true
    }

    /// Waits for the project's bucket to grant one request.
    func pace(_ connection: PGConnection) throws {
        while true {
            let granted = try TopicSubscriptions.takeRequestToken(connection, bucket: "iid:" + fcmProject, rate: Self.requestsPerSecond)
            if granted || stop.isSet { return }
            Thread.sleep(forTimeInterval: 1 / Self.requestsPerSecond)
        }
    }

    /// One request for `rows` (one topic, one action); the outcome of each row.
    func perform(_ rows: [Row], _ client: HTTPClient) -> [JSONValue] {
        let action: TopicManagement.Action = rows[0].removing ? .remove : .add
        let topic = rows[0].topic
        let answer: TopicManagement.Answer
        let authorization: String
        do {
            authorization = try auth.authorizationHeader()
        } catch {
            return retry(rows, reason: "no access token: \(error)", retryAfter: nil, quota: false)
        }
        let request = TopicManagement.request(base: configuration.iidBaseURL, action: action, topic: topic,
                                              tokens: rows.map(\.token), authorization: authorization)
        do {
            let bearer = authorization.hasPrefix("Bearer ") ? String(authorization.dropFirst(7)) : authorization
            answer = TopicManagement.interpret(try client.perform(request), tokenCount: rows.count, secrets: [bearer])
        } catch {
            return retry(rows, reason: "\(error)", retryAfter: nil, quota: false)
        }
        switch answer {
        case .perToken(let errors):
            var failed = 0
            // Tokens to ask again come back together, in one request.
            let again = zip(rows, errors).filter { $0.1.map(TopicManagement.retryableTokenErrors.contains) ?? false }
            let delay = again.isEmpty ? 0 : backoff(again.map(\.0), retryAfter: nil, quota: again.contains { $0.1 == "RESOURCE_EXHAUSTED" })
            let outcomes = zip(rows, errors).map { row, error -> JSONValue in
                guard let error else { return outcome(row, "done", error: nil) }
                if TopicManagement.retryableTokenErrors.contains(error) { return retry(row, reason: error, delay: delay) }
                failed += 1
                return outcome(row, "failed", error: error)
            }
            log.debug("topic \(topic): \(action.rawValue) of \(rows.count) tokens answered, \(failed) refused")
            return outcomes
        case .retry(let reason, let retryAfter, let quota, let authentication):
            if authentication { auth.invalidate(ifHeader: authorization) }
            log.info("topic \(topic): \(action.rawValue) of \(rows.count) tokens to be tried again: \(reason)")
            return retry(rows, reason: reason, retryAfter: retryAfter, quota: quota)
        case .refused(let reason):
            log.warning("topic \(topic): \(action.rawValue) of \(rows.count) tokens refused: \(reason)")
            return rows.map { outcome($0, "failed", error: reason) }
        }
    }

    func outcome(_ row: Row, _ kind: String, error: String?, delay: Double? = nil) -> JSONValue {
        var object = JSONObject(["project": .string(row.project), "topic": .string(row.topic), "token": .string(row.token),
                                 "generation": JSONValue(row.generation), "outcome": .string(kind)])
        if let error { object["error"] = .string(String(error.prefix(500))) }
        if let delay { object["delay"] = .number(String(format: "%.3f", delay)) }
        return .object(object)
    }

    /// One delay for a request's tokens (so they come back together): the retry policy's, as for
    /// a send (Retry-After honoured, exponential with jitter), after the most attempts among them.
    func backoff(_ rows: [Row], retryAfter: Double?, quota: Bool) -> Double {
        configuration.retryPolicy.delay(attempt: rows.map(\.attempts).max() ?? 1, retryAfter: retryAfter, quota: quota, using: &random)
    }

    func retry(_ rows: [Row], reason: String, retryAfter: Double?, quota: Bool) -> [JSONValue] {
        let delay = backoff(rows, retryAfter: retryAfter, quota: quota)
        return rows.map { retry($0, reason: reason, delay: delay) }
    }

    func retry(_ row: Row, reason: String, delay: Double) -> JSONValue {
        if row.attempts >= Self.maxAttempts {
            return outcome(row, "failed", error: "gave up after \(row.attempts) attempts; last error: \(reason)")
        }
        return outcome(row, "retry", error: reason, delay: delay)
    }
}
