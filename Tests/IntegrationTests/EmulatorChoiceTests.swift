import Emulator
import Foundation
import JSON
import Postgres
import Testing
import TestSupport

/// Only the embedded default or an explicit `--emulator` sends to the in-process emulator. A
/// start with a real database and no credentials stops before it touches a job, saying which
/// variable to set, instead of marking real jobs delivered to nowhere.
@Suite(.serialized) struct EmulatorChoiceTests {
    /// A data folder of its own, so a test never writes `./.herald` of the working directory.
    static func dataFolder() -> String {
        NSTemporaryDirectory() + "herald-home-\(UUID().uuidString)"
    }

    @Test func workWithADatabaseAndNoCredentialsStopsBeforeTouchingAJob() throws {
        let stack = try WorkerStack()
        defer { stack.close() }
        try stack.enqueue(5, prefix: "real-device-")
        let home = Self.dataFolder()
        defer { try? FileManager.default.removeItem(atPath: home) }
        let run = try HeraldProcess.run(["work", "--drain", "--processes", "1", "--poll-interval", "0.2"],
                                        environment: ["DATABASE_URL": stack.database.url, "HERALD_HOME": home], timeout: 60)
        #expect(run.status != nil && run.status != 0, "\(run.output)")
        #expect(run.output.contains("GOOGLE_APPLICATION_CREDENTIALS"), "\(run.output)")
        #expect(run.output.contains("--emulator"))
        // Every job is as it was: available, never attempted; nothing was added either.
        #expect(try stack.count("SELECT count(*) FROM herald.jobs") == 5)
        #expect(try stack.count("SELECT count(*) FROM herald.jobs WHERE state = 'available' AND attempts = 0") == 5)
        #expect(!FileManager.default.fileExists(atPath: home + "/emulator-service-account.json"), "no emulator was started")
    }

    @Test func sendAndGroupsWithoutCredentialsSendNothing() throws {
        let home = Self.dataFolder()
        defer { try? FileManager.default.removeItem(atPath: home) }
        let send = try HeraldProcess.run(["send", "--token", "real-device", "--title", "Hello"],
                                         environment: ["HERALD_HOME": home], timeout: 60)
        #expect(send.status == 2, "\(send.output)")
        #expect(send.output.contains("GOOGLE_APPLICATION_CREDENTIALS") && send.output.contains("nothing was sent"))
        #expect(!send.output.contains("projects/"), "no message name is reported")
        let groups = try HeraldProcess.run(["groups", "create", "--name", "family", "--token", "phone"],
                                           environment: ["HERALD_HOME": home], timeout: 60)
        #expect(groups.status == 2, "\(groups.output)")
        #expect(groups.output.contains("GOOGLE_APPLICATION_CREDENTIALS"))
    }

    @Test func workAndSendUseTheEmulatorWhenAsked() throws {
        let stack = try WorkerStack()
        defer { stack.close() }
        try stack.enqueue(5, prefix: "test-device-")
        let home = Self.dataFolder()
        defer { try? FileManager.default.removeItem(atPath: home) }
        let run = try HeraldProcess.run(["work", "--emulator", "--drain", "--processes", "1", "--poll-interval", "0.2"],
                                        environment: ["DATABASE_URL": stack.database.url, "HERALD_HOME": home], timeout: 120)
        #expect(run.status == 0, "\(run.output)")
        #expect(run.output.contains("--emulator") && run.output.contains("no message reaches a device"), "\(run.output)")
        // Over TLS, as FCM is reached: the emulator's own certificate, its authority handed to the workers.
        #expect(run.output.contains("local emulator at https://127.0.0.1:"), "\(run.output)")
        // Delivered to the emulator in the herald process, whose project is herald-local.
        #expect(try stack.count("SELECT count(*) FROM herald.jobs WHERE state = 'completed' AND fcm_message_name LIKE 'projects/herald-local/messages/%'") == 5)
        #expect(stack.emulator.deliveredMessages().isEmpty, "the test's own emulator was never configured")

        let send = try HeraldProcess.run(["send", "--emulator", "--token", "test-device", "--title", "Hello"],
                                         environment: ["HERALD_HOME": home], timeout: 60)
        #expect(send.status == 0, "\(send.output)")
        #expect(send.output.contains("projects/herald-local/messages/"))
        #expect(send.output.contains("not to a device"))

        // With --log-format json, what it says on stderr is records of the log; only the message
        // name, its result on stdout, is plain.
        let json = try HeraldProcess.run(["send", "--emulator", "--token", "test-device", "--title", "Hello", "--log-format", "json"],
                                         environment: ["HERALD_HOME": home], timeout: 60)
        #expect(json.status == 0, "\(json.output)")
        let lines = json.output.split(separator: "\n").map(String.init)
        let records = lines.filter { !$0.hasPrefix("projects/herald-local/messages/") }
        #expect(records.count == lines.count - 1, "\(json.output)")
        #expect(records.allSatisfy { (try? JSONValue.parse(Array($0.utf8)))?["msg"]?.stringValue != nil }, "a line that is not a record: \(json.output)")
        #expect(records.contains { $0.contains("not to a device") }, "\(json.output)")
    }

