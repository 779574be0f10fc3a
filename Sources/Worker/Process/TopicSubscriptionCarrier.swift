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
///   every pool shares the work), at most one request's worth (1,000 tokens) a claim. A worker
///   carrying many projects claims those of its registry projects too
///   (`herald.claim_carried_topic_work`) and sends each project's rows with that project's own
///   key, as its jobs: the store thread's keys when it holds the project (`ProjectKeyRing`),
///   else keys loaded here from the registry entry, checked against its FCM project and
///   dropped again once the project has had no subscription work for `idleSeconds`.
/// - One request per project, topic and action, at most 1,000 tokens each; requests are paced
///   through the FCM project's token bucket in PostgreSQL (`herald.take_project_tokens` under
///   the key `iid:PROJECT`), so every pool of the project together stays under 3,000 a second.
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

    /// A project's keys loaded here unused this long are dropped (as the store thread drops an
    /// idle project's), so the carrier's memory follows the projects with subscriptions to make.
    static let idleSeconds = 300.0
    /// How often a key file loaded here is compared with what it was read from (a rotation).
    static let keyCheckSeconds = 5.0

    /// The pool's own key and its FCM project: the rows of no project (and of that FCM project).
    struct Own {
        var auth: AccessTokenProvider
        var fcmProject: String
    }

    /// The registry projects a worker carrying many of them makes subscriptions for.
    struct Carried {
        /// Every registry project (nil), or these.
        var names: [String]?
        /// Left to another pool (`herald work --skip-project`).
        var skip: [String]
        /// The keys the store thread holds for the projects with due jobs.
        var ring: ProjectKeyRing
    }

    /// Keys of a carried project this carrier loaded itself (the store thread held none).
    struct Held {
        var keys: ProjectKeys
        /// The entry's reference the keys were read from.
        var credentials: String
        var lastUsed: Double
        var checkedAt: Double
    }

    let configuration: WorkerConfiguration
    let own: Own?
    let carried: Carried?
    let stop: Flag
    let log: Logger
    let workerID: String
    var random = JitterRandom()
    var lastWarning = Date.distantPast
    /// By registry name; `dropIdle` keeps it to the projects in use.
    private(set) var held: [String: Held] = [:]
    /// One client for the token requests of the keys held here (made at the first).
    private var tokenClient: HTTPClient?

    /// A worker of one FCM project (or of the jobs of no project): every row with `own`.
    convenience init(configuration: WorkerConfiguration, auth: AccessTokenProvider, fcmProject: String, stop: Flag, log: Logger) {
        self.init(configuration: configuration, own: Own(auth: auth, fcmProject: fcmProject), carried: nil, stop: stop, log: log)
    }

    init(configuration: WorkerConfiguration, own: Own?, carried: Carried?, stop: Flag, log: Logger) {
        self.configuration = configuration
        self.own = own
        self.carried = carried
        self.stop = stop
        self.log = log
        workerID = "\(ProcessInfo.processInfo.hostName):\(getpid()):topics"
    }

    struct Row {
        /// The registry project whose key the row goes out with (nil: the pool's own key).
        var keysOf: String?
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
        dropIdle(now: Date().timeIntervalSince1970)
        let claimed: PGResult
        // The registry name comes first in the carried claim's rows; the one-project claim has none.
        let first: Int
        if let carried {
            claimed = try TopicSubscriptions.claimCarriedWork(connection, ownFCMProject: own?.fcmProject, names: carried.names, skip: carried.skip,
                                                              worker: workerID, limit: TopicManagement.maxTokensPerRequest,
                                                              leaseSeconds: configuration.leaseSeconds)
            first = 1
        } else if let own {
            claimed = try TopicSubscriptions.claimWork(connection, fcmProject: own.fcmProject, worker: workerID,
                                                       limit: TopicManagement.maxTokensPerRequest, leaseSeconds: configuration.leaseSeconds)
            first = 0
        } else {
            return false
        }
        guard claimed.rowCount > 0 else { return false }
        var groups: [String: [Row]] = [:]
        var order: [String] = []
        for i in 0..<claimed.rowCount {
            let row = Row(keysOf: first == 1 ? claimed[i, 0] : nil,
                          project: claimed[i, first] ?? "", topic: claimed[i, first + 1] ?? "", token: claimed[i, first + 2] ?? "",
                          removing: claimed[i, first + 3] == "removing", generation: claimed.int(i, first + 4) ?? 0,
                          attempts: claimed.int(i, first + 5) ?? 1)
            // One request per project's key, action and topic (a topic is a project's own).
            let key = "\(row.keysOf ?? "")\u{0}\(row.removing ? "-" : "+")\(row.topic)"
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
                let results: [JSONValue]
                switch authority(for: chunk[0], connection) {
                case .success(let (auth, fcmProject)):
                    try pace(connection, fcmProject: fcmProject)
                    results = perform(chunk, client, auth: auth)
                case .failure(let problem):
                    results = retry(chunk, reason: problem.description, retryAfter: nil, quota: false)
                }
                try TopicSubscriptions.recordResults(connection, results)
            }
        }
        if !released.isEmpty {
            try TopicSubscriptions.recordResults(connection, released)
        }
        return true
    }

    /// Why a row's key cannot be had (names the file or variable, never the key).
    struct NoKey: Error, CustomStringConvertible {
        var description: String
    }

    /// The key `row` goes out with, and the FCM project whose bucket paces it: the pool's own for
    /// the rows of no project; a registry project's own for its rows, the store thread's when it
    /// holds the project, else loaded here.
    func authority(for row: Row, _ connection: PGConnection, now: Double = Date().timeIntervalSince1970)
        -> Result<(AccessTokenProvider, String), NoKey> {
        guard let name = row.keysOf else {
            guard let own else { return .failure(NoKey(description: "no key of the pool's own for the rows of no project")) }
            return .success((own.auth, own.fcmProject))
        }
        if let keys = carried?.ring.keys(for: name), keys.account.projectID == row.project {
            return .success((keys.auth, row.project))
        }
        do {
            let keys = try heldKeys(name, fcmProject: row.project, connection, now: now)
            return .success((keys.auth, row.project))
        } catch let problem as NoKey {
            return .failure(problem)
        } catch {
            return .failure(NoKey(description: "project \(name): \(error)"))
        }
    }

    /// Project `name`'s keys loaded here: kept while in use; every `keyCheckSeconds` its registry
    /// entry and key file are looked at again (a changed entry or a new key is taken up, a key
    /// that became unusable is not used).
    func heldKeys(_ name: String, fcmProject: String, _ connection: PGConnection, now: Double) throws -> ProjectKeys {
        var current: Project? = nil
        if var entry = held[name], entry.keys.account.projectID == fcmProject {
            if now - entry.checkedAt < Self.keyCheckSeconds {
                entry.lastUsed = now
                held[name] = entry
                return entry.keys
            }
            current = try ProjectRegistry.entry(connection, name: name)
            if let current, current.credentials == entry.credentials, current.fcmProjectID == fcmProject,
               entry.keys.keyPath.map({ FileManager.default.contents(atPath: $0) == entry.keys.keyBytes }) ?? true {
                entry.lastUsed = now
                entry.checkedAt = now
                held[name] = entry
                return entry.keys
            }
        } else {
            current = try ProjectRegistry.entry(connection, name: name)
        }
        held[name] = nil
        guard let entry = current, entry.fcmProjectID == fcmProject else {
            throw NoKey(description: "project \(name) is no longer the registry's entry for FCM project \(fcmProject)")
        }
        let keyPath = entry.credentials.hasPrefix("env:") ? nil : entry.credentials
        let bytes = keyPath.flatMap { FileManager.default.contents(atPath: $0) }
        // Checked against the entry's FCM project: a row never goes out with another project's key.
        let account = configuration.endpoints.account(try entry.account(environment: ProcessInfo.processInfo.environment))
        if tokenClient == nil { tokenClient = try AccessTokenProvider.tokenClient(caFile: configuration.caFile) }
        let auth = AccessTokenProvider(account: account, caFile: configuration.caFile, client: tokenClient)
        let keys = ProjectKeys(project: name, account: account, auth: auth, fcmBaseURL: configuration.endpoints.fcm, keyPath: keyPath, keyBytes: bytes)
        held[name] = Held(keys: keys, credentials: entry.credentials, lastUsed: now, checkedAt: now)
        return keys
    }

    /// Forgets the keys of projects unused for `idleSeconds`.
    func dropIdle(now: Double) {
        for (name, entry) in held where now - entry.lastUsed >= Self.idleSeconds { held[name] = nil }
    }

    /// Waits for the FCM project's bucket to grant one request.
    func pace(_ connection: PGConnection, fcmProject: String) throws {
        while true {
            let granted = try TopicSubscriptions.takeRequestToken(connection, bucket: "iid:" + fcmProject, rate: Self.requestsPerSecond)
            if granted || stop.isSet { return }
            Thread.sleep(forTimeInterval: 1 / Self.requestsPerSecond)
        }
    }

    /// One request for `rows` (one topic, one action); the outcome of each row.
    func perform(_ rows: [Row], _ client: HTTPClient, auth: AccessTokenProvider) -> [JSONValue] {
        let action: TopicManagement.Action = rows[0].removing ? .remove : .add
        let topic = rows[0].topic
        let answer: TopicManagement.Answer
        let authorization: String
        do {
            authorization = try auth.authorizationHeader()
        } catch {
            return retry(rows, reason: "no access token: \(error)", retryAfter: nil, quota: false)
        }
        let request = TopicManagement.request(base: configuration.endpoints.iid, action: action, topic: topic,
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
