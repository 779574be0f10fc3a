import Emulator
import Foundation
import JSON
import Postgres
import Testing
import TestSupport

/// A pool's /metrics as Prometheus reads it: parsed from the text format.
struct MetricsPage {
    let text: String
    /// Every sample line: the series (name and labels as written) to its value.
    let samples: [String: Double]

    init(_ text: String) {
        self.text = text
        var samples: [String: Double] = [:]
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            guard let space = line.lastIndex(of: " "), let value = Double(line[line.index(after: space)...]) else { continue }
            samples[String(line[..<space])] = value
        }
        self.samples = samples
    }

    /// The sum over every series of `name` whose labels include all of `labels`.
    func sum(_ name: String, _ labels: [String: String] = [:]) -> Int {
        var total = 0.0
        for (series, value) in samples {
            guard series == name || series.hasPrefix(name + "{") else { continue }
            if labels.allSatisfy({ series.contains("\($0.key)=\"\($0.value)\"") }) { total += value }
        }
        return Int(total)
    }
}

/// A running `herald work` pool and its admin endpoint.
final class RunningPool {
    let process: HeraldProcess
    let adminURL: String

    init(_ stack: WorkerStack, arguments: [String], environment: [String: String] = [:]) throws {
        var env = stack.environment
        for (key, value) in environment { env[key] = value }
        let process = try HeraldProcess(["work"] + arguments, environment: env)
        self.process = process
        try process.start()
        var found: String? = nil
        waitUntil(timeout: 60) {
            found = process.output.firstMatch(of: /serving \/metrics, \/healthz and \/readyz at (http:\/\/[0-9.]+:[0-9]+)/).map { String($0.1) }
            return found != nil || !process.process.isRunning
        }
        guard let found else { throw TestFailure("the pool announced no admin endpoint:\n\(process.output)") }
        adminURL = found
    }

    func get(_ path: String) throws -> CurlResult { try curl(adminURL + path, over: .http1) }
    func metrics() throws -> MetricsPage { MetricsPage(try get("/metrics").body) }

    /// The pids of the worker processes (children of the supervisor).
    func workerPIDs() -> [Int32] {
        let pid = process.pid
        let text = (try? String(contentsOfFile: "/proc/\(pid)/task/\(pid)/children", encoding: .utf8)) ?? ""
        return text.split(separator: " ").compactMap { Int32($0) }
    }

    func stop() -> Int32? {
        process.signal(SIGTERM)
        return process.wait(timeout: 60)
    }
}

/// Runs promtool (Debian's `prometheus` package, installed by .ci/install-deps) with `input` on stdin.
func promtool(_ arguments: [String], input: String? = nil, directory: String? = nil) throws -> (status: Int32, output: String) {
    let path = ["/usr/bin/promtool", "/usr/local/bin/promtool"].first { FileManager.default.isExecutableFile(atPath: $0) }
    guard let path else { throw TestFailure("promtool is not installed; run .ci/install-deps (Debian package prometheus)") }
    let process = Process()
    process.executableURL = URL(fileURLWithPath: path)
    process.arguments = arguments
    if let directory { process.currentDirectoryURL = URL(fileURLWithPath: directory) }
    let output = Pipe()
    let stdin = Pipe()
    process.standardOutput = output
    process.standardError = output
    process.standardInput = stdin
    try process.run()
    if let input { stdin.fileHandleForWriting.write(Data(input.utf8)) }
    try stdin.fileHandleForWriting.close()
    let data = output.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return (process.terminationStatus, String(decoding: data, as: UTF8.self))
}