    @Test func theEmulatorAndCredentialsTogetherAreRefused() throws {
        let stack = try WorkerStack()
        defer { stack.close() }
        let send = try HeraldProcess.run(["send", "--emulator", "--token", "t", "--title", "x"], environment: stack.environment, timeout: 60)
        #expect(send.status == 2, "\(send.output)")
        #expect(send.output.contains("--emulator") && send.output.contains("GOOGLE_APPLICATION_CREDENTIALS"))
        #expect(stack.emulator.deliveredMessages().isEmpty)
    }

    @Test func theEmbeddedDefaultSaysItsMessagesWentToTheEmulator() throws {
        let home = Self.dataFolder()
        defer { try? FileManager.default.removeItem(atPath: home) }
        let run = try HeraldProcess.run(["work", "--sample", "40", "--drain", "--processes", "1", "--poll-interval", "0.2"],
                                        environment: ["HERALD_HOME": home], timeout: 240)
        #expect(run.status == 0, "\(run.output)")
        #expect(run.output.contains("to the local FCM emulator, NOT to devices"), "\(run.output)")
        #expect(run.output.contains("local emulator at https://127.0.0.1:"), "over TLS: \(run.output)")
        #expect(run.output.contains("No message reached a phone"))
        #expect(run.output.contains("To deliver for real, set DATABASE_URL and GOOGLE_APPLICATION_CREDENTIALS"))
    }

    /// A second run on the same data folder reports its own jobs, not the database's totals, and
    /// `--keep` leaves the private PostgreSQL up with the address its hint names.
    @Test func theEmbeddedSummaryCountsThisRunAndKeepLeavesThePostgreSQLToLookAt() throws {
        let home = Self.dataFolder()
        defer { try? FileManager.default.removeItem(atPath: home) }
        let arguments = ["work", "--sample", "40", "--drain", "--processes", "1", "--poll-interval", "0.2"]
        let first = try HeraldProcess.run(arguments, environment: ["HERALD_HOME": home], timeout: 240)
        #expect(first.status == 0, "\(first.output)")
        #expect(first.output.contains("--keep"), "the run says how to keep its database: \(first.output)")
        let second = try HeraldProcess.run(arguments + ["--keep"], environment: ["HERALD_HOME": home], timeout: 240)
        #expect(second.status == 0, "\(second.output)")
        // 40 sample messages, one of them (g = 7) refused by FCM: this run's figures, not 80 and 2.
        #expect(second.output.contains("completed  39"), "\(second.output)")
        #expect(second.output.contains("dead       1 "), "\(second.output)")
        guard let urlRange = second.output.range(of: #"psql '(postgresql://[^']+)'"#, options: .regularExpression) else {
            Issue.record("no psql line in: \(second.output)")
            return
        }
        let url = String(second.output[urlRange].dropFirst(6).dropLast())
        guard let stopLine = second.output.split(separator: "\n").first(where: { $0.contains("stop it with: ") }) else {
            Issue.record("no stop command in: \(second.output)")
            return
        }
        let stopCommand = String(stopLine.components(separatedBy: "stop it with: ")[1])
        defer {
            let stop = Process()
            stop.executableURL = URL(fileURLWithPath: "/bin/sh")
            stop.arguments = ["-c", stopCommand]
            if (try? stop.run()) != nil { stop.waitUntilExit() }
        }
        let connection = try PGConnection(url: url)
        let dead = try connection.query("SELECT count(*) FROM herald.dead_letters")
        #expect(dead[0, 0] == "2", "both runs' dead letters are there to look at")
    }

