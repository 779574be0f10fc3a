import CommandOptions
import FCM
import Foundation
import Lifecycle
import Logging
import Postgres
import Queue
import Worker

enum WorkCommand {
    static let options: [Option] = [
        Option(name: "processes", env: "HERALD_PROCESSES", value: "N", help: "Worker processes in all; each carries every project the pool works (HERALD_WORKERS_PER_PROJECT=1: N for each project).", defaultText: "one per core"),
        Option(name: "concurrency", env: "HERALD_CONCURRENCY", value: "N",
               help: "Requests in flight per process at most: a ceiling. The window follows FCM's answer times between 16 and N: it starts at 256, grows while answers stay quick and steady, shrinks when they slow down.",
               defaultText: "1024"),
        Option(name: "fixed-concurrency", env: "HERALD_FIXED_CONCURRENCY", help: "Keep --concurrency requests in flight whatever FCM's answer times."),
        Option(name: "queue", value: "NAME", repeatable: true, help: "Work only this queue.", defaultText: "every queue"),
        Option(name: "project", env: "HERALD_PROJECT", value: "NAME", repeatable: true,
               help: "Work only the jobs of this registry project (herald projects add), sent with the credentials the registry points at and only if they are for the FCM project it names; its max_rate, if set, replaces --max-rate. Given several times, each worker carries them all (a project whose key is refused is paused, the others go on). An APNs app (herald apns add) may be named too, alone or beside projects: its jobs go out with its .p8 key.",
               defaultText: "the jobs of no project, with GOOGLE_APPLICATION_CREDENTIALS"),
        Option(name: "lease", env: "HERALD_LEASE", value: "SECONDS", help: "How long a claimed job is held before another worker may take it back.", defaultText: "60"),
        Option(name: "skip-project", env: "HERALD_SKIP_PROJECTS", value: "NAME", repeatable: true,
               help: "Leave this registry project's jobs and topic subscriptions to a pool of its own (herald work --project NAME elsewhere); for a pool working the whole registry. The variable takes names separated by commas.",
               defaultText: "none: every registered project"),
        Option(name: "batch", env: "HERALD_BATCH", value: "N", help: "Jobs claimed per statement.", defaultText: "min(concurrency, 256)"),
        Option(name: "retention", env: "HERALD_RETENTION", value: "DURATION", help: "How long finished jobs stay in herald.jobs; 0 deletes them at once.", defaultText: "24h"),
        Option(name: "shutdown-timeout", env: "HERALD_SHUTDOWN_TIMEOUT", value: "SECONDS", help: "On SIGTERM, how long in-flight requests may finish.", defaultText: "30"),
        Option(name: "statement-timeout", env: "HERALD_STATEMENT_TIMEOUT", value: "SECONDS",
               help: "statement_timeout of the claims, records and upkeep; a connection whose answer has not come 5 s later is closed and reopened (a silent network path).",
               defaultText: "20"),
        Option(name: "poll-interval", env: "HERALD_POLL_INTERVAL", value: "SECONDS", help: "Claim at least this often without a notification.", defaultText: "1"),
        Option(name: "request-timeout", env: "HERALD_REQUEST_TIMEOUT", value: "SECONDS", help: "Timeout of one FCM request.", defaultText: "30"),
        Option(name: "connect-timeout", env: "HERALD_CONNECT_TIMEOUT", value: "SECONDS", help: "Timeout of connecting to FCM.", defaultText: "10"),
        Option(name: "max-rate", env: "HERALD_MAX_RATE", value: "N",
               help: "Messages per second for the whole FCM project, shared by every pool of the project through PostgreSQL and spread evenly over each second; 0 for no limit.",
               defaultText: "10000 (FCM's default quota, 600,000 a minute)"),
        Option(name: "drain", help: "Exit with status 0 once no job is available or running and none is scheduled within --drain-horizon; says how many wait for later."),
        Option(name: "drain-horizon", env: "HERALD_DRAIN_HORIZON", value: "DURATION",
               help: "With --drain: scheduled jobs due within this long are waited for; later ones are left for a pool that keeps running.", defaultText: "1m"),
        Option(name: "keep", help: "On the embedded default: leave its private PostgreSQL running after the run and print how to reach and stop it."),
        Option(name: "sample", value: "N", help: "Enqueue N sample messages first (the embedded default enqueues 1,000 when nothing is configured)."),
        Option(name: "admin-address", env: "HERALD_ADMIN_ADDRESS", value: "HOST:PORT",
               help: "Serve /metrics (Prometheus), /healthz and /readyz for the whole pool here; off disables it.",
               defaultText: "127.0.0.1:9464"),
        Option(name: "apns-url", env: "HERALD_APNS_URL", value: "URL",
               help: "Send every APNs app's jobs here instead of Apple's production or sandbox endpoint (the emulator's, for tests).",
               defaultText: "each app's: https://api.push.apple.com, or https://api.sandbox.push.apple.com with --sandbox"),
        Option(name: "iid-url", env: "HERALD_IID_URL", value: "URL",
               help: "Instance ID base URL for topic subscriptions (batchAdd / batchRemove); the in-process emulator's with --emulator.",
               defaultText: "https://iid.googleapis.com"),
        fcmDataURLOption,
        emulatorOption,
    ] + connectionOptions

