import CommandOptions
import Benchmark
import Emulator
import FCM
import HTTPClient
import Foundation
import Logging
import JSON
import Postgres
import Queue
import Worker

/// `herald bench`: end-to-end throughput, latency at a steady offered load, worker memory, and
/// the PostgreSQL ceiling of the same claim path, side by side.
enum BenchCommand {
    static let options: [Option] = [
        Option(name: "jobs", value: "N", help: "Jobs of the throughput phase, and again of the PostgreSQL-ceiling phase.", defaultText: "200000"),
        Option(name: "processes", value: "N", help: "Worker processes; also the ceiling phase's threads (one connection each).", defaultText: "one per core"),
        Option(name: "concurrency", value: "N", help: "FCM requests in flight per worker process; jobs are claimed min(N, 256) per statement.", defaultText: "256"),
        Option(name: "rate", value: "N", help: "Offered load of the latency phase, in jobs per second (enqueued every 10 ms).", defaultText: "2000"),
        Option(name: "latency-seconds", value: "S", help: "How long the latency phase offers that load (after a 1 s warm-up).", defaultText: "10"),
        Option(name: "fcm-latency-ms", value: "N", help: "The bench's own emulator answers every send N ms late, as FCM does from afar (FCM answers in tens of ms; 0: at once). Worker CPU per message at a paced --rate against a late FCM is what production costs.", defaultText: "0"),
        Option(name: "token-bytes", value: "N", help: "The bench's own emulator issues access tokens of N bytes (64 to 8192), which every request carries; Google's are about 1,000. Default: the emulator's short ones (about 50).", defaultText: "about 50"),
        Option(name: "json", value: "FILE", help: "Also write the figures as JSON to FILE."),
        Option(name: "durable", help: "Run the private PostgreSQL with fsync and synchronous_commit on, as a production server would."),
        Option(name: "finished-rows", value: "N", help: "Before the throughput and ceiling phases, fill herald.jobs with N jobs finished an hour ago (kept for the default retention), to measure on a table that has delivered for a while. Only in the bench's own PostgreSQL.", defaultText: "0"),
        Option(name: "max-rate", value: "N",
               help: "The FCM project's rate (herald work --max-rate) the workers and the ceiling's claims run under: its token bucket is spent as in production. The default is far above what two cores deliver, so it never binds; 10000 (FCM's default quota, herald work's default) shows a drain paced at 10,000 a second.",
               defaultText: "1000000"),
        Option(name: "with", value: "FEATURE", repeatable: true,
               help: "Run with a feature of the queue set up in the bench's private PostgreSQL before the phases, to measure what it costs per message (give several, repeated or comma-separated): caps (a frequency cap of 1,000 a day per token on queue 'default', which never binds), quiet-hours (quiet hours on 'default' from 6 h to 7 h from now, UTC, so nothing waits), events (herald.set_queue_events('default', true): a herald.events row per job), projects (two registry projects with keys from the bench's emulator, the jobs of the throughput and latency phases split between them, --processes divided between their workers).",
               defaultText: "none"),
        Option(name: "profile", help: "Load pg_stat_statements in the private PostgreSQL and print the statements of the throughput and ceiling phases (calls, rows, time)."),
    ] + connectionOptions

    static let help = helpText(
        command: "bench", summary: "Measure Herald: end-to-end throughput, latency, worker memory, and the PostgreSQL ceiling.",
        usage: "[options]", options: options,
        footer: """
        Build with `swift build -c release` and run .build/release/herald bench for real figures;
        a debug build is several times slower.

        With nothing configured it uses its own private PostgreSQL under DIR/bench-postgres (fsync,
        synchronous_commit and full_page_writes off: the data is thrown away) and the FCM emulator
        in this process; it empties herald.jobs and herald.dead_letters there before each phase.
        With DATABASE_URL it refuses to run unless herald.jobs is empty (run `herald migrate` first),
        and deletes its own jobs afterwards. With GOOGLE_APPLICATION_CREDENTIALS and HERALD_FCM_URL
        it sends to that FCM (an emulator, e.g. `herald emulator --write-service-account FILE`;
        never point it at the real FCM: it sends to made-up tokens).

        Phases:
          1. throughput: N jobs enqueued with one INSERT ... SELECT generate_series, then
             `herald work --drain` with the worker pool. msgs/s = N / (the last job's finished_at
             - the first claim, seen by polling every 2 ms). Finished jobs are kept (the default
             retention, 24h), as in production, so finished_at stays queryable.
          2. latency: the pool without --drain; jobs enqueued at --rate for --latency-seconds;
             enqueue-to-delivered = finished_at - created_at, i.e. from the INSERT's transaction
             to recording the job completed after FCM's 200; p50/p99 by percentile_cont.
          3. ceiling: N fresh jobs claimed and recorded completed with the worker's own SQL and
             batch size (JobStore.claim/record), no HTTP, on --processes connections.
          4. sends alone: N FCM requests carrying the bench's messages, sent by the workers'
             HTTP client (libcurl, HTTP/2) on --processes threads with --concurrency in flight
             each; no PostgreSQL, no claiming, no validation: the floor under a worker's CPU.
        Peak RSS per worker is the largest ru_maxrss of any worker process (wait4), over phases 1-2.
        CPU per message (phases 1, 3 and 4), in microseconds of user + system time per message:
          workers:    the worker processes' rusage from wait4 (start-up and token fetch included);
                      in the ceiling and sends-alone phases, the CPU clocks of their threads;
          PostgreSQL: the private cluster's server processes from /proc, read before and after
                      the phase (the postmaster, every child running, and every child it reaped,
                      i.e. each exited backend), less the backend of the bench's progress watch;
                      not measured with DATABASE_URL;
          emulator:   the CPU clocks of the emulator's event-loop threads in this process.
        --with FEATURE sets a feature up on queue 'default' (the bench's jobs' queue) in the private
        PostgreSQL before the phases, so its cost per message shows against a run without it:
          herald bench --jobs 50000 --latency-seconds 2
          herald bench --jobs 50000 --latency-seconds 2 --with caps
        (alternate the two several times: one run against another moves by a fifth on a busy
        machine). Each run first removes what an earlier run set up. With projects the ceiling
        phase still claims jobs of no project (its claims are the workers' of no project). The
        adaptive project rate has no switch of its own: --max-rate 0 runs without any project
        rate (neither the adaptive rate nor the token bucket).
        Targets are printed next to the figures; nothing is asserted.
        """)