    /// Two embedded runs in one data folder: the second refuses at once, naming the first, which
    /// finishes as if alone.
    @Test func aSecondEmbeddedRunInTheSameFolderRefusesNamingTheFirst() throws {
        let home = Self.dataFolder()
        defer { try? FileManager.default.removeItem(atPath: home) }
        let first = try HeraldProcess(["work", "--sample", "3000", "--drain", "--processes", "1"], environment: ["HERALD_HOME": home])
        try first.start()
        defer { first.signal(SIGKILL); first.wait(timeout: 10) }
        #expect(waitUntil(timeout: 120) { first.output.contains("starting a private PostgreSQL") }, "\(first.output)")
        let startedAt = Date()
        let second = try HeraldProcess.run(["work", "--sample", "10", "--drain", "--processes", "1"], environment: ["HERALD_HOME": home], timeout: 60)
        let seconds = Date().timeIntervalSince(startedAt)
        #expect(second.status == 2, "\(second.output)")
        #expect(seconds < 5, "refused in \(seconds) s")
        #expect(second.output.contains("is in use") && second.output.contains("herald work (pid \(first.pid)"), "\(second.output)")
        #expect(second.output.contains("--data-dir"), "says how to run beside it: \(second.output)")
        #expect(first.wait(timeout: 240) == 0, "\(first.output)")
        #expect(first.output.contains("completed  "), "the first run ends with its summary: \(first.output)")
        #expect(first.output.contains("completed  2993"), "all its sample delivered: \(first.output)")
    }