    static let help = helpText(
        command: "work", summary: "Deliver the jobs in herald.jobs to FCM with a pool of worker processes.",
        usage: "[options]", options: options,
        footer: """
        With nothing configured it runs on the embedded default: a private PostgreSQL under ./.herald,
        the local FCM emulator, and a sample batch of 1,000 messages, then shows them delivered to
        that emulator. With DATABASE_URL set, GOOGLE_APPLICATION_CREDENTIALS is required (or
        --emulator, for local testing): without either it exits before touching a job.
        Retries: exponential backoff from 1 s, factor 2, capped at 1 h, plus up to 50% random jitter,
        never sooner than FCM's Retry-After. QUOTA_EXCEEDED is told apart by its QuotaFailure: one
        device's limit backs off that token alone, a topic's that topic (at least 60 s), the project's
        pauses the project in every pool (at least 60 s) and lowers its adapted rate, with --max-rate
        the ceiling (docs/fcm-limits.md). SIGTERM/SIGINT: stop claiming, finish in-flight requests,
        put unsent jobs back.
        """)

    static func configuration(_ parsed: ParsedOptions, databaseURL: String, credentials: String, fcmURL: String, caFile: String?) throws(UsageError) -> WorkerConfiguration {
        var c = WorkerConfiguration(databaseURL: databaseURL, credentialsPath: credentials)
        c.fcmBaseURL = fcmURL
        if let url = try parsed.httpURL("iid-url") { c.iidBaseURL = url }
        if let url = try parsed.httpURL("apns-url") { c.apnsBaseURL = url }
        c.deliveryData = DeliveryDataSettings(baseURL: try parsed.httpURL("fcm-data-url") ?? FCMDataAPI.defaultBaseURL)
        c.deliveryData.caFile = caFile
        c.deliveryData.environment = ProcessInfo.processInfo.environment
        c.caFile = caFile
        c.queues = parsed.all("queue")
        if let project = parsed.string("project") {
            guard !project.isEmpty else { throw UsageError("herald work: --project needs a registry name (herald projects list)") }
            c.project = project
        }
        c.concurrency = try parsed.int("concurrency", default: WorkerConfiguration.defaultConcurrency, minimum: 1)
        c.adaptiveConcurrency = !parsed.has("fixed-concurrency")
        c.leaseSeconds = try parsed.seconds("lease", default: 60)
        if c.leaseSeconds <= 0 { throw UsageError("herald work: --lease must be more than 0 seconds") }
        c.claimBatch = try parsed.int("batch", default: 0, minimum: 0)
        c.retentionSeconds = try parsed.seconds("retention", default: 86_400)
        c.shutdownTimeout = try parsed.seconds("shutdown-timeout", default: 30)
        c.pollInterval = max(0.05, try parsed.seconds("poll-interval", default: 1))
        c.statementTimeout = try parsed.seconds("statement-timeout", default: 20)
        if c.statementTimeout < 1 { throw UsageError("herald work: --statement-timeout must be at least 1 second (a claim of a batch needs time)") }
        c.requestTimeout = try parsed.seconds("request-timeout", default: 30)
        c.connectTimeout = try parsed.seconds("connect-timeout", default: 10)
        c.drain = parsed.has("drain")
        c.drainHorizon = try parsed.seconds("drain-horizon", default: 60)
        c.maxRate = try parsed.rate("max-rate", default: 10_000)
        c.poolProcesses = try parsed.int("processes", default: ProcessInfo.processInfo.activeProcessorCount, minimum: 1)
        c.skippedProjects = Set(try skippedProjects(parsed).names)
        let logger = try RunEnvironment.logger(parsed, prefix: "herald")
        c.logLevel = logger.level
        c.logFormat = logger.format
        return c
    }