    static func run(arguments: [String]) throws -> Int32 {
        // Before any thread starts: the supervisors take SIGTERM/SIGCHLD with sigtimedwait, and
        // phase 2 stops its pool by sending SIGTERM to this process.
        Supervisor.blockSignals()
        let parsed = try parse(command: "bench", arguments: arguments, options: options)
        let log = try RunEnvironment.logger(parsed, prefix: "herald bench")
        let settings = try BenchSettings(
            jobs: parsed.int("jobs", default: 200_000, minimum: 1),
            processes: parsed.int("processes", default: ProcessInfo.processInfo.activeProcessorCount, minimum: 1),
            concurrency: parsed.int("concurrency", default: 256, minimum: 1),
            rate: parsed.int("rate", default: 2000, minimum: 1),
            latencySeconds: parsed.seconds("latency-seconds", default: 10),
            jsonPath: parsed.string("json"),
            workerLogLevel: parsed.string("log-level") ?? "warn",
            durable: parsed.has("durable"),
            profile: parsed.has("profile"),
            finishedRows: parsed.int("finished-rows", default: 0, minimum: 0),
            maxRate: try parsed.rate("max-rate", default: 1_000_000),
            fcmLatencyMilliseconds: parsed.int("fcm-latency-ms", default: 0, minimum: 0),
            tokenBytes: try tokenBytes(parsed),
            features: try features(parsed))

        let environment = RunEnvironment(log: log)
        defer { environment.shutdown() }
        if settings.finishedRows > 0 && parsed.string("database-url") != nil {
            throw UsageError("herald bench: --finished-rows fills herald.jobs with made-up finished jobs, which it does only in its private PostgreSQL; drop \(parsed.lookup("database-url")!.source) or --finished-rows")
        }
        if !settings.features.isEmpty && parsed.string("database-url") != nil {
            throw UsageError("herald bench: --with \(settings.features.map(\.rawValue).joined(separator: ",")) changes the queue's settings (and the project registry), which it does only in its private PostgreSQL; drop \(parsed.lookup("database-url")!.source) or --with")
        }
        if settings.features.contains(.projects), parsed.string("credentials") != nil {
            throw UsageError("herald bench: --with projects registers projects whose keys the bench's own emulator writes; it cannot be given with \(parsed.lookup("credentials")!.source) (that FCM would not know those keys)")
        }
        if settings.profile && parsed.string("database-url") != nil {
            throw UsageError("herald bench: --profile loads pg_stat_statements into the bench's private PostgreSQL; it cannot be given with \(parsed.lookup("database-url")!.source) (load pg_stat_statements in that server yourself)")
        }
        try environment.resolveDatabase(parsed, durable: settings.durable, folder: "bench-postgres",
                                        serverSettings: settings.profile ? ["shared_preload_libraries": "pg_stat_statements",
                                                                            "pg_stat_statements.track": "all"] : [:])
        var emulatorConfiguration = EmulatorConfiguration(host: "127.0.0.1", port: 0, threads: 1)
        emulatorConfiguration.maxStoredMessages = 1000  // only counted beyond that: keeps this process small
        emulatorConfiguration.latencyMilliseconds = settings.fcmLatencyMilliseconds
        emulatorConfiguration.tokenBytes = settings.tokenBytes
        if settings.fcmLatencyMilliseconds > 0 || settings.tokenBytes > 0, parsed.string("credentials") != nil {
            let given = settings.tokenBytes > 0 ? parsed.lookup("token-bytes")! : parsed.lookup("fcm-latency-ms")!
            throw UsageError("herald bench: \(given.source) sets up the bench's own emulator, but \(parsed.lookup("credentials")!.source) sends to another FCM; start that emulator with --latency-ms / --token-bytes instead")
        }
        // The bench sends only the made-up jobs it enqueues itself, so its own emulator is its default.
        try environment.resolveFCM(parsed, use: .unlessCredentials, emulatorConfiguration: emulatorConfiguration)

        let bench = try Bench(settings: settings, environment: environment, log: log)
        let figures = try bench.runAll()
        print(figures.table)
        if let path = settings.jsonPath {
            try (figures.json.serialized + "\n").write(toFile: path, atomically: true, encoding: .utf8)
            log.info("wrote the figures to \(path)")
        }
        return 0
    }

