import CommandOptions
import Emulator
import FCM
import Foundation
import HTTPClient
import JSON
import Logging
import Postgres
import Queue
import Worker

/// Where a bench run's PostgreSQL and FCM are, as `herald bench` resolved them.
public struct BenchTarget {
    public var databaseURL: String
    /// The private cluster's folder; nil with DATABASE_URL (a server not the bench's own).
    public var clusterDirectory: String?
    public var fcmBaseURL: String
    public var account: ServiceAccount?
    public var caFile: String?
    public var credentialsPath: String
    /// What each `herald work` process of the pool is started with.
    public var childEnvironment: [String: String]
    /// The emulator in this process, when the bench sends to its own.
    public var emulator: EmulatorServer?

    public init(databaseURL: String, clusterDirectory: String?, fcmBaseURL: String, account: ServiceAccount?, caFile: String?,
                credentialsPath: String, childEnvironment: [String: String], emulator: EmulatorServer?) {
        self.databaseURL = databaseURL; self.clusterDirectory = clusterDirectory; self.fcmBaseURL = fcmBaseURL
        self.account = account; self.caFile = caFile; self.credentialsPath = credentialsPath
        self.childEnvironment = childEnvironment; self.emulator = emulator
    }
}

/// The phases of `herald bench` in turn (throughput, latency, the PostgreSQL ceiling, the sends
/// alone), each on an emptied queue, with the features of `--with` set up first.
public final class Bench {
    let settings: BenchSettings
    let environment: BenchTarget
    let log: Logger
    let connection: PGConnection
    let ownDatabase: Bool
    /// Jobs with an id above this are the bench's (herald.jobs was empty when it started).
    var baseID = 0
    /// The private cluster's CPU; nil with DATABASE_URL (its server is not ours to read).
    let serverCPU: ServerCPU?
    /// `--with projects`: the registry projects the throughput and latency jobs are split between.
    var projects: [String] = []
    /// `--with apns`: the APNs app the throughput and latency jobs are all for (the pool then
    /// carries the registry, as `herald work` does, and sends them to the bench's emulator).
    var apnsApp: String?

    public init(settings: BenchSettings, environment: BenchTarget, log: Logger) throws {
        self.settings = settings
        self.environment = environment
        self.log = log
        connection = try PGConnection(url: environment.databaseURL)
        ownDatabase = environment.clusterDirectory != nil
        serverCPU = environment.clusterDirectory.flatMap { ServerCPU.postmasterPID(dataDirectory: $0 + "/data") }.map { ServerCPU(postmasterPID: $0) }
        guard try Administration.isMigrated(connection) else {
            throw UsageError("herald bench: the database at \(PGConnection.redacted(environment.databaseURL)) has no herald schema; run `herald migrate` first")
        }
        if !ownDatabase {
            let count = try BenchmarkJobs.count(connection)
            guard count == 0 else {
                throw UsageError("herald bench: herald.jobs at \(PGConnection.redacted(environment.databaseURL)) holds \(grouped(count)) jobs; the bench needs an empty queue (it would deliver and count them). Use an empty database, or unset DATABASE_URL to use a private one.")
            }
        }
        baseID = try BenchmarkJobs.maxID(connection)
        if settings.profile { try StatementProfile.enable(connection) }
    }

    /// A reading of the cluster's CPU and its children, to take the difference after a phase.
    struct ServerReading {
        var seconds: Double
        var children: Set<Int32>
    }

    func readServer() -> ServerReading? {
        guard let serverCPU, let seconds = serverCPU.seconds() else { return nil }
        return ServerReading(seconds: seconds, children: Set(serverCPU.children()))
    }

    /// CPU seconds the cluster spent since `before`, once the backends of closed connections
    /// have exited, less `excluded` (the bench's own watching).
    func serverSeconds(since before: ServerReading?, excluding excluded: Double = 0) -> Double? {
        guard let serverCPU, let before else { return nil }
        serverCPU.settle(before: before.children)
        return serverCPU.seconds().map { max(0, $0 - before.seconds - excluded) }
    }