    static func run(arguments: [String]) throws -> Int32 {
        let parsed = try parse(command: "work", arguments: arguments, options: options)
        if ProcessInfo.processInfo.environment["HERALD_WORKER_CHILD"] == "1" {
            return runChild(parsed)
        }
        Supervisor.blockSignals()
        let log = try RunEnvironment.logger(parsed, prefix: "herald work")
        let processes = try parsed.int("processes", default: ProcessInfo.processInfo.activeProcessorCount, minimum: 1)
        // Check every setting before starting anything.
        let checked = try configuration(parsed, databaseURL: "", credentials: "", fcmURL: "", caFile: nil)
        let adminAddress = try adminAddress(parsed)
        let environment = RunEnvironment(log: log)
        defer { environment.shutdown() }
        var projects = try resolveProjects(parsed, checked: checked, environment: environment, log: log)
        try checkSkippedProjects(parsed, &projects, environment: environment)
        // One worker process carries many projects (the registry's, or those named), unless a
        // single --project restricts the pool or HERALD_WORKERS_PER_PROJECT=1 asks for the old
        // shape of workers per project.
        // A named APNs app is always carried that way: only a worker carrying projects sends
        // APNs (there is no worker of one app alone).
        let perProject = ProcessInfo.processInfo.environment["HERALD_WORKERS_PER_PROJECT"] == "1" && projects.apps.isEmpty
        let carries: String? = perProject ? nil
            : (projects.named.count > 1 || !projects.apps.isEmpty ? "named" : (checked.project == nil ? "registry" : nil))
        var childEnvironment = environment.childEnvironment
        if let carries { childEnvironment[carriesVariable] = carries }
        // Test mode (--emulator, the embedded default): every provider of every worker goes to the
        // emulator in this process (ProviderEndpoints), and that emulator accepts the registry's
        // keys (EmulatorTrust). Set empty otherwise, so a variable of the caller's never turns it on.
        childEnvironment[WorkerConfiguration.emulatorVariable] = environment.emulator?.baseURL ?? ""
        if environment.emulator != nil, let (url, source) = parsed.lookup("apns-url") {
            throw UsageError("herald work: \(source) is \(url), but \(parsed.has("emulator") ? "--emulator" : "the embedded default") sends every provider's jobs, APNs apps' included, to the emulator in this process; unset \(source) (or leave out --emulator to send APNs apps' jobs there)")
        }
        let groups = carries != nil ? [Supervisor.Group(label: nil, project: nil)] : poolGroups(projects, project: checked.project)
        let (monitor, admin) = try startAdminEndpoint(adminAddress, parsed: parsed, groups: groups, processes: processes, log: log)
        // Closes the admin endpoint when start-up fails below; once running, the group closes it.
        defer { admin?.stop() }
        let embedded = environment.cluster != nil && environment.emulator != nil
        let sample = try parsed.int("sample", default: embedded ? 1000 : 0, minimum: 0)
        let connection = try PGConnection(url: environment.databaseURL)
        guard try Administration.isMigrated(connection) else {
            throw UsageError("herald work: the database at \(PGConnection.redacted(environment.databaseURL)) has no herald schema; run `herald migrate` first")
        }
        var trust: EmulatorTrust? = nil
        if let emulator = environment.emulator {
            trust = EmulatorTrust(emulator: emulator, databaseURL: environment.databaseURL, log: log)
            trust?.start(connection)
        }
        defer { trust?.stop() }
        let started = Date()
        let startedInDatabase = try Administration.databaseNow(connection)
        environment.keepCluster = parsed.has("keep")
        try enqueueSample(connection, count: sample, log: log)
        // Embedded with nothing else to do: show the sample delivered, then stop.
        let drain = parsed.has("drain") || (embedded && parsed.string("sample") == nil)
        let supervisor = Supervisor(processes: processes,
                                    arguments: childArguments(arguments, parsed: parsed, drain: drain, severalNamed: projects.named.count > 1 && carries == nil),
                                    environment: childEnvironment, drain: drain, log: log,
                                    stopGrace: checked.shutdownTimeout + 15, monitor: monitor, groups: groups)
        if checked.project == nil && !drain && carries == nil {
            try followRegistry(supervisor, databaseURL: environment.databaseURL, skipping: checked.skippedProjects, log: log)
        }
        let endpoints = startEndpoints(parsed, environment: environment)
        if carries == "registry" {
            func shown(_ names: [String], _ noun: String) -> String {
                names.prefix(10).map { "\(noun) \($0)" }.joined(separator: ", ") + (names.count > 10 ? " and \(names.count - 10) more" : "")
            }
            let entries = [shown(projects.registered, "project"), shown(projects.registeredApps, "APNs app")].filter { !$0.isEmpty }
            let skipped = checked.skippedProjects.isEmpty ? "" : " but \(checked.skippedProjects.sorted().joined(separator: ", ")) (--skip-project)"
            log.info("starting \(processes) worker processes, each carrying every registry entry\(skipped) (\(entries.isEmpty ? "none yet; one added later is taken up" : entries.joined(separator: ", "))) with its own key\(projects.worksUnaddressed ? ", and the jobs of no project" : ""); \(endpoints)")
        } else if carries == "named" {
            let carried = projects.named.map { projects.apps.contains($0) ? "APNs app \($0)" : "project \($0)" }
            log.info("starting \(processes) worker processes, each carrying \(carried.joined(separator: ", ")) with its own key; \(endpoints)")
        } else {
            logStart(groups: groups, processes: processes, project: checked.project, endpoints: endpoints, log: log)
        }
        let report = try runPool(supervisor, admin: admin, log: log)
        if sample > 0 || embedded {
            try printSummary(connection, since: started, databaseSince: startedInDatabase, environment: environment)
        }
        return report.status
    }