    static func tokenBytes(_ parsed: ParsedOptions) throws -> Int {
        guard let (text, source) = parsed.lookup("token-bytes") else { return 0 }
        guard let n = Int(text), (64...8192).contains(n) else {
            throw UsageError("herald bench: \(source) must be a whole number of bytes from 64 to 8192, not '\(text)'")
        }
        return n
    }

    static func features(_ parsed: ParsedOptions) throws -> [BenchFeature] {
        let names = parsed.all("with").flatMap { $0.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) } }
        var chosen = Set<BenchFeature>()
        for name in names where !name.isEmpty {
            guard let feature = BenchFeature(rawValue: name) else {
                throw UsageError("herald bench: --with \(name) is not a feature; give one or more of \(BenchFeature.allCases.map(\.rawValue).joined(separator: ", ")) (repeated or comma-separated)")
            }
            chosen.insert(feature)
        }
        return BenchFeature.allCases.filter(chosen.contains)
    }
}

final class Bench {
    let settings: BenchSettings
    let environment: RunEnvironment
    let log: Logger
    let connection: PGConnection
    let ownDatabase: Bool
    /// Jobs with an id above this are the bench's (herald.jobs was empty when it started).
    var baseID = 0
    /// The private cluster's CPU; nil with DATABASE_URL (its server is not ours to read).
    let serverCPU: ServerCPU?
    /// `--with projects`: the registry projects the throughput and latency jobs are split between.
    var projects: [String] = []

    init(settings: BenchSettings, environment: RunEnvironment, log: Logger) throws {
        self.settings = settings
        self.environment = environment
        self.log = log
        connection = try PGConnection(url: environment.databaseURL)
        ownDatabase = environment.cluster != nil
        serverCPU = environment.cluster.flatMap { ServerCPU.postmasterPID(dataDirectory: $0.directory + "/data") }.map { ServerCPU(postmasterPID: $0) }
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

    func maxID() throws -> Int { try BenchmarkJobs.maxID(connection) }

    var workerArguments: [String] {
        ["work", "--concurrency", String(settings.concurrency), "--log-level", settings.workerLogLevel,
         "--max-rate", String(settings.maxRate)]
    }

    func runAll() throws -> BenchFigures {
        var figures = BenchFigures(settings: settings)
        figures.cores = ProcessInfo.processInfo.activeProcessorCount
        figures.postgresVersion = try BenchmarkJobs.serverVersion(connection)
        #if DEBUG
        figures.build = "debug"
        #else
        figures.build = "release"
        #endif
        figures.database = ownDatabase ? "private (\(settings.durable ? "durable: fsync on" : "fsync off")) in \(environment.cluster!.directory)" : PGConnection.redacted(environment.databaseURL)
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
        try BenchmarkJobs.enqueue(connection, count: settings.jobs, projects: projects)
        figures.enqueueSeconds = monotonicSeconds() - enqueueStart
        try resetProfile()

        let serverBefore = readServer()
        let emulatorBefore = environment.emulator?.cpuSeconds
        let progress = Progress(url: environment.databaseURL, afterID: before, total: settings.jobs, label: "throughput")
        progress.start()
        log.info("throughput: \(settings.processes) worker processes, herald work --drain")
        let supervisor = Supervisor(processes: processesPerGroup, arguments: workerArguments + ["--drain"],
                                    environment: environment.childEnvironment, drain: true, log: log, groups: poolGroups)
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
        let processes = processesPerGroup, groups = poolGroups, arguments = workerArguments, childEnvironment = environment.childEnvironment
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
                try BenchmarkJobs.enqueue(connection, first: firstToken + sent, count: due - sent, projects: projects)
                sent = due
            }
            if elapsed >= seconds {
                try BenchmarkJobs.enqueue(connection, first: firstToken + sent, count: total - sent, projects: projects)
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
                                                   projectID: environment.account?.projectID, projectRate: settings.maxRate)
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
