import Foundation
import JSON
import Postgres
import Testing
import TestSupport

/// Every command as a user starts it from a shell: the real binary.
@Suite struct CommandLineTests {
    static let commands = ["work", "migrate", "grant", "send", "groups", "dead", "stats", "campaigns", "queues", "projects", "delivery-data", "dashboard", "bench", "emulator"]

    @Test(arguments: commands) func everyCommandExplainsItself(_ command: String) throws {
        let run = try HeraldProcess.run([command, "--help"], environment: [:], timeout: 30)
        #expect(run.status == 0, "herald \(command) --help: \(run.output)")
        #expect(run.output.contains("herald \(command)"))
    }

    @Test func migrateAppliesEveryMigrationOnceAndLogsInTheFormatAsked() throws {
        let database = try TestDatabase.fresh(migrated: false)
        defer { database.drop() }
        let first = try HeraldProcess.run(["migrate"], environment: ["DATABASE_URL": database.url], timeout: 60)
        #expect(first.status == 0, "\(first.output)")
        #expect(first.output.contains("040_scheduled_state"))
        let again = try HeraldProcess.run(["migrate", "--log-format", "json"], environment: ["DATABASE_URL": database.url], timeout: 60)
        #expect(again.status == 0, "\(again.output)")
        #expect(!again.output.contains("applied"), "nothing left to apply: \(again.output)")
    }

    @Test func theBenchWithEventsAndProjectsDeliversEveryJobAndWritesAnEventForEach() throws {
        let folder = NSTemporaryDirectory() + "herald-bench-with-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let figuresFile = folder + "/figures.json"
        let run = try HeraldProcess.run(["bench", "--jobs", "300", "--latency-seconds", "1", "--rate", "200", "--processes", "2",
                                         "--with", "events,projects", "--data-dir", folder, "--json", figuresFile],
                                        environment: [:], timeout: 300)
        #expect(run.status == 0, "\(run.output)")
        #expect(run.output.contains("features (--with): events, projects"), "\(run.output)")
        let figures = try JSONValue.parse(String(contentsOfFile: figuresFile, encoding: .utf8))
        #expect(figures["settings"]?["features"]?.arrayValue?.compactMap(\.stringValue) == ["events", "projects"])
        #expect(figures["throughput"]?["completed"]?.intValue == 300, "every job of the throughput phase delivered")
        #expect(figures["throughput"]?["completed_events"]?.intValue == 300, "one completed event per job")

        let refused = try HeraldProcess.run(["bench", "--with", "caps,quiet", "--data-dir", folder], environment: [:], timeout: 30)
        #expect(refused.status == 2)
        #expect(refused.output.contains("--with quiet is not a feature; give one or more of caps, quiet-hours, events, projects"), "\(refused.output)")
    }

    /// `--with apns`: the jobs are APNs alerts (an FCM worker would dead-letter them as messages
    /// without a target), delivered by the pool carrying the registry to the emulator's APNs side.
    @Test func theBenchWithAPNsDeliversEveryJobAsAnAPNsMessage() throws {
        let folder = NSTemporaryDirectory() + "herald-bench-apns-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let figuresFile = folder + "/figures.json"
        let run = try HeraldProcess.run(["bench", "--jobs", "300", "--latency-seconds", "1", "--rate", "200", "--processes", "1",
                                         "--with", "apns", "--data-dir", folder, "--json", figuresFile],
                                        environment: [:], timeout: 300)
        #expect(run.status == 0, "\(run.output)")
        #expect(run.output.contains("features (--with): apns"), "\(run.output)")
        let figures = try JSONValue.parse(String(contentsOfFile: figuresFile, encoding: .utf8))
        #expect(figures["throughput"]?["completed"]?.intValue == 300, "every job of the throughput phase delivered")

        let refused = try HeraldProcess.run(["bench", "--with", "projects,apns", "--data-dir", folder], environment: [:], timeout: 30)
        #expect(refused.status == 2)
        #expect(refused.output.contains("--with projects and --with apns cannot be given together"), "\(refused.output)")
    }
}

/// What a first day at the shell runs into: a typo, a version question, a bad number or URL.
@Suite struct FirstDayCommandLineTests {
    @Test func versionIsPrintedAndMatchesTheMetricsLabel() throws {
        for flag in ["--version", "version"] {
            let run = try HeraldProcess.run([flag], environment: [:], timeout: 30)
            #expect(run.status == 0, "\(run.output)")
            let line = run.output.trimmingCharacters(in: .whitespacesAndNewlines)
            #expect(line.range(of: #"^herald \d+\.\d+\.\d+$"#, options: .regularExpression) != nil, "herald \(flag): \(line)")
        }
    }