    /// Where each provider's jobs go, as the start-up line names it: the emulator in this process
    /// for every provider in test mode; else FCM's URL and APNs's (--apns-url, or each app's own).
    static func startEndpoints(_ parsed: ParsedOptions, environment: RunEnvironment) -> String {
        if let emulator = environment.emulator {
            return "test mode: every provider's jobs (FCM projects' and APNs apps') go to the emulator in this process at \(emulator.baseURL), none to FCM or Apple"
        }
        let apns = parsed.string("apns-url") ?? "each app's own (\(APNsApp.productionURL), or \(APNsApp.sandboxURL) for a sandbox app)"
        return "FCM jobs go to \(environment.fcmBaseURL), APNs jobs to \(apns)"
    }

    /// The projects a pool works: those named with --project, or every project of the registry,
    /// and whether it also works the jobs of no project (with the pool's own key).
    struct PoolProjects {
        var named: [String]
        /// Those of `named` that are APNs apps.
        var apps: Set<String> = []
        var registered: [String] = []
        /// The registry's APNs apps (a pool of workers per project starts workers for each).
        var registeredApps: [String] = []
        var worksUnaddressed = true
    }

    /// Finds the pool's projects and where it sends: with --project, each named project checked
    /// now (its key readable) rather than in every worker; with no key of its own, the
    /// registry's projects; otherwise FCM (or the emulator) and the registry beside it.
    static func resolveProjects(_ parsed: ParsedOptions, checked: WorkerConfiguration, environment: RunEnvironment,
                                log: Logger) throws -> PoolProjects {
        // --project, given once or more (or HERALD_PROJECT): only those registry projects.
        var projects = PoolProjects(named: parsed.all("project").isEmpty ? (checked.project.map { [$0] } ?? []) : parsed.all("project"))
        let named = projects.named
        if let twice = named.first(where: { name in named.filter { $0 == name }.count > 1 }) {
            throw UsageError("herald work: --project \(twice) is given twice; give each project once")
        }
        if !named.isEmpty {
            // The registry says where each project's key is: the database first, then FCM.
            if parsed.has("emulator") {
                throw UsageError("herald work: --project \(named.joined(separator: ", ")) sends with the registry's credentials; --emulator sends with its own; give one of them")
            }
            try resolveRegistryTransport(parsed, environment: environment, log: log)
            projects.apps = try checkNamedProjects(named, environment: environment, log: log)
        } else if parsed.string("credentials") == nil && !parsed.has("emulator") && parsed.string("database-url") != nil {
            // No key of its own: the pool works the registry's projects, if there are any.
            try resolveRegistryTransport(parsed, environment: environment, log: log)
            let connection = try migrated(environment)
            projects.registered = try ProjectRegistry.list(connection).map(\.name)
            projects.registeredApps = try APNsApps.list(connection).map(\.name)
            // An APNs-only deployment starts: the pool works whatever providers the registry holds.
            guard !projects.registered.isEmpty || !projects.registeredApps.isEmpty else { throw RunEnvironment.missingCredentials(parsed) }
            projects.worksUnaddressed = false
            log.warning("no GOOGLE_APPLICATION_CREDENTIALS: this pool works the registry's entries only (\(projects.registered.count) FCM project\(projects.registered.count == 1 ? "" : "s"), \(projects.registeredApps.count) APNs app\(projects.registeredApps.count == 1 ? "" : "s")), each with its own key; jobs of no project wait for a pool with credentials")
        } else {
            // FCM first: a start that would send real jobs nowhere stops before any database work.
            try environment.resolveFCM(parsed, use: .onEmbeddedDefault)
            try environment.resolveDatabase(parsed)
            let connection = try migrated(environment)
            projects.registered = try ProjectRegistry.list(connection).map(\.name)
            projects.registeredApps = try APNsApps.list(connection).map(\.name)
        }
        return projects
    }

