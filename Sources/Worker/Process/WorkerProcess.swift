import FCM
import Foundation
import HTTPClient
import Lifecycle
import Postgres
import Queue
import Synchronization

public struct WorkerStartupError: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// One worker process: a store thread (PostgreSQL: claim, record, LISTEN, maintenance) and a
/// sender thread (HTTP/2 to FCM), joined by two mailboxes, beside the topic carrier and the
/// vacuum; all four are `Service`s run by one `ServiceGroup`.
public final class WorkerProcess: @unchecked Sendable {
    public let configuration: WorkerConfiguration
    public let stop = Flag()
    /// The group `run()` runs, once it has started them (for `beginShutdown`).
    private let running = Mutex<ServiceGroup?>(nil)
    let log: Logger
    /// The one project's key (or the pool's own, for the jobs of no project); nil in a worker
    /// carrying several projects without a key of the pool's own.
    let account: ServiceAccount?
    /// The key file the account was read from (nil: an environment variable's key).
    let keyPath: String?
    let auth: AccessTokenProvider?
    let metrics: WorkerMetrics

    /// Checks the credentials and the database before anything runs, so a bad setting stops
    /// start-up with a message that names it.
    public init(configuration: WorkerConfiguration) throws {
        var configuration = configuration
        log = Logger(level: configuration.logLevel, format: configuration.logFormat, prefix: "herald work[\(getpid())]")
        metrics = WorkerMetrics.fromEnvironment(log: log)
        if let carried = configuration.carries {
            // Each project's key is read when the project first has work (StoreProjects); the
            // pool's own, for the jobs of no project, now, as a worker of no project does.
            if carried == .registry, !configuration.credentialsPath.isEmpty {
                do {
                    let account = configuration.endpoints.account(try ServiceAccount.load(path: configuration.credentialsPath))
                    self.account = account
                    auth = AccessTokenProvider(account: account, caFile: configuration.caFile)
                } catch {
                    throw WorkerStartupError("GOOGLE_APPLICATION_CREDENTIALS: \(error)")
                }
                keyPath = configuration.credentialsPath
            } else {
                account = nil
                auth = nil
                keyPath = nil
            }
            self.configuration = configuration
            return
        } else if let name = configuration.project {
            // The registry's credentials, checked against the FCM project it names.
            do {
                let connection = try PGConnection(url: configuration.databaseURL)
                if try APNsApps.entry(connection, name: name) != nil {
                    // An APNs app is sent by a worker carrying projects (StoreProjects and the
                    // sender's APNs part): this one carries the app alone, its key read when it
                    // first has work.
                    configuration.carries = .named([name])
                    configuration.project = nil
                    account = nil
                    auth = nil
                    keyPath = nil
                    self.configuration = configuration
                    return
                }
                let project = try Project.load(connection, name: name)
                account = configuration.endpoints.account(try project.account(environment: ProcessInfo.processInfo.environment))
                keyPath = project.credentials.hasPrefix("env:") ? nil : project.credentials
                // The registry's ceiling for the project, when it has one, over --max-rate.
                if let rate = project.maxRate { configuration.maxRate = rate }
            } catch let problem as Project.Problem {
                throw WorkerStartupError(problem.description)
            } catch {
                throw WorkerStartupError("--project \(name): \(error)")
            }
        } else {
            do {
                account = configuration.endpoints.account(try ServiceAccount.load(path: configuration.credentialsPath))
                keyPath = configuration.credentialsPath
            } catch {
                throw WorkerStartupError("GOOGLE_APPLICATION_CREDENTIALS: \(error)")
            }
        }
        auth = AccessTokenProvider(account: account!, caFile: configuration.caFile)
        self.configuration = configuration
    }