    @Test func aMisspeltCommandGetsASuggestionNotTheWholeUsage() throws {
        let run = try HeraldProcess.run(["wrok"], environment: [:], timeout: 30)
        #expect(run.status == 2)
        #expect(run.output.contains("did you mean 'herald work'?"), "\(run.output)")
        #expect(!run.output.contains("Commands:"), "a suggestion, not the usage: \(run.output)")
        let unknown = try HeraldProcess.run(["frobnicate"], environment: [:], timeout: 30)
        #expect(unknown.status == 2)
        #expect(unknown.output.contains("Commands:"), "nothing near it: the usage lists the commands: \(unknown.output)")
    }

    @Test func aMisspeltOptionGetsASuggestion() throws {
        let run = try HeraldProcess.run(["work", "--concurency", "8"], environment: [:], timeout: 30)
        #expect(run.status == 2)
        #expect(run.output.contains("unknown option --concurency (did you mean --concurrency?)"), "\(run.output)")
    }

    @Test func aNumberOutOfRangeIsShownHowToGiveIt() throws {
        let flag = try HeraldProcess.run(["work", "--concurrency", "0"], environment: [:], timeout: 30)
        #expect(flag.status == 2)
        #expect(flag.output.contains("give e.g. --concurrency 1024"), "\(flag.output)")
        let env = try HeraldProcess.run(["work"], environment: ["HERALD_CONCURRENCY": "0"], timeout: 30)
        #expect(env.status == 2)
        #expect(env.output.contains("give e.g. HERALD_CONCURRENCY=1024"), "\(env.output)")
    }

    @Test func migrateAndGroupsHelpSayWhatTheyDoWithoutDATABASE_URL() throws {
        let home = NSTemporaryDirectory() + "herald-first-day-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: home) }
        for command in ["migrate", "groups"] {
            let help = try HeraldProcess.run([command, "--help"], environment: [:], timeout: 30)
            #expect(help.status == 0)
            #expect(!help.output.contains("private PostgreSQL under"), "herald \(command) --help promises no private PostgreSQL: \(help.output)")
            #expect(!help.output.contains("embedded default"), "herald \(command) --help: \(help.output)")
        }
        // migrate: refuses, naming the setting and what to do, and starts nothing.
        let help = try HeraldProcess.run(["migrate", "--help"], environment: [:], timeout: 30)
        #expect(help.output.contains("The PostgreSQL to migrate (required)"), "\(help.output)")
        let migrate = try HeraldProcess.run(["migrate"], environment: ["HERALD_HOME": home], timeout: 30)
        #expect(migrate.status == 2, "\(migrate.output)")
        #expect(migrate.output.contains("DATABASE_URL is not set; set it (or --database-url) to the PostgreSQL to migrate"), "\(migrate.output)")
        #expect(!FileManager.default.fileExists(atPath: home + "/postgres"), "no PostgreSQL was started")
        // groups: works on FCM alone, as its help says, and starts no PostgreSQL either.
        let groupsHelp = try HeraldProcess.run(["groups", "--help"], environment: [:], timeout: 30)
        #expect(groupsHelp.output.contains("Unset: only FCM is changed; no PostgreSQL is started"), "\(groupsHelp.output)")
        let created = try HeraldProcess.run(["groups", "create", "--name", "first-day-family", "--token", "phone-1", "--emulator"],
                                            environment: ["HERALD_HOME": home], timeout: 60)
        #expect(created.status == 0, "\(created.output)")
        #expect(created.output.contains("\"name\":\"first-day-family\""), "\(created.output)")
        #expect(!FileManager.default.fileExists(atPath: home + "/postgres"), "no PostgreSQL was started: \(created.output)")
    }

