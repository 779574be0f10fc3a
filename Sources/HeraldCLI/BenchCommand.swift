import CommandOptions
import Benchmark
import Emulator
import Foundation
import Worker

/// `herald bench`: end-to-end throughput, latency at a steady offered load, worker memory, and
/// the PostgreSQL ceiling of the same claim path, side by side.
enum BenchCommand {
    static let options: [Option] = [
        Option(name: "jobs", value: "N", help: "Jobs of the throughput phase, and again of the PostgreSQL-ceiling phase.", defaultText: "200000"),
        Option(name: "processes", value: "N", help: "Worker processes; also the ceiling phase's threads (one connection each).", defaultText: "one per core"),
        Option(name: "concurrency", value: "N", help: "FCM requests in flight per worker process at most (herald work --concurrency); jobs are claimed min(N, 256) per statement.", defaultText: "1024"),
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
               help: "Run with a feature of the queue set up in the bench's private PostgreSQL before the phases, to measure what it costs per message (give several, repeated or comma-separated): caps (a frequency cap of 1,000 a day per token on queue 'default', which never binds), quiet-hours (quiet hours on 'default' from 6 h to 7 h from now, UTC, so nothing waits), events (herald.set_queue_events('default', true): a herald.events row per job), projects (two registry projects with keys from the bench's emulator, the jobs of the throughput and latency phases split between them, --processes divided between their workers), apns (an APNs app with a key the bench's emulator writes: the jobs of the throughput and latency phases are all APNs alerts of that app, sent to the emulator's APNs side by a pool carrying the registry; compare the worker CPU per message with a run without).",
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
             batch size (Claimer.claim, OutcomeRecorder.record), no HTTP, on --processes connections.
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
            concurrency: parsed.int("concurrency", default: WorkerConfiguration.defaultConcurrency, minimum: 1),
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
        if settings.features.contains(.projects) && settings.features.contains(.apns) {
            throw UsageError("herald bench: --with projects and --with apns cannot be given together: projects runs a group of workers per project, apns one pool carrying the registry; measure them in separate runs")
        }
        if settings.features.contains(.apns), parsed.string("credentials") != nil {
            throw UsageError("herald bench: --with apns sends to the bench's own emulator with a key it writes; it cannot be given with \(parsed.lookup("credentials")!.source)")
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

        let target = BenchTarget(databaseURL: environment.databaseURL, clusterDirectory: environment.cluster?.directory,
                                 fcmBaseURL: environment.fcmBaseURL, account: environment.account, caFile: environment.caFile,
                                 credentialsPath: environment.credentialsPath, childEnvironment: environment.childEnvironment,
                                 emulator: environment.emulator)
        let bench = try Bench(settings: settings, environment: target, log: log)
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