@Suite(.serialized) struct PoolMetricsTests {
    /// The mixed batch: what each kind of job becomes, and what FCM sees of it.
    static func enqueueMixedBatch(_ stack: WorkerStack, tag: String) throws {
        let c = stack.connection
        try c.query("""
            INSERT INTO herald.jobs (message, queue)
            SELECT jsonb_build_object('token', $1::text || '-ok-' || g, 'notification', jsonb_build_object('title', 'Hi')),
                   CASE WHEN g <= 30 THEN 'mail' ELSE 'default' END
            FROM generate_series(1, 200) AS g
            """, [.text(tag)])
        func add(_ token: String, count: Int) throws {
            try c.query("""
                INSERT INTO herald.jobs (message)
                SELECT jsonb_build_object('token', $1::text || '-' || g, 'data', jsonb_build_object('k', 'v')) FROM generate_series(1, $2::int) AS g
                """, [.text(token), .int(count)])
        }
        try add("fail-unregistered-\(tag)", count: 5)      // pruned
        try add("fail-invalid-\(tag)", count: 4)           // dead at once
        try add("fail-unavailable-1-\(tag)", count: 6)     // one 503 (Retry-After 1 s), then delivered
        try add("fail-internal-2-\(tag)", count: 3)        // two 500s, then delivered
        // Dead without a request (the validator refuses it), and discarded without one (token pruned before).
        try c.query(#"INSERT INTO herald.jobs (message) SELECT jsonb_build_object('token', 'never-' || g, 'android', jsonb_build_object('ttl', 'abc')) FROM generate_series(1, 2) g"#)
        try c.query("INSERT INTO herald.pruned_tokens (token, reason) VALUES ($1, 'UNREGISTERED: earlier')", [.text("old-\(tag)")])
        try c.query(#"INSERT INTO herald.jobs (message) VALUES (jsonb_build_object('token', $1::text))"#, [.text("old-\(tag)")])
    }

    /// Every job of the batch has its final outcome.
    static func settled(_ stack: WorkerStack) -> Bool {
        (try? stack.count("SELECT count(*) FROM herald.jobs WHERE state NOT IN ('completed', 'discarded')")) == 0
    }

    /// The pool's counters against the emulator's and the database's.
    static func expectAgreement(_ page: MetricsPage, _ stack: WorkerStack, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let stats = stack.emulator.statistics
        let delivered = stack.emulator.deliveredMessages()
        #expect(page.sum("herald_fcm_requests_total") == stats["requests"]?.intValue, "every request FCM received", sourceLocation: sourceLocation)
        #expect(page.sum("herald_fcm_requests_total", ["code": "OK"]) == delivered.count, sourceLocation: sourceLocation)
        let byError = stats["by_error"]?.objectValue ?? JSONObject()
        for code in byError.keys {
            let count: Int? = byError[code]?.intValue
            #expect(page.sum("herald_fcm_requests_total", ["code": code]) == count, "\(code)", sourceLocation: sourceLocation)
        }
        #expect(page.sum("herald_fcm_request_duration_seconds_count") == stats["requests"]?.intValue, sourceLocation: sourceLocation)
        #expect(page.sum("herald_messages_total", ["outcome": "completed"]) == delivered.count, "each delivered once", sourceLocation: sourceLocation)
        #expect(page.sum("herald_messages_total", ["outcome": "completed"]) == (try stack.count("SELECT count(*) FROM herald.jobs WHERE state = 'completed'")), sourceLocation: sourceLocation)
        #expect(page.sum("herald_delivery_latency_seconds_count") == delivered.count, sourceLocation: sourceLocation)
        #expect(page.sum("herald_messages_total", ["outcome": "pruned"]) == (try stack.count("SELECT count(*) FROM herald.pruned_tokens WHERE job_id IS NOT NULL")), sourceLocation: sourceLocation)
        #expect(page.sum("herald_messages_total", ["outcome": "dead"]) == (try stack.count("SELECT count(*) FROM herald.dead_letters")), sourceLocation: sourceLocation)
        #expect(page.sum("herald_messages_total", ["outcome": "retried"]) == (stats["by_error"]?["UNAVAILABLE"]?.intValue ?? 0) + (stats["by_error"]?["INTERNAL"]?.intValue ?? 0), sourceLocation: sourceLocation)
        #expect(page.sum("herald_in_flight") == 0, sourceLocation: sourceLocation)
    }

    @Test func aPoolsMetricsAgreeExactlyWithWhatFCMReceivedAndOutliveAWorker() throws {
        let stack = try WorkerStack()
        defer { stack.close() }
        try Self.enqueueMixedBatch(stack, tag: "a")
        let pool = try RunningPool(stack, arguments: ["--processes", "2", "--poll-interval", "0.2"])
        #expect(waitUntil(timeout: 120) { Self.settled(stack) }, "\(pool.process.output)")
        // Counted right after each commit: wait for the last batch's counts, then compare everything.
        #expect(waitUntil(timeout: 10) { (try? pool.metrics().sum("herald_messages_total", ["outcome": "completed"])) == stack.emulator.deliveredMessages().count })
        var page = try pool.metrics()
        try Self.expectAgreement(page, stack)
        // The batch, spelled out: 200 + 6 + 3 delivered; 5 pruned; 4 + 2 dead; 1 discarded; 6 + 3 x 2 retries.
        #expect(page.sum("herald_messages_total", ["outcome": "completed"]) == 209)
        #expect(page.sum("herald_messages_total", ["queue": "mail", "outcome": "completed"]) == 30)
        #expect(page.sum("herald_messages_total", ["outcome": "pruned"]) == 5)
        #expect(page.sum("herald_messages_total", ["outcome": "dead"]) == 6)
        #expect(page.sum("herald_messages_total", ["outcome": "discarded"]) == 1)
        #expect(page.sum("herald_messages_total", ["outcome": "retried"]) == 12)
        #expect(page.sum("herald_fcm_requests_total", ["code": "UNREGISTERED"]) == 5)
        #expect(page.sum("herald_fcm_requests_total", ["code": "INVALID_ARGUMENT"]) == 4)
        #expect(page.sum("herald_worker_processes") == 2)
        #expect(page.sum("herald_access_token_refreshes_total") >= 2, "each worker fetched a token")
        #expect(page.sum("herald_build_info") == 1 && page.sum("process_resident_memory_bytes") > 10_000_000)
        #expect(page.samples["process_cpu_seconds_total"].map { $0 > 0 } == true)
        let lint = try promtool(["check", "metrics"], input: page.text)
        #expect(lint.status == 0, "promtool check metrics: \(lint.output)")
        #expect(try pool.get("/healthz").status == 200)
        #expect(try pool.get("/readyz").status == 200)
        #expect(try pool.get("/nothing-here").status == 404)
        #expect(try curl(pool.adminURL + "/metrics", method: "POST", body: "", over: .http1).status == 405)

        // A worker killed with SIGKILL: the pool says so, restarts it, and keeps its counts.
        let workers = pool.workerPIDs()
        try #require(workers.count == 2, "worker pids from /proc: \(workers)")
        let cpuBefore = page.samples["process_cpu_seconds_total"] ?? 0
        kill(workers[0], SIGKILL)
        var unhealthy = ""
        #expect(waitUntil(timeout: 10, interval: 0.01) {
            guard let answer = try? pool.get("/healthz"), answer.status == 503 else { return false }
            unhealthy = answer.body
            return true
        }, "/healthz went 503 while a worker was down")
        #expect(unhealthy.contains("pid \(workers[0]) was killed by signal 9"), "\(unhealthy)")
        #expect(waitUntil(timeout: 30) { (try? pool.get("/readyz").status) == 200 }, "ready again once the new worker holds a connection and a token")
        try Self.enqueueMixedBatch(stack, tag: "b")
        #expect(waitUntil(timeout: 120) { Self.settled(stack) })
        #expect(waitUntil(timeout: 10) { (try? pool.metrics().sum("herald_messages_total", ["outcome": "completed"])) == stack.emulator.deliveredMessages().count })
        page = try pool.metrics()
        try Self.expectAgreement(page, stack)
        #expect(page.sum("herald_messages_total", ["outcome": "completed"]) == 418, "the first batch's counts were kept across the restart")
        #expect((page.samples["process_cpu_seconds_total"] ?? 0) >= cpuBefore, "the killed worker's CPU time is still counted")
        #expect(pool.stop() == 0, "\(pool.process.output)")
    }