    @Test func queuesListShowsAQueueThatHoldsOnlyScheduledJobs() throws {
        let database = try TestDatabase.fresh(migrated: true)
        defer { database.drop() }
        let connection = try database.connect()
        for n in 1...2 {
            try connection.query("SELECT herald.enqueue(jsonb_build_object('token', 'later-' || $1::int), run_at => now() + interval '1 hour', queue => 'tomorrow')",
                                 [.int(n)])
        }
        #expect(try connection.query("SELECT count(*) FROM herald.jobs WHERE queue = 'tomorrow' AND state = 'scheduled'").int(0, 0) == 2)
        let table = try HeraldProcess.run(["queues", "list"], environment: ["DATABASE_URL": database.url], timeout: 60)
        #expect(table.status == 0, "\(table.output)")
        let lines = table.output.split(separator: "\n").map { $0.split(separator: " ", omittingEmptySubsequences: true).map(String.init) }
        let header = try #require(lines.first { $0.first == "QUEUE" }, "\(table.output)")
        let row = try #require(lines.first { $0.first == "tomorrow" }, "the queue is listed: \(table.output)")
        // Column by column ("MAX IN FLIGHT" is three words of the header, one cell of a row).
        let cells = Dictionary(uniqueKeysWithValues: zip(header.filter { !["MAX", "IN"].contains($0) }, row))
        #expect(cells["SCHEDULED"] == "2" && cells["AVAILABLE"] == "0", "\(table.output)")
        let json = try HeraldProcess.run(["queues", "list", "--json"], environment: ["DATABASE_URL": database.url], timeout: 60)
        let queue = try JSONValue.parse(json.output.trimmingCharacters(in: .whitespacesAndNewlines)).arrayValue?.first
        #expect(queue?["queue"]?.stringValue == "tomorrow" && queue?["scheduled"]?.intValue == 2, "\(json.output)")
    }

    @Test(arguments: ["ftp://fcm.example", "not a url", "https://", "http//127.0.0.1:1"])
    func anFCMURLThatIsNotHTTPIsRefusedBeforeAnythingIsTouched(_ url: String) throws {
        let database = try TestDatabase.fresh(migrated: true)
        defer { database.drop() }
        try database.connect().query("SELECT herald.enqueue('{\"token\": \"first-day-url\"}')")
        let run = try HeraldProcess.run(["work", "--drain", "--fcm-url", url],
                                        environment: ["DATABASE_URL": database.url,
                                                      "GOOGLE_APPLICATION_CREDENTIALS": "/nonexistent/sa.json"], timeout: 60)
        #expect(run.status == 2, "\(run.output)")
        #expect(run.output.contains("--fcm-url \"\(url)\""), "names the flag and the value: \(run.output)")
        #expect(run.output.contains("https://fcm.googleapis.com"), "says what to give: \(run.output)")
        let available = try database.connect().query("SELECT count(*) FROM herald.jobs WHERE state = 'available'")
        #expect(available[0, 0] == "1", "the job is untouched")
    }
}

/// `herald emulator` started on its own: its start-up says what a worker must be given.
@Suite struct StandaloneEmulatorTests {
    /// The emulator's `export` lines, once it has printed them.
    static func exportLines(_ emulator: HeraldProcess) -> [String]? {
        let lines = emulator.output.split(separator: "\n").map(String.init)
        guard lines.contains(where: { $0.hasPrefix("export GOOGLE_APPLICATION_CREDENTIALS=") }) else { return nil }
        return lines.filter { $0.hasPrefix("export ") }
    }

    /// HTTPS, as `herald emulator` serves by default: a certificate it made, its authority printed
    /// as HERALD_CA_FILE; the worker given those lines verifies it as it verifies FCM's and speaks
    /// HTTP/2 to it, and the files go when the emulator stops.
    @Test func itsStartUpLinesPastedIntoAShellLetAWorkerDeliverToIt() throws {
        try pastedLinesDeliver(emulatorArguments: [],
                               names: ["HERALD_FCM_URL", "HERALD_IID_URL", "HERALD_FCM_DATA_URL", "GOOGLE_APPLICATION_CREDENTIALS", "HERALD_CA_FILE"])
    }

    /// `--tls off`, for a user who asks for cleartext: plain http://, no authority, a start-up
    /// line that says the worker speaks HTTP/1.1 there; a worker given the lines delivers over it.
    @Test func withTLSOffItServesPlainHTTPWhichAWorkerSpeaksHTTP1To() throws {
        try pastedLinesDeliver(emulatorArguments: ["--tls", "off"],
                               names: ["HERALD_FCM_URL", "HERALD_IID_URL", "HERALD_FCM_DATA_URL", "GOOGLE_APPLICATION_CREDENTIALS"])
    }