    /// Runs until stopped (or drained). Returns the process exit status.
    public func run() throws -> Int32 {
        let connection: PGConnection
        do {
            connection = try PGConnection(url: configuration.databaseURL)
        } catch {
            throw WorkerStartupError("DATABASE_URL: \(error)")
        }
        // The store thread's statements: a silent path to PostgreSQL is given up on and reopened.
        try connection.limitStatements(to: configuration.statementTimeout)
        guard try Administration.isMigrated(connection) else {
            throw WorkerStartupError("the database has no herald schema yet; run `herald migrate` first (DATABASE_URL \(PGConnection.redacted(configuration.databaseURL)))")
        }
        var clientConfiguration = HTTPClientConfiguration()
        clientConfiguration.maxStreamsPerConnection = configuration.maxStreamsPerConnection
        clientConfiguration.connections(toCarry: configuration.concurrency)
        clientConfiguration.requestTimeoutMilliseconds = Int(configuration.requestTimeout * 1000)
        clientConfiguration.connectTimeoutMilliseconds = Int(configuration.connectTimeout * 1000)
        clientConfiguration.caFile = configuration.caFile
        let client = try HTTPClient(configuration: clientConfiguration)
        metrics.databaseConnected(true)  // metrics hook: readiness
        if auth != nil {
            guard try firstAccessToken() else { return 0 }
        }
        // The keys the sender sends with: the one project's, fixed; or, carrying several, each
        // project's as the store thread takes it up.
        let ring = ProjectKeyRing()
        let poolKeys = account.map { ProjectKeys(project: configuration.carries == nil ? configuration.project : nil, account: $0, auth: auth!,
                                                 fcmBaseURL: configuration.endpoints.fcm, keyPath: keyPath,
                                                 keyBytes: keyPath.flatMap { FileManager.default.contents(atPath: $0) }) }
        var projects: StoreProjects? = nil
        if let carried = configuration.carries {
            let names: Set<String>? = if case .named(let list) = carried { Set(list) } else { nil }
            projects = StoreProjects(configuration: configuration, ring: ring, names: names, unaddressed: poolKeys, log: log,
                                     registryInterval: configuration.registryPollSeconds)
            projects?.metrics = metrics
        } else if let poolKeys {
            ring.put(poolKeys)
        }
        if configuration.carries == nil, let name = configuration.project, try Project.credentialsRestored(connection, name: name) {
            log.info("project \(name): its key works again; its pause for the key is lifted")
        }

        // Ready: visible as a worker in pg_stat_activity (herald bench waits for this).
        try Administration.identifyAsWorker(connection)
        metrics.tokenHeld(true)  // metrics hook: readiness (the first token was fetched above)
        let inbox = Mailbox<ClaimedJob>()
        let outbox = Mailbox<SenderEvent>()
        let leaseBook = LeaseBook(leaseSeconds: configuration.leaseSeconds)
        let sender = Sender(configuration: configuration, client: client, ring: ring, shared: configuration.carries != nil,
                            inbox: inbox, outbox: outbox, stop: stop, log: log, metrics: metrics, leases: leaseBook)
        let store = StoreLoop(configuration: configuration, connection: connection, inbox: inbox, outbox: outbox,
                              stop: stop, log: log, metrics: metrics, fcmProject: account?.projectID ?? "", leaseBook: leaseBook,
                              projects: projects)
        let queues = "queues \(configuration.queues.isEmpty ? "(all)" : configuration.queues.joined(separator: ","))"
        // Each provider's endpoint is named: FCM's, and APNs's (an app's own, --apns-url, or the
        // emulator in test mode).
        let endpoints = configuration.endpoints
        let against = "FCM at \(endpoints.fcm), APNs at \(endpoints.apnsDescription)"
        switch configuration.carries {
        case .registry?:
            log.info("working every registry entry's jobs (FCM projects and APNs apps, each with its own key)\(account == nil ? "" : " and the jobs of no project") in \(queues) with \(configuration.concurrency) in flight, \(against)\(endpoints.emulator == nil ? "" : " (test mode: every provider goes to the emulator)"), with \(HTTPClient.libraryVersion)")
        case .named(let names)?:
            log.info("working the jobs of \(names.joined(separator: ", ")) in \(queues) with \(configuration.concurrency) in flight, each with its own key, \(against), with \(HTTPClient.libraryVersion)")
        case nil:
            log.info("working \(configuration.project.map { "project \($0)'s jobs in " } ?? "")\(queues) with \(configuration.concurrency) in flight against \(poolKeys?.sendURL ?? "") with \(HTTPClient.libraryVersion)")
        }
        let log = self.log
        let vacuum = JobsVacuum(databaseURL: configuration.databaseURL) { event in
            switch event {
            case .ran(let result):
                log.log(result)
            case .failed(let error):
                log.warning("checking whether herald.jobs needs a VACUUM failed (autovacuum still runs; trying again): \(error)")
            }
        }
        // herald.topic_subscriptions: a thread of its own (TopicSubscriptionCarrier.swift). A
        // worker of one project sends them with its key; a worker carrying several sends each
        // registry project's with that project's key, and those of no project with the pool's own.
        let own = auth.map { TopicSubscriptionCarrier.Own(auth: $0, fcmProject: account!.projectID) }
        let carrier: TopicSubscriptionCarrier?
        if let carried = configuration.carries {
            let names: [String]? = if case .named(let list) = carried { list } else { nil }
            carrier = TopicSubscriptionCarrier(configuration: configuration, own: own,
                                               carried: .init(names: names, skip: configuration.skippedProjects.sorted(), ring: ring),
                                               stop: stop, log: log)
        } else {
            carrier = own.map { TopicSubscriptionCarrier(configuration: configuration, own: $0, carried: nil, stop: stop, log: log) }
        }
        // Stopped in reverse order: the store first (it returns only once the sender has finished
        // and its outcomes are recorded), then the sender, the topic carrier and the vacuum. The
        // store's return (a stop, a drain) ends the group; the vacuum's (a role that may not
        // VACUUM) does not.
        var members: [ServiceGroup.Member] = [.init(vacuum, whenReturns: .ignore, stackSize: 1 << 20)]
        if let carrier { members.append(.init(carrier)) }
        members += [.init(sender, stackSize: 1 << 20), .init(store)]
        // A rotated key file: stop gracefully; the supervisor starts this worker again with it.
        // (A worker carrying several projects takes each project's new key up in place.)
        if let keyPath, let account {
            let watch = KeyWatch(path: keyPath, fcmProject: account.projectID, log: log) { [weak self] in self?.beginShutdown() }
            members.insert(.init(watch, whenReturns: .ignore), at: 0)
        }
        let group = ServiceGroup(members, maximumShutdownDuration: configuration.shutdownTimeout + 10, log: { log.debug($0) })
        running.withLock { $0 = group }
        if stop.isSet { group.beginShutdown() }
        let report = group.run()
        stop.set()
        var status: Int32 = 0
        if let failure = report.failure {
            if let exit = failure.error as? StoreLoopExit {
                status = exit.status
            } else {
                log.error("\(failure)")
                status = 1
            }
        }
        if let carrier, report.stillRunning.contains(carrier.name) {
            log.warning("the topic subscription request in flight did not finish in time; its tokens are asked again when the lease ends")
        }
        if report.stillRunning.contains(store.name) {
            log.error("the store loop did not stop within \(Int(group.maximumShutdownDuration)) s; exiting with its outcomes unrecorded (their jobs come back when their lease runs out)")
            status = 1
        }
        let c = sender.counters
        func count(_ n: Int, _ one: String, _ many: String) -> String { "\(n) \(n == 1 ? one : many)" }
        log.info("stopped: \(count(c.sent, "request", "requests")) sent, \(c.delivered) delivered, \(c.retried) to retry, "
                 + "\(c.failed) settled otherwise; \(count(store.recorded, "outcome", "outcomes")) recorded")
        return status
    }

    /// Fetches the first access token before any job is claimed. A key the token endpoint refuses
    /// (a 4xx such as invalid_grant) is a start-up error, not 10,000 retries; an endpoint that
    /// cannot be reached (or fails on its side) is tried again with backoff (1 s, 2 s ... 30 s)
    /// while the worker stays up and /readyz says it holds no token. Returns false when a stop
    /// was asked for while waiting.
    private func firstAccessToken() throws -> Bool {
        var delay = 1.0
        while true {
            do {
                _ = try auth!.authorizationHeader()
                return true
            } catch where error.refused {
                throw WorkerStartupError("cannot get an access token for \(account!.clientEmail) from \(account!.tokenURI): \(error)")
            } catch {
                metrics.tokenHeld(false)
                log.warning("no access token yet (\(error)); trying again in \(Int(delay)) s, not ready until one comes")
            }
            let until = Date().timeIntervalSince1970 + delay
            while Date().timeIntervalSince1970 < until {
                if stop.isSet { return false }
                usleep(100_000)  // the pace of looking at the stop flag while backing off
            }
            delay = min(30, delay * 2)
        }
    }

    /// Blocks SIGTERM and SIGINT in the calling thread and the threads it starts later. Call it
    /// first thing in a worker process: a SIGTERM that arrives during start-up then waits for
    /// `handleTerminationSignals` and stops the worker cleanly instead of killing it.
    public static func blockTerminationSignals() {
        ShutdownSignals.termination.block()
    }

    /// A graceful stop: no new claims, what is in flight finishes (up to the shutdown timeout),
    /// unsent jobs go back, then the other services stop; bounded by the shutdown timeout plus
    /// 10 s, under the supervisor's grace before it kills the process.
    public func beginShutdown() {
        stop.set()
        running.withLock { $0 }?.beginShutdown()
    }

    /// Stops the process on SIGTERM or SIGINT (every one received; a repeat changes nothing).
    /// Handled here rather than by the worker's service group: a signal during start-up, before
    /// the group exists, must stop the worker too (`stop` is looked at before the group starts).
    public func handleTerminationSignals() {
        let log = self.log
        ShutdownSignals.termination.handle { signal in
            log.info("received \(ShutdownSignals.name(signal)): no new claims; finishing what is in flight")
            self.beginShutdown()
        }
    }
}