    /// `--finished-rows`: the finished jobs a table kept for its retention holds, added after
    /// the queue was emptied for a phase.
    func addFinishedRows() throws {
        guard settings.finishedRows > 0 else { return }
        log.info("adding \(grouped(settings.finishedRows)) finished jobs (--finished-rows)")
        let started = monotonicSeconds()
        try BenchmarkJobs.addFinished(connection, count: settings.finishedRows)
        log.info("added them in \(fixed(monotonicSeconds() - started, 1)) s")
    }

    func resetProfile() throws {
        if settings.profile { try StatementProfile.reset(connection) }
    }

    /// Empties the queue before a phase: TRUNCATE in the bench's own database; elsewhere only
    /// the bench's own jobs are deleted.
    func clear() throws {
        try BenchmarkJobs.clear(connection, ownDatabase: ownDatabase, afterID: baseID)
        if settings.features.contains(.events) { try BenchmarkJobs.clearEvents(connection) }
    }

    /// `--with`: sets each feature up on queue 'default' (the bench's jobs' queue), so that it
    /// runs on every claim and record but holds nothing back.
    func setUpFeatures() throws {
        if ownDatabase {
            // The private cluster outlives a run: what an earlier run set up goes first, so a
            // run without a feature runs without it, and each run starts from the same tables.
            try clear()
            try BenchmarkFeatures.reset(connection)
        }
        for feature in settings.features {
            switch feature {
            case .caps:
                try BenchmarkFeatures.setFrequencyCap(connection)
            case .quietHours:
                try BenchmarkFeatures.setQuietHours(connection)
            case .events:
                try BenchmarkFeatures.setEvents(connection)
            case .projects:
                guard let emulator = environment.emulator else {
                    throw UsageError("herald bench: --with projects needs the bench's own emulator (no GOOGLE_APPLICATION_CREDENTIALS)")
                }
                let folder = (environment.credentialsPath as NSString).deletingLastPathComponent
                for name in BenchmarkFeatures.projectNames {
                    let key = folder + "/\(name)-service-account.json"
                    try emulator.writeServiceAccount(to: key, projectID: "herald-\(name)")
                    try BenchmarkFeatures.addProject(connection, name: name, projectID: "herald-\(name)", credentials: key)
                    projects.append(name)
                }
            case .apns:
                guard let emulator = environment.emulator else {
                    throw UsageError("herald bench: --with apns needs the bench's own emulator (no GOOGLE_APPLICATION_CREDENTIALS)")
                }
                let folder = (environment.credentialsPath as NSString).deletingLastPathComponent
                let key = try emulator.writeAPNsKey(folder: folder)
                try BenchmarkFeatures.addAPNsApp(connection, keyFile: key.path, keyID: key.keyID, teamID: key.teamID,
                                                 topic: emulator.configuration.apnsTopic)
                apnsApp = BenchmarkFeatures.apnsAppName
            }
        }
        if !settings.features.isEmpty { log.info("set up on queue 'default': \(settings.features.map(\.rawValue).joined(separator: ", ")) (--with)") }
    }

    /// The pool's groups of workers: one, for the jobs of no project, or one per project of
    /// `--with projects`, `--processes` divided between them (the same worker processes in all).
    var poolGroups: [Supervisor.Group] {
        projects.isEmpty ? [Supervisor.Group()]
            : projects.map { Supervisor.Group(label: "project \($0)", project: $0, arguments: ["--project", $0]) }
    }

    var processesPerGroup: Int { max(1, settings.processes / poolGroups.count) }

    /// The workers' environment: with `--with apns`, carrying the registry (so the APNs app is
    /// worked) and sending APNs requests to the bench's emulator.
    var workerEnvironment: [String: String] {
        var variables = environment.childEnvironment
        if apnsApp != nil, let emulator = environment.emulator {
            variables["HERALD_WORKER_CARRIES"] = "registry"
            variables["HERALD_APNS_URL"] = emulator.baseURL
        }
        return variables
    }

    func maxID() throws -> Int { try BenchmarkJobs.maxID(connection) }