    /// `--write-ca FILE`: the authority at a path of the user's (a volume another container
    /// reads), named by HERALD_CA_FILE, and still there when the emulator has stopped.
    @Test func withWriteCAItsLinesNameTheAuthorityWhereTheUserAskedAndItStays() throws {
        let folder = NSTemporaryDirectory() + "herald-emulator-ca-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try pastedLinesDeliver(emulatorArguments: ["--write-ca", folder + "/emulator-ca.pem"],
                               names: ["HERALD_FCM_URL", "HERALD_IID_URL", "HERALD_FCM_DATA_URL", "GOOGLE_APPLICATION_CREDENTIALS", "HERALD_CA_FILE"],
                               keptAuthority: folder + "/emulator-ca.pem")
        var status = stat()
        #expect(stat(folder + "/emulator-ca.pem", &status) == 0 && status.st_mode & 0o777 == 0o644, "anyone may read it to trust the emulator")
    }

    @Test func tlsAutoBesideACertificateOfTheUsersIsRefused() throws {
        let run = try HeraldProcess.run(["emulator", "--port", "0", "--tls", "auto", "--tls-cert", "c.pem", "--tls-key", "k.pem"],
                                        environment: [:], timeout: 30)
        #expect(run.status != 0 && run.output.contains("--tls auto") && run.output.contains("--tls-cert"), "\(run.output)")
        let unknown = try HeraldProcess.run(["emulator", "--port", "0", "--tls", "yes"], environment: [:], timeout: 30)
        #expect(unknown.status != 0 && unknown.output.contains("auto") && unknown.output.contains("off"), "\(unknown.output)")
        // A public URL kept from cleartext days, on the HTTPS it now serves by default: refused
        // before anything starts, saying both ways out.
        let cleartextURL = try HeraldProcess.run(["emulator", "--port", "0", "--public-url", "http://emulator:8085"], environment: [:], timeout: 30)
        #expect(cleartextURL.status != 0 && cleartextURL.output.contains("https://emulator:8085") && cleartextURL.output.contains("--tls off")
                && !cleartextURL.output.contains("listening"), "\(cleartextURL.output)")
    }

    /// Starts `herald emulator` with `emulatorArguments`, checks the variables its `export` lines
    /// name, and has a worker given only those lines and DATABASE_URL (through a shell, as a user
    /// pastes them) deliver a job to it, over HTTP/2 and TLS when the lines name an authority and
    /// over HTTP/1.1 when they do not; the files it wrote for the purpose go when it stops, and
    /// `keptAuthority`, the file --write-ca named, stays.
    func pastedLinesDeliver(emulatorArguments: [String], names expected: [String], keptAuthority: String? = nil) throws {
        let emulator = try HeraldProcess(["emulator", "--port", "0"] + emulatorArguments, environment: [:])
        try emulator.start()
        defer { emulator.signal(SIGKILL) }
        var exports: [String] = []
        #expect(waitUntil(timeout: 30) { exports = Self.exportLines(emulator) ?? []; return !exports.isEmpty },
                "the start-up names the settings: \(emulator.output)")
        let names = exports.map { $0.dropFirst("export ".count).prefix { $0 != "=" } }
        #expect(names.map(String.init) == expected, "\(exports)")
        func value(_ name: String) -> String? {
            exports.first { $0.hasPrefix("export \(name)=") }.map { String($0.dropFirst("export \(name)=".count).prefix { $0 != " " }) }
        }
        let credentials = try #require(value("GOOGLE_APPLICATION_CREDENTIALS"))
        #expect(credentials.hasPrefix("/"), "an absolute path: \(credentials)")
        #expect(FileManager.default.fileExists(atPath: credentials), "the service account is written: \(credentials)")
        let caFile = value("HERALD_CA_FILE")
        if let caFile { #expect(FileManager.default.fileExists(atPath: caFile), "the authority is written: \(caFile)") }
        if let keptAuthority {
            #expect(caFile.map { URL(fileURLWithPath: $0).resolvingSymlinksInPath().path } == URL(fileURLWithPath: keptAuthority).resolvingSymlinksInPath().path,
                    "HERALD_CA_FILE names the file --write-ca wrote: \(exports)")
        }
        let listening = emulator.output.split(separator: "\n").first { $0.hasPrefix("herald emulator listening on ") } ?? ""
        #expect(listening.contains(caFile == nil ? "cleartext" : "over TLS") && (caFile != nil || listening.contains("HTTP/1.1")), "\(listening)")

        // A worker given nothing but DATABASE_URL and those lines, through a shell as a user pastes them.
        let database = try TestDatabase.fresh(migrated: true)
        defer { database.drop() }
        try database.connect().query("SELECT herald.enqueue('{\"token\": \"standalone-emulator-1\", \"notification\": {\"title\": \"Hi\"}}')")
        let shell = Process()
        shell.executableURL = URL(fileURLWithPath: "/bin/sh")
        shell.arguments = ["-c", (exports + ["exec \"$HERALD\" work --drain --processes 1"]).joined(separator: "\n")]
        var env = ProcessInfo.processInfo.environment
        for key in ["GOOGLE_APPLICATION_CREDENTIALS", "HERALD_FCM_URL", "HERALD_CA_FILE", "HERALD_HOME", "HERALD_IID_URL", "HERALD_FCM_DATA_URL"] { env[key] = nil }
        env["DATABASE_URL"] = database.url
        env["HERALD_ADMIN_ADDRESS"] = "127.0.0.1:0"
        env["HERALD"] = try HeraldProcess.binary()
        shell.environment = env
        let logPath = NSTemporaryDirectory() + "herald-pasted-\(UUID().uuidString).log"
        FileManager.default.createFile(atPath: logPath, contents: nil)
        defer { try? FileManager.default.removeItem(atPath: logPath) }
        let log = try FileHandle(forWritingTo: URL(fileURLWithPath: logPath))
        shell.standardOutput = log
        shell.standardError = log
        shell.standardInput = FileHandle.nullDevice
        try shell.run()
        let exited = waitUntil(timeout: 120, interval: 0.05) { !shell.isRunning }
        if !exited { kill(shell.processIdentifier, SIGKILL) }
        let workerOutput = (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? ""
        #expect(exited && shell.terminationStatus == 0, "\(workerOutput)")
        let state = try database.connect().query("SELECT state FROM herald.jobs")
        #expect(state[0, 0] == "completed", "\(workerOutput)")
        let baseURL = try #require(value("HERALD_FCM_URL"))
        #expect(baseURL.hasPrefix(caFile == nil ? "http://" : "https://"), "\(baseURL)")
        let transport: CurlProtocol = caFile.map { .tlsHTTP1(caFile: $0) } ?? .http1
        // The road the worker took: HTTP/2 over TLS, as to FCM, or HTTP/1.1 in cleartext.
        let statistics = try #require(try curl(baseURL + "/emulator/stats", over: transport).json, "the emulator's statistics")
        let http1 = statistics["http1_requests"]?.intValue ?? -1, http2 = statistics["http2_requests"]?.intValue ?? -1
        #expect(caFile == nil ? http2 == 0 && http1 >= 1 : http2 >= 1, "HTTP/1.1 \(http1), HTTP/2 \(http2) requests")
        let received = try curl(baseURL + "/emulator/messages?token=standalone-emulator-1", over: transport)
        #expect(received.json?["messages"]?.arrayValue?.count == 1, "the emulator received it: \(received.body)")

        // The service account (and the authority) it wrote for the purpose go when it stops.
        emulator.signal(SIGTERM)
        #expect(emulator.wait(timeout: 30) == 0, "\(emulator.output)")
        #expect(!FileManager.default.fileExists(atPath: credentials), "the temporary service account is removed")
        if let caFile {
            #expect(FileManager.default.fileExists(atPath: caFile) == (keptAuthority != nil),
                    keptAuthority == nil ? "the authority's file is removed" : "the authority --write-ca wrote stays")
        }
    }

    @Test func aServiceAccountItWasAskedToWriteIsNamedByItsFullPathAndKept() throws {
        let folder = NSTemporaryDirectory() + "herald-emulator-sa-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let emulator = try HeraldProcess(["emulator", "--port", "0", "--write-service-account", "sa.json"], environment: [:])
        emulator.process.currentDirectoryURL = URL(fileURLWithPath: folder)
        try emulator.start()
        defer { emulator.signal(SIGKILL) }
        var exports: [String] = []
        #expect(waitUntil(timeout: 30) { exports = Self.exportLines(emulator) ?? []; return !exports.isEmpty }, "\(emulator.output)")
        let real = URL(fileURLWithPath: folder).resolvingSymlinksInPath().path
        #expect(exports.contains("export GOOGLE_APPLICATION_CREDENTIALS=\(real)/sa.json")
                || exports.contains("export GOOGLE_APPLICATION_CREDENTIALS=\(folder)/sa.json"), "\(exports)")
        emulator.signal(SIGTERM)
        #expect(emulator.wait(timeout: 30) == 0, "\(emulator.output)")
        #expect(FileManager.default.fileExists(atPath: folder + "/sa.json"), "a file it was asked to write stays")
    }
}
