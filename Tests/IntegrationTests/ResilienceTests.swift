import Emulator
import Foundation
import Postgres
import Testing
import TestSupport

/// A pool that outlives its log reader and a token endpoint that is down as it starts, and
/// passwords that never reach the output whatever shape the connection string has.
@Suite(.serialized) struct ResilienceTests {
    /// A port nothing listens on at this moment.
    static func freePort() throws -> Int {
        let relay = try SilentRelay(targetPort: 9)
        relay.stop()
        return relay.port
    }

    @Test func aClosedLogPipeNeitherStopsNorCrashesThePool() throws {
        let stack = try WorkerStack()
        defer { stack.close() }
        let adminPort = try Self.freePort()
        // herald work 2>&1 | head -1: the reader takes one line and goes away.
        var descriptors: [Int32] = [0, 0]
        #expect(pipe(&descriptors) == 0)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try HeraldProcess.binary())
        process.arguments = ["work", "--processes", "2", "--concurrency", "16", "--poll-interval", "0.2"]
        var env = ProcessInfo.processInfo.environment
        for (key, value) in stack.environment { env[key] = value }
        env["HERALD_ADMIN_ADDRESS"] = "127.0.0.1:\(adminPort)"
        process.environment = env
        let writer = FileHandle(fileDescriptor: descriptors[1], closeOnDealloc: false)
        process.standardOutput = writer
        process.standardError = writer
        process.standardInput = FileHandle.nullDevice
        try process.run()
        defer { if process.isRunning { kill(process.processIdentifier, SIGKILL); process.waitUntilExit() } }
        close(descriptors[1])
        var line: [UInt8] = []
        var byte: UInt8 = 0
        while read(descriptors[0], &byte, 1) == 1 && byte != UInt8(ascii: "\n") { line.append(byte) }
        close(descriptors[0])
        #expect(!line.isEmpty, "the pool wrote a first line")
        let admin = "http://127.0.0.1:\(adminPort)"
        #expect(waitUntil(timeout: 60) { (try? curl(admin + "/readyz", over: .http1).status) == 200 })

        // Every log line from now on goes to a closed pipe. A worker killed and restarted makes
        // the supervisor and the new worker write some.
        let workers = (try? String(contentsOfFile: "/proc/\(process.processIdentifier)/task/\(process.processIdentifier)/children", encoding: .utf8))?
            .split(separator: " ").compactMap { Int32($0) } ?? []
        #expect(workers.count == 2)
        if let first = workers.first { kill(first, SIGKILL) }
        try stack.enqueue(300, prefix: "pipe-")
        #expect(waitUntil(timeout: 90) { (try? stack.count("SELECT count(*) FROM herald.jobs WHERE state = 'completed'")) == 300 },
                "the pool keeps delivering")
        #expect(Set(stack.emulator.deliveredMessages().map(\.target)).count == 300)
        var dropped = 0
        #expect(waitUntil(timeout: 30, interval: 0.2) {
            guard let page = try? curl(admin + "/metrics", over: .http1).body else { return false }
            dropped = page.split(separator: "\n").first { $0.hasPrefix("herald_log_lines_dropped_total ") }
                .flatMap { Int($0.split(separator: " ").last ?? "") } ?? 0
            return dropped > 0
        }, "the lines written to the closed pipe are counted")
        #expect(process.isRunning, "the supervisor is alive")

        // SIGTERM: more lines to the closed pipe, and a clean exit (not 132 or 141).
        process.terminate()
        let deadline = Date().addingTimeInterval(60)
        while process.isRunning && Date() < deadline { usleep(50_000) }
        #expect(!process.isRunning)
        #expect(process.terminationReason == .exit && process.terminationStatus == 0,
                "status \(process.terminationStatus) (\(process.terminationReason == .exit ? "exit" : "signal"))")
    }

    @Test func aTokenEndpointDownAtStartIsWaitedForNotFatal() throws {
        let stack = try WorkerStack()
        defer { stack.close() }
        // The token endpoint (and FCM) are gone as the pool starts.
        stack.emulator.stop()
        try stack.enqueue(50, prefix: "blip-")
        let pool = try RunningPool(stack, arguments: ["--processes", "1", "--concurrency", "16", "--poll-interval", "0.2"])
        defer { pool.process.signal(SIGKILL); pool.process.wait(timeout: 10) }
        #expect(waitUntil(timeout: 30) { pool.process.output.components(separatedBy: "no access token yet").count > 2 },
                "the worker tries again: \(pool.process.output)")
        let readiness = try pool.get("/readyz")
        #expect(readiness.status == 503 && readiness.body.contains("no FCM access token"), "\(readiness.body)")
        #expect(pool.process.process.isRunning)
        #expect(pool.workerPIDs().count == 1, "the worker stays up")
        #expect(try stack.count("SELECT count(*) FROM herald.jobs WHERE state = 'available' AND attempts = 0") == 50,
                "nothing was claimed while there was no token")

        // The endpoint comes back: the worker gets its token, becomes ready and delivers.
        let revived = try stack.revivedEmulator()
        defer { revived.stop() }
        #expect(waitUntil(timeout: 60) { (try? stack.count("SELECT count(*) FROM herald.jobs WHERE state = 'completed'")) == 50 },
                "\(pool.process.output)")
        #expect(try pool.get("/readyz").status == 200)
        #expect(try stack.count("SELECT max(attempts) FROM herald.jobs") == 1, "the wait used up no attempt")
        #expect(pool.stop() == 0)
    }

    @Test func aKeyTheEndpointRefusesStopsStartUp() throws {
        let stack = try WorkerStack()
        defer { stack.close() }
        let port = stack.emulator.port
        stack.emulator.stop()
        // Another emulator on the same address that does not know this service account's key.
        let stranger = EmulatorServer(configuration: try workerEmulatorConfiguration { $0.port = port })
        try stranger.start()
        defer { stranger.stop() }
        let run = try stack.work(["--processes", "1"], timeout: 60)
        #expect(run.status == 78, "\(run.output)")
        #expect(run.output.contains("invalid_grant") && run.output.contains("answered 400"), "\(run.output)")
    }

    /// Connection strings that are malformed or cannot be reached, each with a password of its
    /// own (`{pw}` below, percent-encoded in part: its decoded form is looked for too). Each shape is
    /// a slip a user makes or an adversary tries: scheme typos, spaces, newlines, unencoded @ and
    /// /, a capitalised PASSWORD in the query, odd quoting, a URL given as dbname.
    static let shapes: [String] = [
        "postgresql://postgres:{pw}@127.0.0.1:notaport/app",
        "postgresql://postgres:Secret/{pw}@127.0.0.1:1/app",
        "postgres://postgres:{pw}@[::1:bad/app?sslmode=nonsense",
        "postgresql://127.0.0.1:1/app?user=postgres&password={pw}&sslmode=bogus",
        "host=127.0.0.1 port=notaport user=postgres password={pw} dbname=app",
        "host=127.0.0.1 port=1 password = 'Sec {pw}' dbname=app",
        "host=127.0.0.1 password='{pw} dbname=app",
        "postgres//postgres:{pw}@127.0.0.1/app",
        "postgresql:// postgres:{pw}@127.0.0.1:1/app",
        "postgersql://postgres:{pw}@127.0.0.1/app",
        "POSTGRESQL://postgres:{pw}@127.0.0.1/app",
        "postgresql:postgres:{pw}@127.0.0.1/app",
        "postgresql://postgres:{pw}@x@127.0.0.1:1/app",
        "postgresql://127.0.0.1:1/app?user=postgres&PASSWORD={pw}",
        "postgresql://postgres:{pw}@127.0.0.1:1/app\n",
        "host=127.0.0.1\npassword={pw} dbname=app",
        "dbname=postgresql://postgres:{pw}@127.0.0.1:1/app host=127.0.0.1 port=1",
        "host=127.0.0.1 port=1 password=\\'{pw}\\' dbname=app",
        "postgresql://postgres:{pw}%zz@127.0.0.1:1/app",
        "postgres://postgres:{pw}@127.0.0.1:1/app?password={pw}2&sslmode=disable",
    ]

    static var badURLs: [(url: String, secrets: [String])] {
        shapes.enumerated().map { index, shape in
            // "Xy%7Apw" decodes to "Xyzpw": both forms must stay out of every output.
            let password = "Xy%7Apw\(index)q"
            let url = shape.replacingOccurrences(of: "\\n", with: "\n").replacingOccurrences(of: "{pw}", with: password)
            return (url, [password, password.replacingOccurrences(of: "%7A", with: "z"), "pw\(index)q"])
        }
    }

    @Test func noCommandPrintsAPasswordWhateverTheURLsShape() throws {
        let stack = try WorkerStack()
        defer { stack.close() }
        let commands: [[String]] = [
            ["migrate"], ["work", "--processes", "1"], ["stats"], ["dead", "list"], ["queues", "list"],
            ["campaigns", "list"], ["dashboard", "--address", "127.0.0.1:0"], ["groups", "get", "--name", "g"],
            ["bench", "--jobs", "10"],
        ]
        for (url, secrets) in Self.badURLs {
            for command in commands {
                var environment = stack.environment
                environment["DATABASE_URL"] = url
                let run = try HeraldProcess.run(command, environment: environment, timeout: 60)
                let shown = "herald \(command.joined(separator: " ")) with \(PGConnection.redacted(url))"
                #expect(run.status != nil && run.status != 0, "\(shown) refused it: \(run.output)")
                for secret in secrets {
                    #expect(!run.output.contains(secret), "\(shown) printed the password:\n\(run.output)")
                }
                #expect(run.output.contains("DATABASE_URL") || run.output.contains("PostgreSQL"),
                        "\(shown) says what is wrong:\n\(run.output)")
            }
        }
    }

    @Test func everyConnectionProbesASilentPathUnlessTheURLSaysOtherwise() throws {
        let database = try TestDatabase.fresh(migrated: false)
        defer { database.drop() }
        let plain = try database.connect()
        for (keyword, value) in [("keepalives", "1"), ("keepalives_idle", "10"), ("keepalives_interval", "5"),
                                 ("keepalives_count", "3"), ("tcp_user_timeout", "25000"), ("connect_timeout", "10")] {
            #expect(plain.connectionOption(keyword) == value, "\(keyword)")
        }
        // The server's side, for the session.
        #expect(try plain.query("SHOW tcp_keepalives_idle")[0, 0] == "10")
        #expect(try plain.query("SHOW tcp_keepalives_count")[0, 0] == "3")
        let userTimeout = try plain.query("SHOW tcp_user_timeout")[0, 0]
        #expect(userTimeout == "25000", "tcp_user_timeout is \(userTimeout ?? "NULL")")
        #expect(try plain.query("SHOW statement_timeout")[0, 0] == "0", "only the store thread's connection has a statement timeout")

        // What DATABASE_URL sets wins, on both sides.
        let separator = database.url.contains("?") ? "&" : "?"
        let own = try PGConnection(url: database.url + separator + "keepalives_idle=60&tcp_user_timeout=0&options=-c%20tcp_keepalives_idle%3D61")
        #expect(own.connectionOption("keepalives_idle") == "60")
        #expect(own.connectionOption("tcp_user_timeout") == "0")
        #expect(own.connectionOption("keepalives_interval") == "5", "what it does not set keeps Herald's")
        #expect(try own.query("SHOW tcp_keepalives_idle")[0, 0] == "61")
        #expect(try own.query("SHOW tcp_keepalives_interval")[0, 0] == "5")

        // A statement limit sets both timeouts on the server, again after a reconnection.
        try own.limitStatements(to: 7)
        try own.reconnect()
        #expect(try own.query("SHOW statement_timeout")[0, 0] == "7s")
        #expect(try own.query("SHOW idle_in_transaction_session_timeout")[0, 0] == "7s")
    }

    @Test func libpqsOwnTextIsMaskedToo() {
        // libpq quotes the whole URI it cannot read, password and all: Herald parses first and, for
        // a string libpq cannot parse, shows none of libpq's text, only what is wrong with it.
        for url in ["postgres://postgres:Secretpw9@[::1:bad/app", "postgres://postgres:Secret%2Fpw10@[::1:bad/app"] {
            do {
                _ = try PGConnection(url: url)
                Issue.record("connected to \(url)")
            } catch {
                #expect(!"\(error)".contains("Secretpw9") && !"\(error)".contains("Secret%2Fpw10") && !"\(error)".contains("Secret/pw10"), "\(error)")
                #expect("\(error)".contains("DATABASE_URL") && "\(error)".contains("not a well-formed PostgreSQL connection string"),
                        "the refusal names the setting: \(error)")
            }
        }
    }
}