    var workerArguments: [String] {
        ["work", "--concurrency", String(settings.concurrency), "--log-level", settings.workerLogLevel,
         "--max-rate", String(settings.maxRate)]
    }

    public func runAll() throws -> BenchFigures {
        var figures = BenchFigures(settings: settings)
        figures.cores = ProcessInfo.processInfo.activeProcessorCount
        figures.postgresVersion = try BenchmarkJobs.serverVersion(connection)
        #if DEBUG
        figures.build = "debug"
        #else
        figures.build = "release"
        #endif
        figures.database = ownDatabase ? "private (\(settings.durable ? "durable: fsync on" : "fsync off")) in \(environment.clusterDirectory!)" : PGConnection.redacted(environment.databaseURL)
        figures.fcm = environment.emulator != nil
            ? "emulator in this process (1 thread)"
                + (settings.fcmLatencyMilliseconds > 0 ? ", answering \(settings.fcmLatencyMilliseconds) ms late" : "")
                + (settings.tokenBytes > 0 ? ", \(settings.tokenBytes)-byte access tokens" : ", short access tokens")
            : environment.fcmBaseURL
        if figures.build == "debug" { log.warning("this is a debug build; build with `swift build -c release` for real figures") }

        try setUpFeatures()
        try throughput(&figures)
        try latency(&figures)
        try ceiling(&figures)
        try clear()
        try sendsAlone(&figures)
        return figures
    }

    // MARK: phase 1

    func throughput(_ figures: inout BenchFigures) throws {
        try clear()
        try addFinishedRows()
        let before = try maxID()
        log.info("throughput: enqueueing \(grouped(settings.jobs)) jobs with one INSERT ... SELECT generate_series")
        let enqueueStart = monotonicSeconds()
        try BenchmarkJobs.enqueue(connection, count: settings.jobs, projects: projects, apnsApp: apnsApp)
        figures.enqueueSeconds = monotonicSeconds() - enqueueStart
        try resetProfile()

        let serverBefore = readServer()
        let emulatorBefore = environment.emulator?.cpuSeconds
        let progress = Progress(url: environment.databaseURL, afterID: before, total: settings.jobs, label: "throughput")
        progress.start()
        log.info("throughput: \(settings.processes) worker processes, herald work --drain")
        let supervisor = Supervisor(processes: processesPerGroup, arguments: workerArguments + ["--drain"],
                                    environment: workerEnvironment, drain: true, log: log, groups: poolGroups)
        let poolStart = monotonicSeconds()
        let report = supervisor.run()
        figures.poolSeconds = monotonicSeconds() - poolStart
        let firstClaim = progress.stop()
        let emulatorSeconds = emulatorBefore.flatMap { before in environment.emulator.map { $0.cpuSeconds - before } }
        let serverSeconds = serverSeconds(since: serverBefore, excluding: progress.backendCPUSeconds)
        guard report.status == 0 else { throw BenchError("the worker pool exited with status \(report.status); see the messages above") }
        figures.peakRSSBytes = max(figures.peakRSSBytes, report.peakRSSBytes)

        let result = try BenchmarkJobs.throughput(connection, afterID: before)
        figures.throughputCompleted = result.completed
        guard let lastFinished = result.lastFinished, let firstClaim else {
            throw BenchError("the throughput phase delivered nothing")
        }
        if figures.throughputCompleted != settings.jobs {
            log.warning("throughput: \(settings.jobs - figures.throughputCompleted) of \(settings.jobs) jobs did not complete")
        }
        figures.deliverSeconds = max(0.001, lastFinished - firstClaim)
        figures.messagesPerSecond = Double(settings.jobs) / figures.deliverSeconds
        if settings.features.contains(.events) {
            figures.throughputEvents = try BenchmarkJobs.completedEvents(connection, afterID: before)
        }
        figures.throughputCPU = CPUPerMessage(seconds: report.workerCPUSeconds, postgres: serverSeconds, emulator: emulatorSeconds,
                                              messages: figures.throughputCompleted)
        if settings.profile {
            figures.throughputStatements = try StatementProfile.top(connection, limit: 12)
            figures.throughputStatementTotals = try StatementProfile.totals(connection)
        }
    }