    /// A supervisor killed with SIGKILL takes its workers with it.
    @Test func noWorkerOutlivesAKilledSupervisor() throws {
        let home = Self.dataFolder()
        defer { try? FileManager.default.removeItem(atPath: home) }
        let pool = try HeraldProcess(["work", "--sample", "20000", "--processes", "2"], environment: ["HERALD_HOME": home])
        try pool.start()
        defer { pool.signal(SIGKILL); pool.wait(timeout: 10) }
        var workers: [Int32] = []
        #expect(waitUntil(timeout: 120) {
            workers = Self.children(of: pool.pid)
            return workers.count == 2 && pool.output.contains("serving /metrics")
        }, "\(pool.output)")
        kill(pool.pid, SIGKILL)
        let killedAt = Date()
        let gone = waitUntil(timeout: 10, interval: 0.1) { workers.allSatisfy { kill($0, 0) != 0 } }
        print("supervisor killed: its \(workers.count) workers gone after \(String(format: "%.1f", Date().timeIntervalSince(killedAt))) s")
        #expect(gone, "workers \(workers.filter { kill($0, 0) == 0 }) still run 10 s after the supervisor's SIGKILL")
        pool.wait(timeout: 10)
        // The next run in the folder takes the private PostgreSQL the killed one left, and stops it.
        let next = try HeraldProcess.run(["work", "--sample", "5", "--drain", "--processes", "1"], environment: ["HERALD_HOME": home], timeout: 240)
        #expect(next.status == 0, "\(next.output)")
    }

    /// The processes whose parent is `pid` (from /proc).
    static func children(of pid: Int32) -> [Int32] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.compactMap { Int32($0) }.filter { child in
            guard let stat = try? String(contentsOfFile: "/proc/\(child)/stat", encoding: .utf8),
                  let close = stat.lastIndex(of: ")") else { return false }
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            return fields.count > 2 && Int32(fields[1]) == pid
        }
    }

    /// `--drain` after the README's campaign for tomorrow morning: it delivers what is due (and
    /// what comes due within its horizon), then stops, saying what waits for later.
    @Test func aDrainDoesNotWaitForTomorrowsCampaign() throws {
        let stack = try WorkerStack()
        defer { stack.close() }
        try stack.connection.execute("""
            INSERT INTO herald.jobs (message, run_at, queue)
            SELECT jsonb_build_object('token', 'campaign-device-' || g, 'notification', jsonb_build_object('title', 'Winter sale')),
                   date_trunc('day', now()) + interval '1 day 9 hours', 'marketing'
            FROM generate_series(1, 1000) AS g;
            INSERT INTO herald.jobs (message, run_at) VALUES ('{"token": "soon-device", "data": {"k": "v"}}', now() + interval '3 seconds');
            """)
        try stack.enqueue(5, prefix: "now-device-")
        let home = Self.dataFolder()
        defer { try? FileManager.default.removeItem(atPath: home) }
        let startedAt = Date()
        let run = try HeraldProcess.run(["work", "--emulator", "--drain", "--processes", "1", "--poll-interval", "0.2"],
                                        environment: ["DATABASE_URL": stack.database.url, "HERALD_HOME": home], timeout: 90)
        let seconds = Date().timeIntervalSince(startedAt)
        #expect(run.status == 0, "\(run.output)")
        #expect(seconds < 60, "exited after \(seconds) s")
        #expect(run.output.contains("1000 scheduled jobs wait for later"), "\(run.output)")
        #expect(try stack.count("SELECT count(*) FROM herald.jobs WHERE state = 'completed'") == 6, "the due ones and the one due in 3 s")
        #expect(try stack.count("SELECT count(*) FROM herald.jobs WHERE state = 'scheduled'") == 1000)
    }

    /// The addresses of the `connect` calls in an strace log (`-e trace=connect`): IPv4 and IPv6
    /// only (a unix socket goes nowhere).
    static func connectedAddresses(_ log: String) -> [String] {
        var addresses: [String] = []
        for line in log.split(separator: "\n") where line.contains("connect(") {
            for marker in ["inet_addr(\"", "inet_pton(AF_INET6, \""] {
                guard let start = line.range(of: marker) else { continue }
                let rest = line[start.upperBound...]
                if let end = rest.firstIndex(of: "\"") { addresses.append(String(rest[..<end])) }
            }
        }
        return addresses
    }

    static func isLoopback(_ address: String) -> Bool {
        address.hasPrefix("127.") || address == "::1" || address.hasPrefix("::ffff:127.")
    }

    /// Test mode never reaches a real service: `herald work --emulator` with a registered FCM
    /// project whose key's token_uri is Google's and an APNs app registered for Apple's production
    /// endpoint delivers both to the emulator in its process, and every connection its processes
    /// open (traced from outside by strace, workers included; no network namespace) is to a
    /// loopback address: no access token is asked of Google, no push goes to Apple, no name is
    /// looked up on the network's resolver.
    @Test func theEmulatorSendsEveryProviderToItsStandInsAndNothingLeavesLoopback() throws {
        let stack = try WorkerStack()
        defer { stack.close() }
        let folder = NSTemporaryDirectory() + "herald-test-mode-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        // Keys made elsewhere, as a deployment's are: an FCM key whose grants go to Google, and an
        // APNs key (issued by another emulator, for com.example.shop).
        let issuer = EmulatorServer(configuration: EmulatorConfiguration(host: "127.0.0.1", port: 0, threads: 1))
        try issuer.start()
        defer { issuer.stop() }
        let fcmKey = folder + "/shop-prod.json"
        let json = try issuer.serviceAccountJSON(projectID: "shop-prod")
            .replacingOccurrences(of: issuer.tokenURI.replacingOccurrences(of: "/", with: "\\/"), with: "https:\\/\\/oauth2.googleapis.com\\/token")
            .replacingOccurrences(of: issuer.tokenURI, with: "https://oauth2.googleapis.com/token")
        #expect(json.contains("oauth2.googleapis.com"))
        try json.write(toFile: fcmKey, atomically: true, encoding: .utf8)
        chmod(fcmKey, 0o600)
        let apnsKey = try issuer.writeAPNsKey(folder: folder)
        try stack.connection.query("SELECT herald.add_project('shop', 'shop-prod', $1)", [.text(fcmKey)])
        try stack.connection.query("SELECT herald.add_apns_app('shop-ios', $1, $2, $3, 'com.example.shop')",
                                   [.text(apnsKey.path), .text(apnsKey.keyID), .text(apnsKey.teamID)])
        try stack.connection.query("""
            INSERT INTO herald.jobs (message, project)
            SELECT jsonb_build_object('token', 'android-' || g, 'notification', jsonb_build_object('title', 'Hi')), 'shop'
            FROM generate_series(1, 3) AS g
            """)
        try stack.connection.query("""
            INSERT INTO herald.jobs (message, project)
            SELECT jsonb_build_object('apns_token', lpad(to_hex(g), 64, 'a'), 'apns', jsonb_build_object('payload', jsonb_build_object('aps', jsonb_build_object('alert', 'Hi')))),
                   'shop-ios'
            FROM generate_series(1, 3) AS g
            """)
        let home = Self.dataFolder()
        defer { try? FileManager.default.removeItem(atPath: home) }
        let trace = folder + "/connect.trace"
        let herald = try HeraldProcess(["work", "--emulator", "--drain", "--sample", "2", "--processes", "2", "--poll-interval", "0.2"],
                                       environment: ["DATABASE_URL": stack.database.url, "HERALD_HOME": home],
                                       under: ["/usr/bin/strace", "-f", "-qq", "--seccomp-bpf", "-e", "trace=connect", "-o", trace])
        try herald.start()
        // strace's child is herald's supervisor: stopped here if the run outlives its timeout (a
        // killed strace leaves its tracees running).
        var supervisor: pid_t? = nil
        #expect(waitUntil(timeout: 20) {
            supervisor = Self.children(of: herald.pid).first
            return supervisor != nil
        })
        defer { if let supervisor, kill(supervisor, 0) == 0 { kill(supervisor, SIGKILL) } }
        let status = herald.wait(timeout: 120)
        #expect(status == 0, "\(herald.output)")
        #expect(try stack.count("SELECT count(*) FROM herald.jobs WHERE project = 'shop' AND state = 'completed' AND fcm_message_name LIKE 'projects/shop-prod/messages/%'") == 3,
                "the FCM project's jobs reached the emulator's FCM, as FCM project shop-prod: \(herald.output)")
        #expect(try stack.count("SELECT count(*) FROM herald.jobs WHERE project = 'shop-ios' AND state = 'completed'") == 3,
                "the APNs app's jobs reached the emulator's APNs: \(herald.output)")
        #expect(try stack.count("SELECT count(*) FROM herald.jobs WHERE state = 'completed'") == 8)
        #expect(herald.output.contains("received 5 messages and 3 APNs pushes"), "\(herald.output)")
        #expect(herald.output.contains("test mode"), "the start-up line says every provider goes to the emulator: \(herald.output)")
        let log = (try? String(contentsOfFile: trace, encoding: .utf8)) ?? ""
        let addresses = Self.connectedAddresses(log)
        #expect(addresses.contains { Self.isLoopback($0) }, "the trace saw the pool's own connections (PostgreSQL, the emulator): \(log.prefix(2000))")
        let outside = addresses.filter { !Self.isLoopback($0) }
        #expect(outside.isEmpty, "connections that left loopback: \(Set(outside).sorted())")
        #expect(issuer.tokensIssued == 0 && issuer.apnsDeliveries().isEmpty, "the key's issuer was never asked")
    }
}