    @Test func readyOnceWorkersHoldAConnectionAndATokenAndNotWhileStopping() throws {
        // (What /readyz says for each missing piece is covered by MetricsTests without processes.)
        let stack = try WorkerStack()
        defer { stack.close() }
        let pool = try RunningPool(stack, arguments: ["--processes", "1", "--poll-interval", "0.2"])
        #expect(waitUntil(timeout: 30) { (try? pool.get("/readyz").status) == 200 })
        let ready = try pool.get("/readyz").body
        #expect(ready.contains("ready: 1 worker processes hold a PostgreSQL connection and an access token"))
        pool.process.signal(SIGTERM)
        // While stopping, the endpoint says so (or is already gone).
        if let answer = try? pool.get("/readyz") { #expect(answer.status == 503 && answer.body.contains("stopping")) }
        #expect(pool.process.wait(timeout: 60) == 0)
    }

    @Test func readinessFollowsTheWorkersPostgreSQLConnection() throws {
        let stack = try WorkerStack()
        defer { stack.close() }
        let pool = try RunningPool(stack, arguments: ["--processes", "1", "--poll-interval", "0.2"])
        #expect(waitUntil(timeout: 30) { (try? pool.get("/readyz").status) == 200 })
        // The worker loses its connection and cannot get another while the database refuses them.
        let admin = try PGConnection(url: stack.database.adminURL)
        let database = PGConnection.quoteIdentifier(stack.database.name)
        try admin.execute("ALTER DATABASE \(database) ALLOW_CONNECTIONS false")
        defer { try? admin.execute("ALTER DATABASE \(database) ALLOW_CONNECTIONS true") }
        try admin.query("""
            SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'herald work' AND datname = $1
            """, [.text(stack.database.name)])
        var answer: CurlResult? = nil
        #expect(waitUntil(timeout: 30) {
            answer = try? pool.get("/readyz")
            return answer?.status == 503
        }, "\(pool.process.output)")
        #expect(answer?.body.contains("no PostgreSQL connection") == true, "\(answer?.body ?? "")")
        #expect(try pool.get("/healthz").status == 200, "the process still runs: healthy, not ready")
        try admin.execute("ALTER DATABASE \(database) ALLOW_CONNECTIONS true")
        #expect(waitUntil(timeout: 30) { (try? pool.get("/readyz").status) == 200 }, "ready again once it reconnected")
        #expect(pool.stop() == 0, "\(pool.process.output)")
    }

    @Test func aQuotaAnswerShowsAsAPausedPool() throws {
        let stack = try WorkerStack()
        defer { stack.close() }
        try stack.connection.query(#"SELECT herald.enqueue('{"token": "fail-quota-5-m", "data": {"k": "v"}}')"#)
        let pool = try RunningPool(stack, arguments: ["--processes", "1", "--poll-interval", "0.2"])
        #expect(waitUntil(timeout: 30) { (try? pool.metrics().sum("herald_fcm_requests_total", ["code": "QUOTA_EXCEEDED"])) == 1 },
                "\(pool.process.output)")
        // The project's QUOTA_EXCEEDED (Retry-After: 5) holds the sender back: the gauge says so
        // meanwhile. The job is snoozed (no attempt used up) and the answer counted as the project's.
        #expect(waitUntil(timeout: 30) { (try? pool.metrics().sum("herald_messages_total", ["outcome": "snoozed"])) == 1 })
        let page = try pool.metrics()
        #expect(page.sum("herald_quota_paused") == 1)
        #expect(page.sum("herald_messages_total", ["outcome": "retried"]) == 0)
        #expect(page.sum("herald_fcm_quota_exceeded_total", ["limit": "project"]) == 1)
        #expect(page.sum("herald_fcm_quota_exceeded_total", ["limit": "device"]) == 0)
        #expect(page.sum("herald_jobs_snoozed_total") == 1)
        let rate = page.sum("herald_project_rate_per_second")
        #expect(rate > 0 && rate < 10_000, "the rate in force was lowered below the default ceiling of 10,000: \(rate)")
        #expect(pool.stop() == 0, "\(pool.process.output)")
    }

    @Test func adminAddressSettingsAreCheckedAtStartUp() throws {
        let stack = try WorkerStack()
        defer { stack.close() }
        // A port already taken: start-up stops naming the setting, before any worker starts.
        let holder = try RunningPool(stack, arguments: ["--processes", "1"])
        // Stopped only once its worker runs: a SIGTERM during a worker's start-up ends that worker by the signal.
        #expect(waitUntil(timeout: 30) { (try? holder.get("/readyz").status) == 200 })
        let taken = String(holder.adminURL.dropFirst("http://".count))
        let busy = try HeraldProcess.run(["work", "--drain"], environment: stack.environment.merging(["HERALD_ADMIN_ADDRESS": taken]) { $1 }, timeout: 60)
        #expect(busy.status == 2, "\(busy.output)")
        #expect(busy.output.contains("HERALD_ADMIN_ADDRESS \(taken): cannot listen"), "\(busy.output)")
        #expect(holder.stop() == 0)
        let bad = try stack.work(["--drain", "--admin-address", "metrics.example"])
        #expect(bad.status == 2 && bad.output.contains("--admin-address \"metrics.example\" is not HOST:PORT"), "\(bad.output)")
        // off: no endpoint, and the pool works as before.
        try stack.enqueue(3, prefix: "off-")
        let off = try stack.work(["--drain", "--admin-address", "off", "--processes", "1", "--poll-interval", "0.2"])
        #expect(off.status == 0 && !off.output.contains("serving /metrics"), "\(off.output)")
        #expect(stack.emulator.deliveredMessages().count == 3)
    }

    @Test func jsonLogsAreOneObjectPerLineWithTheJobsFields() throws {
        let stack = try WorkerStack()
        defer { stack.close() }
        try stack.enqueue(5, prefix: "json-")
        let dead = try stack.connection.query(#"SELECT herald.enqueue('{"token": "fail-invalid-json", "data": {"k": "v"}}', queue => 'mail')"#).int(0, 0)!
        let run = try stack.work(["--drain", "--processes", "1", "--poll-interval", "0.2", "--log-format", "json"])
        #expect(run.status == 0, "\(run.output)")
        let lines = run.output.split(separator: "\n")
        #expect(lines.count >= 3)
        var deadLine: JSONValue? = nil
        for line in lines {
            let object = try? JSONValue.parse(Array(line.utf8))
            #expect(object?["time"]?.stringValue != nil && object?["level"]?.stringValue != nil && object?["msg"]?.stringValue != nil
                    && object?["pid"]?.intValue != nil, "not a JSON log line: \(line)")
            if object?["job_id"]?.intValue == dead { deadLine = object }
        }
        let line = try #require(deadLine, "a line about the dead-lettered job: \(run.output)")
        #expect(line["queue"]?.stringValue == "mail" && line["code"]?.stringValue == "INVALID_ARGUMENT" && line["level"]?.stringValue == "info")
        #expect(line["msg"]?.stringValue?.hasPrefix("dead-lettered: INVALID_ARGUMENT") == true)
        #expect(!run.output.contains("Bearer ") && !run.output.contains("PRIVATE KEY"), "no secret in the logs")
        let wrong = try stack.work(["--drain", "--log-format", "yaml"])
        #expect(wrong.status == 2 && wrong.output.contains("--log-format \"yaml\" is not a log format; give text or json"), "\(wrong.output)")

        // What stops a command is a record too: a database that cannot be reached (status 3) and
        // a bad flag (status 2), each one JSON line naming the problem.
        let unreachable = try HeraldProcess.run(["migrate", "--log-format", "json"],
                                                environment: ["DATABASE_URL": "postgresql://herald@127.0.0.1:1/postgres"], timeout: 60)
        let badFlag = try HeraldProcess.run(["work", "--log-format=json", "--processes", "abc"], environment: stack.environment, timeout: 60)
        for (run, status, text) in [(unreachable, Int32(3), "cannot connect to PostgreSQL"), (badFlag, Int32(2), "--processes \"abc\"")] {
            let records = run.output.split(separator: "\n").map { try? JSONValue.parse(Array($0.utf8)) }
            #expect(run.status == status && records.count == 1 && records[0]?["level"]?.stringValue == "error"
                    && records[0]?["msg"]?.stringValue?.contains(text) == true, "\(run.output)")
        }
    }
}