    // MARK: phase 2

    func latency(_ figures: inout BenchFigures) throws {
        try clear()
        let processes = processesPerGroup, groups = poolGroups, arguments = workerArguments, childEnvironment = workerEnvironment
        let log = self.log
        let report = Locked<Supervisor.Report?>(nil)
        let stopped = DispatchSemaphore(value: 0)
        log.info("latency: \(processes) worker processes without --drain; \(grouped(settings.rate)) jobs/s for \(fixed(settings.latencySeconds, 0)) s after a 1 s warm-up")
        let thread = Thread {
            let supervisor = Supervisor(processes: processes, arguments: arguments, environment: childEnvironment, drain: false, log: log, groups: groups)
            let result = supervisor.run()
            report.withLock { $0 = result }
            stopped.signal()
        }
        thread.name = "herald-bench-supervisor"
        thread.start()

        var token = 1
        // Wait until every worker has started, connected and fetched its access token; then warm up at the same rate.
        let readyBy = monotonicSeconds() + 30
        while try Administration.connectedWorkers(connection) < processes * groups.count {
            if monotonicSeconds() > readyBy || report.value != nil {
                throw BenchError("the worker pool of the latency phase did not start within 30 s; see the messages above")
            }
            Thread.sleep(forTimeInterval: 0.02)
        }
        token += try offer(rate: settings.rate, seconds: 1.0, firstToken: token)
        let before = try maxID()
        let cpuBefore = Self.runningWorkersCPUSeconds()
        let started = monotonicSeconds()
        let sent = try offer(rate: settings.rate, seconds: settings.latencySeconds, firstToken: token)
        let offeredSeconds = monotonicSeconds() - started
        figures.latencyJobs = sent
        figures.offeredRate = Double(sent) / max(0.001, offeredSeconds)

        // Wait for them all to complete (or a generous timeout), then stop the pool.
        let deadline = monotonicSeconds() + 60 + settings.latencySeconds
        while monotonicSeconds() < deadline {
            let done = try BenchmarkJobs.completed(connection, afterID: before)
            if done >= sent { break }
            if report.value != nil { break }
            Thread.sleep(forTimeInterval: 0.05)
        }
        figures.latencyWindowWorkerCPUSeconds = Self.runningWorkersCPUSeconds() - cpuBefore
        kill(getpid(), SIGTERM)
        stopped.wait()
        guard let final = report.value, final.status == 0 else {
            throw BenchError("the worker pool of the latency phase exited with status \(report.value?.status ?? -1); see the messages above")
        }
        figures.peakRSSBytes = max(figures.peakRSSBytes, final.peakRSSBytes)
        figures.latencyWorkerCPUSeconds = final.workerCPUSeconds

        let result = try BenchmarkJobs.latency(connection, afterID: before)
        let completed = result.count
        if completed < sent { log.warning("latency: only \(completed) of \(sent) jobs completed; the percentiles cover those") }
        figures.p50 = result.p50
        figures.p99 = result.p99
        figures.maxLatency = result.max
    }

    /// CPU seconds of this process's running `herald work` children, from /proc: the paced
    /// figure of the latency phase, read after the warm-up and again once the offered jobs are
    /// done, so the pool's start-up and token fetch are left out.
    static func runningWorkersCPUSeconds() -> Double {
        ServerCPU(postmasterPID: getpid()).children().reduce(0.0) { total, pid in
            let command = (try? String(contentsOfFile: "/proc/\(pid)/cmdline", encoding: .utf8)) ?? ""
            guard command.contains("\u{0}work\u{0}") else { return total }
            return total + (ServerCPU.processSeconds(pid) ?? 0)
        }
    }