    /// `--skip-project` (repeatable) or `HERALD_SKIP_PROJECTS` (names separated by commas), and
    /// which of them said it; an empty name is refused naming the setting.
    static func skippedProjects(_ parsed: ParsedOptions) throws(UsageError) -> (names: [String], source: String) {
        let flags = parsed.all("skip-project")
        let names: [String]
        let source: String
        if !flags.isEmpty {
            (names, source) = (flags, "--skip-project")
        } else if let text = ProcessInfo.processInfo.environment["HERALD_SKIP_PROJECTS"], !text.isEmpty {
            (names, source) = (text.split(separator: ",", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) },
                               "HERALD_SKIP_PROJECTS")
        } else {
            return ([], "")
        }
        if names.contains("") {
            throw UsageError("herald work: \(source) holds an empty name; give registry names (herald projects list), e.g. \(source == "--skip-project" ? "--skip-project big" : "HERALD_SKIP_PROJECTS=big,news")")
        }
        return (names, source)
    }

    /// The skipped projects are registry names of a pool that works the registry: a name the
    /// registry does not hold (a typo would leave the project worked here) or a pool of named
    /// projects (which works only those anyway) is refused naming the setting. The pool's
    /// projects then leave them out.
    static func checkSkippedProjects(_ parsed: ParsedOptions, _ projects: inout PoolProjects, environment: RunEnvironment) throws {
        let (skipped, source) = try skippedProjects(parsed)
        guard !skipped.isEmpty else { return }
        if !projects.named.isEmpty {
            throw UsageError("herald work: \(source) \(skipped.joined(separator: ",")) leaves projects out of a pool of the whole registry; this pool works --project \(projects.named.joined(separator: ", ")) only, so give one of them")
        }
        let connection = try migrated(environment)
        let known = Set(try ProjectRegistry.list(connection).map(\.name)).union(try APNsApps.list(connection).map(\.name))
        let unknown = skipped.filter { !known.contains($0) }
        if !unknown.isEmpty {
            let hint = unknown.compactMap { name in nearest(name, among: known.sorted()).map { "\"\(name)\": did you mean \"\($0)\"?" } }
            throw UsageError("herald work: \(source) names \(unknown.map { "\"\($0)\"" }.joined(separator: ", ")), not in the project registry\(hint.isEmpty ? "" : " (" + hint.joined(separator: "; ") + ")"); `herald projects list` and `herald apns list` show the names")
        }
        projects.registered.removeAll { skipped.contains($0) }
    }

    /// The FCM URL, transport and database of a pool that sends with the registry's keys.
    static func resolveRegistryTransport(_ parsed: ParsedOptions, environment: RunEnvironment, log: Logger) throws {
        if let url = try parsed.httpURL("fcm-url") { environment.fcmBaseURL = url }
        try RunEnvironment.checkTransport(parsed, log: log)
        try environment.resolveDatabase(parsed)
        environment.caFile = parsed.string("ca-file")
    }

    /// A connection to a database with the herald schema and its project registry. The registry
    /// is read only from such a database; otherwise the message says to migrate, rather than
    /// PostgreSQL's "relation does not exist".
    static func migrated(_ environment: RunEnvironment) throws -> PGConnection {
        let connection = try PGConnection(url: environment.databaseURL)
        guard try Administration.isMigrated(connection) else {
            throw UsageError("herald work: the database at \(PGConnection.redacted(environment.databaseURL)) has no herald schema; run `herald migrate` first")
        }
        guard try Administration.hasProjectRegistry(connection) else {
            throw UsageError("herald work: the herald schema at \(PGConnection.redacted(environment.databaseURL)) is older than this binary; run `herald migrate` first")
        }
        return connection
    }

    /// Each --project: in the registry, its key readable (failing now, naming the file or
    /// variable, rather than in every worker); a paused one is worked once resumed. An APNs app's
    /// .p8 key is checked as `herald apns test` checks it. Returns the names that are APNs apps.
    static func checkNamedProjects(_ named: [String], environment: RunEnvironment, log: Logger) throws -> Set<String> {
        var registry: PGConnection? = nil  // one connection for every named project
        var apps: Set<String> = []
        for name in named {
            let project: Project
            do {
                let connection = try registry ?? migrated(environment)
                registry = connection
                if let app = try APNsApps.entry(connection, name: name) {
                    try APNsCommand.checkKey(app.keyFile, keyID: app.keyID, command: "herald work: --project \(name) (APNs app)")
                    if let reason = app.pausedReason {
                        log.warning("APNs app \(name) is paused (\(reason)); its jobs wait until `herald apns resume \(name)`")
                    }
                    apps.insert(name)
                    continue
                }
                project = try Project.load(connection, name: name)
                _ = try project.account(environment: ProcessInfo.processInfo.environment)
                if project.credentials.hasPrefix("/"), let warning = KeyFilePermissions.warning(path: project.credentials) {
                    log.warning("project \(name): \(warning)")
                }
            } catch let error as UsageError {
                throw error
            } catch {
                throw UsageError("herald work: --project \(name): \(error)")
            }
            if let reason = project.pausedReason {
                log.warning("project \(name) is paused (\(reason)); its jobs wait until `herald projects resume \(name)`")
            }
        }
        return apps
    }

    /// The pool's groups: the jobs of no project (with the pool's own key), and, without
    /// --project, every project of the registry (each with its own key, in workers of its own).
    static func poolGroups(_ projects: PoolProjects, project: String?) -> [Supervisor.Group] {
        var groups: [Supervisor.Group]
        if projects.named.count > 1 {
            // Each named project in workers of its own, started with its --project alone.
            groups = projects.named.map(projectGroup)
        } else {
            groups = projects.worksUnaddressed ? [Supervisor.Group(label: project.map { "project \($0)" }, project: project)] : []
        }
        if project == nil {
            // An APNs app's workers carry it alone (a worker started with --project APP does).
            groups += (projects.registered + projects.registeredApps).map(projectGroup)
        }
        return groups
    }

    /// `--admin-address`: the pool's metrics and the endpoint serving them, listening before any
    /// worker starts (nil, nil for off).
    static func startAdminEndpoint(_ address: (host: String, port: Int)?, parsed: ParsedOptions, groups: [Supervisor.Group],
                                   processes: Int, log: Logger) throws -> (PoolMonitor?, AdminServer?) {
        guard let (host, port) = address else { return (nil, nil) }
        let pool: PoolMonitor
        let slotProjects = groups.flatMap { Array(repeating: $0.project, count: max(1, processes)) }
        do { pool = try PoolMonitor(slotProjects: slotProjects) } catch {
            throw UsageError("herald work: cannot set up the pool's metrics: \(error); give --admin-address off to run without them")
        }
        let server = AdminServer(host: host, port: port, monitor: pool)
        do { try server.start() } catch {
            let source = parsed.lookup("admin-address")?.source ?? "--admin-address (default)"
            throw UsageError("herald work: \(source) \(host):\(port): cannot listen (\(error)); give a free HOST:PORT, or off to serve no metrics")
        }
        log.info("serving /metrics, /healthz and /readyz at \(server.url)")
        return (pool, server)
    }

    /// `--sample N`: a batch of made-up messages to watch delivered.
    static func enqueueSample(_ connection: PGConnection, count: Int, log: Logger) throws {
        guard count > 0 else { return }
        let added = try Administration.enqueueSampleBatch(connection, count: count)
        log.info("enqueued a sample batch of \(added) messages with one INSERT ... SELECT")
    }

    /// What each worker process is started with: this command's arguments (without the
    /// --project names when each named project has workers of its own), and --drain when the
    /// embedded default drains without being told.
    static func childArguments(_ arguments: [String], parsed: ParsedOptions, drain: Bool, severalNamed: Bool) -> [String] {
        var childArguments = ["work"] + (severalNamed ? withoutProjects(arguments) : arguments)
        if drain && !parsed.has("drain") { childArguments.append("--drain") }
        return childArguments
    }

    /// Projects added to (or removed from) the registry while the pool runs are started (or
    /// stopped) within registryPollInterval seconds, without a restart.
    static func followRegistry(_ supervisor: Supervisor, databaseURL: String, skipping: Set<String> = [], log: Logger) throws {
        var registry: PGConnection? = nil
        var failing = false
        supervisor.registryPoll = {
            do {
                if registry == nil { registry = try PGConnection(url: databaseURL) }
                let names = try (ProjectRegistry.list(registry!).map(\.name) + APNsApps.list(registry!).map(\.name)).filter { !skipping.contains($0) }
                if failing { log.info("reading the project registry again") }
                failing = false
                return names
            } catch {
                registry = nil
                if !failing { log.warning("cannot read the project registry (\(error)); the pool's projects stay as they are until it can") }
                failing = true
                return nil
            }
        }
        supervisor.groupForProject = projectGroup
        if let seconds = ProcessInfo.processInfo.environment["HERALD_REGISTRY_POLL_SECONDS"] {
            guard let value = Double(seconds), value >= 0.1, value <= 3600 else {
                throw UsageError("herald work: HERALD_REGISTRY_POLL_SECONDS \"\(seconds)\" is not a number of seconds from 0.1 to 3600")
            }
            supervisor.registryPollInterval = value
        }
    }

    static func logStart(groups: [Supervisor.Group], processes: Int, project: String?, endpoints: String, log: Logger) {
        if groups.count == 1 && project == nil {
            log.info("starting \(processes) worker processes; \(endpoints)")
        } else {
            let names = groups.map { $0.label ?? "the jobs of no project" }.joined(separator: ", ")
            log.info("starting \(processes) worker processes for each of: \(names); \(endpoints)")
        }
    }

    /// Runs the pool until it stops. The admin endpoint (already listening) runs in a group
    /// beside the pool; the supervisor keeps this thread (a child's parent-death signal follows
    /// the thread that spawned it) and, once every worker has stopped, the group closes the endpoint.
    static func runPool(_ supervisor: Supervisor, admin: AdminServer?, log: Logger) throws -> Supervisor.Report {
        let services = ServiceGroup(admin.map { [ServiceGroup.Member($0)] } ?? [], maximumShutdownDuration: 5, log: { log.debug($0) })
        services.start()
        let report = supervisor.run()
        services.beginShutdown()
        if let failure = services.run().failure { throw failure }
        return report
    }

    /// The workers of one registry project, started with its `--project` alone; a key that
    /// cannot be used pauses the project and leaves the rest of the pool running.
    static func projectGroup(_ name: String) -> Supervisor.Group {
        Supervisor.Group(label: "project \(name)", project: name, arguments: ["--project", name], refusalStopsPool: false)
    }

    /// The arguments without their `--project NAME` / `--project=NAME`: a pool of several named
    /// projects gives each group of workers its own.
    static func withoutProjects(_ arguments: [String]) -> [String] {
        var kept: [String] = []
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            index += 1
            if argument == "--project" { index += 1; continue }
            if argument.hasPrefix("--project=") { continue }
            kept.append(argument)
        }
        return kept
    }

    /// `--admin-address`: nil for `off`.
    static func adminAddress(_ parsed: ParsedOptions) throws(UsageError) -> (host: String, port: Int)? {
        guard let (text, source) = parsed.lookup("admin-address") else { return ("127.0.0.1", 9464) }
        if text.lowercased() == "off" { return nil }
        guard let address = AdminServer.parseAddress(text) else {
            throw UsageError("herald work: \(source) \"\(text)\" is not HOST:PORT; give e.g. 127.0.0.1:9464, 0.0.0.0:9464, [::1]:9464, or off")
        }
        return address
    }

    /// Tells a worker process which projects it carries: `registry` or `named` (its --project
    /// names); unset: one project, or the jobs of no project.
    static let carriesVariable = "HERALD_WORKER_CARRIES"

    static func runChild(_ parsed: ParsedOptions) -> Int32 {
        WorkerProcess.blockTerminationSignals()
        Supervisor.adoptParentDeathSignal()
        // A worker's start-up problem goes out in the pool's log format, like every other line.
        let startupLog = try? RunEnvironment.logger(parsed, prefix: "herald work")
        func report(_ text: String) {
            guard let startupLog else { return printError(text) }
            startupLog.error(text.hasPrefix("herald work: ") ? String(text.dropFirst("herald work: ".count)) : text)
        }
        do {
            let env = ProcessInfo.processInfo.environment
            var config = try configuration(parsed, databaseURL: (try checkedDatabaseURL(parsed)) ?? "",
                                           credentials: parsed.string("credentials") ?? "",
                                           fcmURL: try parsed.httpURL("fcm-url") ?? env["HERALD_FCM_URL"] ?? "https://fcm.googleapis.com",
                                           caFile: parsed.string("ca-file"))
            guard !config.databaseURL.isEmpty else { throw UsageError("herald work: DATABASE_URL is not set") }
            switch env[carriesVariable] {
            case "registry":
                config.carries = .registry
                config.project = nil
            case "named":
                // Named on the command line, or one name in HERALD_PROJECT (an APNs app).
                let names = parsed.all("project")
                config.carries = .named(names.isEmpty ? config.project.map { [$0] } ?? [] : names)
                config.project = nil
            default:
                break
            }
            // Its place among the pool's processes: a worker carrying many projects takes up its
            // own share of them first (StoreProjects.owns).
            if let index = env[Supervisor.indexVariable].flatMap(Int.init), index >= 0, index < config.poolProcesses { config.poolIndex = index }
            if let seconds = env["HERALD_REGISTRY_POLL_SECONDS"].flatMap(Double.init), seconds >= 0.1 { config.registryPollSeconds = seconds }
            if let url = env[WorkerConfiguration.emulatorVariable], !url.isEmpty { config.emulatorURL = url }
            guard !config.credentialsPath.isEmpty || config.project != nil || config.carries != nil else {
                throw UsageError("herald work: GOOGLE_APPLICATION_CREDENTIALS is not set")
            }
            config.extraMessageFields = try extraMessageFields(config)
            let process = try WorkerProcess(configuration: config)
            process.handleTerminationSignals()
            return try process.run()
        } catch let error as UsageError {
            report(error.description)
            return Int32(Supervisor.configurationErrorStatus)
        } catch let error as WorkerStartupError {
            report("herald work: \(error)")
            // A registry project's key that cannot be used pauses the project with the reason;
            // the pool's other groups go on and this one is tried again later.
            if let name = parsed.string("project"), let url = parsed.string("database-url"),
               let connection = try? PGConnection(url: url) {
                var why = error.description
                if why.hasPrefix("project \(name): ") { why.removeFirst("project \(name): ".count) }
                try? Project.credentialsRefused(connection, name: name, why: why)
            }
            return Int32(Supervisor.configurationErrorStatus)
        } catch {
            report("herald work: \(error)")
            return 1
        }
    }

    /// The operator's allow-list, read once at start: a row added later takes effect when the
    /// workers restart.
    static func extraMessageFields(_ config: WorkerConfiguration) throws -> Set<String> {
        let fields: Set<String>
        do {
            fields = try MessageExtraFields.load(try PGConnection(url: config.databaseURL))
        } catch {
            throw WorkerStartupError("reading herald.message_extra_fields (DATABASE_URL \(PGConnection.redacted(config.databaseURL))): \(error)")
        }
        if !fields.isEmpty {
            Logger(level: config.logLevel, prefix: "herald work[\(getpid())]")
                .info("also accepting \(fields.count) message fields from herald.message_extra_fields: \(fields.sorted().joined(separator: ", "))")
        }
        return fields
    }

    /// What this run did (jobs created since it started), not the database's totals.
    static func printSummary(_ connection: PGConnection, since: Date, databaseSince: String, environment: RunEnvironment) throws {
        let elapsed = Date().timeIntervalSince(since)
        let summary = try Administration.summary(connection, since: databaseSince)
        let took = String(format: "%.1f", elapsed)
        var lines = ["", environment.emulator == nil ? "Delivered in \(took) s:"
                         : "Delivered in \(took) s to the local FCM emulator, NOT to devices:"]
        for (state, count) in summary.states { lines.append("  \(state.padding(toLength: 10, withPad: " ", startingAt: 0)) \(count)") }
        lines.append("  dead       \(summary.deadLetters)   (SELECT * FROM herald.dead_letters)")
        lines.append("  pruned     \(summary.prunedTokens) tokens (SELECT * FROM herald.pruned_tokens)")
        if let emulator = environment.emulator {
            let apns = emulator.apnsDeliveries().count
            lines.append("The emulator in this process received \(emulator.deliveredMessages().count) messages\(apns > 0 ? " and \(apns) APNs pushes" : ""); Retry-After violations: \(emulator.retryAfterViolations).")
            lines.append("No message reached a phone. To deliver for real, set DATABASE_URL and GOOGLE_APPLICATION_CREDENTIALS (see herald work --help).")
        }
        if let cluster = environment.cluster, !environment.keepCluster {
            lines.append("The private PostgreSQL (\(cluster.url)) stops now; run again with --keep to look at its tables afterwards.")
        }
        print(lines.joined(separator: "\n"))
    }
}