    /// Enqueues `rate` jobs a second for `seconds`, one INSERT ... SELECT every 10 ms for the
    /// jobs due by then. Returns how many.
    func offer(rate: Int, seconds: Double, firstToken: Int) throws -> Int {
        let total = Int((Double(rate) * seconds).rounded())
        let start = monotonicSeconds()
        var sent = 0
        var tick = 0
        while sent < total {
            let elapsed = monotonicSeconds() - start
            let due = min(total, Int(Double(rate) * elapsed))
            if due > sent {
                try BenchmarkJobs.enqueue(connection, first: firstToken + sent, count: due - sent, projects: projects, apnsApp: apnsApp)
                sent = due
            }
            if elapsed >= seconds {
                try BenchmarkJobs.enqueue(connection, first: firstToken + sent, count: total - sent, projects: projects, apnsApp: apnsApp)
                sent = total
                break
            }
            tick += 1
            let next = start + Double(tick) * 0.01
            let wait = next - monotonicSeconds()
            if wait > 0 { Thread.sleep(forTimeInterval: wait) }
        }
        return sent
    }

    // MARK: phase 3

    func ceiling(_ figures: inout BenchFigures) throws {
        try clear()
        try addFinishedRows()
        log.info("ceiling: \(grouped(settings.jobs)) jobs, claim and record on \(settings.processes) connections, no HTTP")
        let enqueueStart = monotonicSeconds()
        try BenchmarkJobs.enqueue(connection, count: settings.jobs)
        figures.ceilingEnqueueSeconds = monotonicSeconds() - enqueueStart
        try resetProfile()
        let serverBefore = readServer()
        figures.ceiling = try CeilingBenchmark.run(databaseURL: environment.databaseURL, threads: settings.processes,
                                                   batch: settings.batch, leaseSeconds: 60,
                                                   fcmProject: environment.account?.projectID, fcmProjectRate: settings.maxRate)
        figures.ceilingCPU = CPUPerMessage(seconds: figures.ceiling.clientCPUSeconds, postgres: serverSeconds(since: serverBefore),
                                           emulator: nil, messages: figures.ceiling.jobs)
        if settings.profile {
            figures.ceilingStatements = try StatementProfile.top(connection, limit: 12)
            figures.ceilingStatementTotals = try StatementProfile.totals(connection)
        }
    }
}

extension Bench {
    // MARK: phase 4

    /// The workers' HTTP client alone, sending the bench's messages to the same FCM as fast as
    /// it can: the floor under a worker's CPU per message.
    func sendsAlone(_ figures: inout BenchFigures) throws {
        guard let account = environment.account else { return }
        let auth = AccessTokenProvider(account: account, caFile: environment.caFile)
        let authorization = try auth.authorizationHeader()
        let endpoint = FCMEndpoint(baseURL: environment.fcmBaseURL, projectID: account.projectID)
        // The bench's own messages, as a worker sends them (`{"message": ...}`), made before the clock starts.
        let bodies: [[UInt8]] = (1...1000).map { n in
            let message: JSONValue = ["token": .string("bench-\(n)"),
                                      "notification": ["title": "Herald bench", "body": .string("Message \(n)")],
                                      "data": ["n": .string(String(n))]]
            return Array((["message": message] as JSONValue).serialized.utf8)
        }
        var configuration = HTTPClientConfiguration()
        configuration.caFile = environment.caFile
        configuration.connections(toCarry: settings.concurrency)
        log.info("sends alone: \(grouped(settings.jobs)) FCM requests on \(settings.processes) threads x \(settings.concurrency) in flight, no PostgreSQL")
        let emulatorBefore = environment.emulator?.cpuSeconds
        let result = try SenderBenchmark.run(url: endpoint.sendURL,
                                             headers: ["Authorization: \(authorization)", "Content-Type: application/json", "Accept:"],
                                             bodies: bodies, requests: settings.jobs, threads: settings.processes,
                                             concurrency: settings.concurrency, configuration: configuration)
        let emulatorSeconds = emulatorBefore.flatMap { before in environment.emulator.map { $0.cpuSeconds - before } }
        if let failure = result.firstFailure {
            log.warning("sends alone: \(result.requests - result.delivered) of \(result.requests) requests were not answered 200; the first: \(failure)")
        }
        figures.sends = result
        figures.sendsCPU = CPUPerMessage(seconds: result.clientCPUSeconds, postgres: nil, emulator: emulatorSeconds, messages: result.requests)
    }
}

struct BenchError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
