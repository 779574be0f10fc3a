import Emulator
import Foundation
import JSON
import Postgres
import Testing
import TestSupport
@testable import Worker

/// One worker process carrying many registry projects: every job goes out with its own
/// project's key to its own project's URL over the process's shared connections, and a broken
/// key holds back its project alone.
@Suite(.serialized) struct SharedWorkerTests {
    /// A stack with `count` projects p1...pN registered, their keys (herald-project-1...N) in a
    /// folder of their own.
    struct ManyProjects {
        let stack: WorkerStack
        let folder: String
        let count: Int

        init(count: Int, latencyMilliseconds: Int? = nil) throws {
            stack = try WorkerStack(latencyMilliseconds: latencyMilliseconds)
            folder = NSTemporaryDirectory() + "herald-shared-\(UUID().uuidString)"
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: false)
            self.count = count
            let projects = try stack.emulator.writeServiceAccounts(count: count, folder: folder)
            try stack.connection.query("""
                INSERT INTO herald.projects (name, fcm_project_id, credentials)
                SELECT 'p' || i, f, $1::text || '/' || f || '.json' FROM unnest($2::text[]) WITH ORDINALITY AS t(f, i)
                """, [.text(folder), .textArray(projects)])
        }

        func keyPath(_ index: Int) -> String { folder + "/herald-project-\(index).json" }

        /// `n` jobs for project p`index` (nil: no project) to tokens `PREFIX-1...n`, PREFIX
        /// being the project's name (or `none`).
        func enqueue(_ n: Int, project index: Int?) throws {
            let name = index.map { "p\($0)" }
            try stack.connection.query("""
                INSERT INTO herald.jobs (message, project)
                SELECT jsonb_build_object('token', coalesce($1, 'none') || '-' || g, 'data', jsonb_build_object('k', 'v')), $1
                FROM generate_series(1, $2::int) AS g
                """, [name.map { .text($0) }, .int(n)])
        }

        func delivered(_ index: Int) -> Int {
            stack.emulator.deliveredMessages().filter { $0.projectID == "herald-project-\(index)" }.count
        }

        /// Messages that reached an FCM project other than the one their token's prefix names.
        func misplaced() -> [String] {
            stack.emulator.deliveredMessages().compactMap { message in
                guard let token = message.token, let dash = token.firstIndex(of: "-") else { return nil }
                let owner = String(token[..<dash])
                let expected = owner == "none" ? "e2e-project" : "herald-project-" + owner.dropFirst()
                return message.projectID == expected ? nil : "\(token) in \(message.projectID)"
            }
        }

        var forbidden: Int { stack.emulator.statistics["by_status"]?["403"]?.intValue ?? 0 }

        func pausedReason(_ index: Int) throws -> String {
            try stack.connection.query("SELECT coalesce(paused_reason, '') FROM herald.projects WHERE name = $1", [.text("p\(index)")])[0, 0] ?? ""
        }

        func close() {
            stack.close()
            try? FileManager.default.removeItem(atPath: folder)
        }
    }

    /// The worker processes a pool's log names (`herald work[PID]`).
    static func workerPIDs(_ output: String) -> Set<String> {
        var pids: Set<String> = []
        var rest = Substring(output)
        while let start = rest.range(of: "herald work[") {
            rest = rest[start.upperBound...]
            guard let end = rest.firstIndex(of: "]") else { break }
            pids.insert(String(rest[..<end]))
        }
        return pids
    }

    @Test func oneWorkerProcessSendsEveryProjectsJobsEachWithItsOwnToken() throws {
        let m = try ManyProjects(count: 40)
        defer { m.close() }
        for index in 1...m.count { try m.enqueue(10, project: index) }
        try m.enqueue(10, project: nil)
        let run = try m.stack.work(["--drain", "--processes", "1", "--poll-interval", "0.2"])
        #expect(run.status == 0, "\(run.output)")
        // 40 projects and the jobs of no project: one worker process, not 41.
        #expect(Self.workerPIDs(run.output).count == 1, "\(Self.workerPIDs(run.output)) \(run.output)")
        #expect(run.output.contains("each carrying every registry entry"), "\(run.output)")
        for index in 1...m.count { #expect(m.delivered(index) == 10, "p\(index)") }
        #expect(m.stack.emulator.deliveredMessages().filter { $0.projectID == "e2e-project" }.count == 10)
        // FCM answers 403 to a token of another project: none was sent with one.
        #expect(m.forbidden == 0)
        #expect(m.misplaced().isEmpty, "\(m.misplaced().prefix(3))")
        #expect(try m.stack.count("SELECT count(*) FROM herald.jobs WHERE state <> 'completed'") == 0)

        // Two processes in all, whatever the number of projects.
        for index in 1...m.count { try m.enqueue(5, project: index) }
        let two = try m.stack.work(["--drain", "--processes", "2", "--poll-interval", "0.2"])
        #expect(two.status == 0, "\(two.output)")
        #expect(Self.workerPIDs(two.output).count == 2, "\(Self.workerPIDs(two.output))")
        for index in 1...m.count { #expect(m.delivered(index) == 15, "p\(index)") }
        #expect(m.forbidden == 0 && m.misplaced().isEmpty)
    }

    /// Each project is taken up first by the worker that owns it; one project's backlog is still
    /// worked by every worker of the pool (the others' own projects leave them room).
    @Test func aBacklogOfOneProjectIsWorkedByEveryWorkerOfThePool() throws {
        let m = try ManyProjects(count: 2)
        defer { m.close() }
        try m.enqueue(3000, project: 1)
        let run = try m.stack.work(["--drain", "--processes", "2", "--poll-interval", "0.2"])
        #expect(run.status == 0, "\(run.output)")
        #expect(m.delivered(1) == 3000)
        // Who claimed each job stays on its row: both workers did.
        let workers = try m.stack.count("SELECT count(DISTINCT locked_by) FROM herald.jobs WHERE project = 'p1' AND state = 'completed'")
        #expect(workers == 2, "\(workers) workers claimed p1's backlog")
    }

    /// A one-time code of a project whose owning worker is stopped (SIGSTOP: hung, or still
    /// starting) is taken up by the other worker a moment after its NOTIFY, although that
    /// worker's own backlogs fill every claim it makes: a code is anyone's.
    @Test func aCodeOfAStoppedWorkersProjectIsSentByTheOtherWhileItsOwnBacklogsFillItsClaims() throws {
        let m = try ManyProjects(count: 40, latencyMilliseconds: 200)
        defer { m.close() }
        let names = (1...m.count).map { "p\($0)" }
        let first = names.filter { StoreProjects.owner(of: $0, among: 2) == 0 }
        let second = names.filter { StoreProjects.owner(of: $0, among: 2) == 1 }
        try #require(first.count >= 12 && second.count >= 3, "\(first.count) and \(second.count) projects per worker")
        // The first worker's own backlogs: 300 jobs for each of its projects, at 64 in flight
        // against an FCM answering in 200 ms (about 320 a second per worker): far more than the
        // test lasts, and more projects due than a claim of 64 leaves room for.
        for name in first { try m.enqueue(300, project: Int(name.dropFirst())!) }
        let pool = try HeraldProcess(["work", "--processes", "2", "--concurrency", "64", "--poll-interval", "0.2"],
                                     environment: m.stack.environment)
        try pool.start()
        var workers: [Int32: Int] = [:]
        defer {
            for pid in workers.keys { kill(pid, SIGCONT) }
            pool.signal(SIGKILL)
            pool.wait(timeout: 10)
        }
        #expect(waitUntil(timeout: 60) { m.stack.emulator.deliveredMessages().count >= 200 }, "\(pool.output)")
        // Which worker is which place of the pool (the supervisor tells each its index).
        for pid in EmulatorChoiceTests.children(of: pool.pid) {
            guard let environ = FileManager.default.contents(atPath: "/proc/\(pid)/environ") else { continue }
            for entry in environ.split(separator: 0) {
                let text = String(decoding: entry, as: UTF8.self)
                if text.hasPrefix("HERALD_WORKER_INDEX="), let index = Int(text.dropFirst("HERALD_WORKER_INDEX=".count)) { workers[pid] = index }
            }
        }
        let owner = try #require(workers.first { $0.value == 1 }?.key, "no worker of index 1 among \(workers)")
        kill(owner, SIGSTOP)
        // Codes to three of the stopped worker's projects, one at a time.
        for name in second.prefix(3) {
            let token = "\(name)-code"
            let enqueued = Date()
            try m.stack.connection.query("""
                INSERT INTO herald.jobs (message, project, queue, priority)
                VALUES (jsonb_build_object('token', $1::text, 'data', jsonb_build_object('k', 'code')), $2, 'transactional', -1)
                """, [.text(token), .text(name)])
            let arrived = waitUntil(timeout: 30) { m.stack.emulator.deliveredMessages().contains { $0.token == token } }
            let seconds = Date().timeIntervalSince(enqueued)
            let available = try m.stack.count("SELECT count(*) FROM herald.jobs WHERE state = 'available'")
            #expect(arrived && seconds < 5, "\(name)'s code took \(String(format: "%.1f", seconds)) s (\(available) jobs of the other worker's backlogs available)")
            print("a code of \(name), whose worker is stopped, reached FCM \(String(format: "%.2f", seconds)) s after its insert")
        }
        // The backlogs were still there: the other worker had no room of its own to spare.
        #expect(try m.stack.count("SELECT count(*) FROM herald.jobs WHERE state = 'available'") > 1000)
        #expect(m.misplaced().isEmpty, "\(m.misplaced().prefix(3))")
    }

    /// A quota pause of one project (a 429 with Retry-After: 2 to p1) spreads p1's held retries
    /// over the window after it; p2's and those of no project keep their due times. The held
    /// retries wait in a queue the pool does not work, so none is claimed while it runs.
    @Test func aProjectsPauseSpreadsItsOwnHeldRetriesAndNoOneElses() throws {
        let m = try ManyProjects(count: 2)
        defer { m.close() }
        let c = m.stack.connection
        // Per project (and none): 5 retries due a minute ago, tried once.
        try c.query("""
            INSERT INTO herald.jobs (queue, message, project, state, run_at, attempts)
            SELECT 'held', jsonb_build_object('token', coalesce(p, 'none') || '-held-' || g, 'data', jsonb_build_object('k', 'v')), p,
                   'scheduled', now() - interval '1 minute', 1
            FROM unnest(ARRAY['p1', 'p2', NULL]) AS p, generate_series(1, 5) AS g
            """)
        func dueTimes() throws -> [String: Double] {
            let rows = try c.query("SELECT message->>'token', extract(epoch FROM run_at)::float8 FROM herald.jobs WHERE queue = 'held'")
            return Dictionary(uniqueKeysWithValues: (0..<rows.rowCount).map { (rows[$0, 0]!, rows.double($0, 1)!) })
        }
        let before = try dueTimes()
        // p1's quota answer, and calm jobs of p2 sent beside it.
        try c.query("""
            INSERT INTO herald.jobs (message, project)
            SELECT jsonb_build_object('token', 'fail-quota-2-p1', 'data', jsonb_build_object('k', 'v')), 'p1'
            UNION ALL
            SELECT jsonb_build_object('token', 'p2-' || g, 'data', jsonb_build_object('k', 'v')), 'p2' FROM generate_series(1, 10) g
            """)
        let started = try c.query("SELECT extract(epoch FROM now())::float8").double(0, 0)!
        let run = try m.stack.work(["--drain", "--processes", "1", "--poll-interval", "0.2", "--queue", "default"], timeout: 120)
        #expect(run.status == 0, "\(run.output)")
        #expect(m.delivered(1) == 1 && m.delivered(2) == 10, "\(run.output)")
        #expect(run.output.contains("project p1: 5 held retries spread"), "\(run.output)")
        let after = try dueTimes()
        for n in 1...5 {
            // Moved past the pause (at least 2 s after the run started), within its window.
            let due = after["p1-held-\(n)"]!
            #expect(due >= started + 2 && due <= started + 60, "p1-held-\(n) due \(due - started) s after the run started")
            #expect(after["p2-held-\(n)"] == before["p2-held-\(n)"], "p2's retry \(n) moved")
            #expect(after["none-held-\(n)"] == before["none-held-\(n)"], "the retry \(n) of no project moved")
        }
        // None of them was claimed (the pool promotes those due, which keeps their times).
        #expect(try m.stack.count("SELECT count(*) FROM herald.jobs WHERE queue = 'held' AND (state NOT IN ('scheduled', 'available') OR attempts <> 1)") == 0)
        #expect(!m.stack.emulator.deliveredMessages().contains { $0.token?.contains("-held-") == true })
    }

    /// A pool of workers carrying every project: each project's answers show under its own
    /// `project` label, the jobs of no project's without one, and the sums are what FCM received.
    @Test func eachCarriedProjectsAnswersShowUnderItsOwnLabelAndSumToThePoolsTotal() throws {
        let m = try ManyProjects(count: 3)
        defer { m.close() }
        try m.enqueue(30, project: 1)
        try m.enqueue(20, project: 2)
        try m.enqueue(10, project: 3)
        try m.enqueue(15, project: nil)
        // Faults: p2's 3 refused for good (400 INVALID_ARGUMENT), p3's 2 answered 503 once, then
        // delivered, p1's 1 answered 429 once, then delivered.
        func faults(_ token: String, _ n: Int, project: String) throws {
            try m.stack.connection.query("""
                INSERT INTO herald.jobs (message, project)
                SELECT jsonb_build_object('token', $1::text || '-' || g), $2 FROM generate_series(1, $3::int) AS g
                """, [.text(token), .text(project), .int(n)])
        }
        try faults("fail-invalid-p2", 3, project: "p2")
        try faults("fail-unavailable-1-p3", 2, project: "p3")
        try faults("fail-quota-1-p1", 1, project: "p1")
        let pool = try RunningPool(m.stack, arguments: ["--processes", "2", "--poll-interval", "0.2", "--admin-address", "127.0.0.1:0"])
        defer { _ = pool.stop() }
        #expect(waitUntil(timeout: 120) {
            (try? m.stack.count("SELECT count(*) FROM herald.jobs WHERE state NOT IN ('completed', 'discarded')")) == 0
        }, "\(pool.process.output)")
        #expect(pool.process.output.contains("each carrying every registry entry"), "\(pool.process.output)")
        let received = { m.stack.emulator.statistics["requests"]?.intValue ?? -1 }
        // Counted right after each answer: wait until the page has every request FCM received.
        #expect(waitUntil(timeout: 10) { (try? pool.metrics().sum("herald_fcm_requests_total")) == received() })
        let page = try pool.metrics()
        func of(_ project: String?, _ name: String, _ labels: [String: String] = [:]) -> Int {
            ProjectJobsTests.sum(page, project: project, name, labels)
        }
        #expect(m.delivered(1) == 31 && m.delivered(2) == 20 && m.delivered(3) == 12)
        let ofNoProject = m.stack.emulator.deliveredMessages().filter { $0.projectID == "e2e-project" }.count
        #expect(ofNoProject == 15)
        // What FCM received for each project: its deliveries and its refusals.
        #expect(of("p1", "herald_fcm_requests_total") == 32 && of("p1", "herald_fcm_requests_total", ["code": "OK"]) == m.delivered(1))
        #expect(of("p1", "herald_fcm_requests_total", ["code": "QUOTA_EXCEEDED"]) == 1)
        #expect(of("p1", "herald_fcm_quota_exceeded_total") == 1 && of(nil, "herald_fcm_quota_exceeded_total") == 0, "p1's quota answer is p1's")
        #expect(of("p2", "herald_fcm_requests_total") == 23 && of("p2", "herald_fcm_requests_total", ["code": "OK"]) == m.delivered(2))
        #expect(of("p2", "herald_fcm_requests_total", ["code": "INVALID_ARGUMENT"]) == 3)
        #expect(of("p3", "herald_fcm_requests_total") == 14 && of("p3", "herald_fcm_requests_total", ["code": "OK"]) == m.delivered(3))
        #expect(of("p3", "herald_fcm_requests_total", ["code": "UNAVAILABLE"]) == 2)
        #expect(of(nil, "herald_fcm_requests_total") == ofNoProject && of(nil, "herald_fcm_requests_total", ["code": "OK"]) == ofNoProject,
                "the jobs of no project stay unlabelled")
        #expect(!page.text.contains("code=\"INVALID_ARGUMENT\",project=\"p1\"") && !page.text.contains("code=\"UNAVAILABLE\",project=\"p2\""),
                "a project shows only its own answers")
        // The sum over project is the pool's total, what FCM received: 32 + 23 + 14 + 15.
        #expect(page.sum("herald_fcm_requests_total") == received() && received() == 84)
        #expect(page.sum("herald_fcm_quota_exceeded_total") == 1)
        #expect(page.sum("herald_fcm_requests_total", ["code": "OK"]) == m.stack.emulator.deliveredMessages().count)
        #expect(page.sum("herald_messages_total", ["outcome": "completed"]) == m.stack.emulator.deliveredMessages().count)
        for name in ["p2", "p3"] {
            #expect(page.text.contains("herald_quota_paused{project=\"\(name)\"} 0\n"), "\(name)")
            #expect(page.text.contains("herald_fcm_quota_exceeded_total{limit=\"project\",project=\"\(name)\"} 0\n"), "\(name)")
        }
        let lint = try promtool(["check", "metrics"], input: page.text)
        #expect(lint.status == 0, "promtool check metrics: \(lint.output)")
    }

    @Test func aBrokenKeyPausesItsProjectAloneAndAFixedOneResumesWithoutARestart() throws {
        let m = try ManyProjects(count: 3)
        defer { m.close() }
        let original = try Data(contentsOf: URL(fileURLWithPath: m.keyPath(2)))
        try FileManager.default.removeItem(atPath: m.keyPath(2))
        for index in 1...3 { try m.enqueue(20, project: index) }
        var environment = m.stack.environment
        environment["HERALD_REGISTRY_POLL_SECONDS"] = "1"
        let pool = try HeraldProcess(["work", "--processes", "1", "--poll-interval", "0.2"], environment: environment)
        try pool.start()
        defer { pool.signal(SIGTERM); _ = pool.wait(timeout: 60) }
        #expect(waitUntil(timeout: 60) { m.delivered(1) == 20 && m.delivered(3) == 20 }, "\(pool.output)")
        var reason = ""
        #expect(try waitUntil(timeout: 30) { reason = try m.pausedReason(2); return !reason.isEmpty })
        #expect(reason.hasPrefix("credentials: ") && reason.contains(m.keyPath(2)) && reason.contains("does not exist"), "\(reason)")
        #expect(m.delivered(2) == 0)

        // The file back: delivered within 10 s, by the same worker process.
        let pids = Self.workerPIDs(pool.output)
        try original.write(to: URL(fileURLWithPath: m.keyPath(2)))
        let fixedAt = Date()
        #expect(waitUntil(timeout: 10) { m.delivered(2) == 20 }, "\(pool.output)")
        print("a fixed key file: its project delivered \(Int(Date().timeIntervalSince(fixedAt) * 1000)) ms after the fix")
        #expect(try m.pausedReason(2).isEmpty)
        #expect(Self.workerPIDs(pool.output) == pids, "no worker was restarted")

        // Mid-run, p3's file becomes p1's key: p3 pauses naming its file, p1 goes on, and no job
        // of p3 goes out with p1's key.
        try FileManager.default.removeItem(atPath: m.keyPath(3))
        try FileManager.default.copyItem(atPath: m.keyPath(1), toPath: m.keyPath(3))
        #expect(try waitUntil(timeout: 15) { reason = try m.pausedReason(3); return !reason.isEmpty }, "\(pool.output)")
        #expect(reason.contains(m.keyPath(3)) && reason.contains("herald-project-1") && !reason.contains("PRIVATE KEY"), "\(reason)")
        try m.enqueue(5, project: 3)
        try m.stack.connection.query("""
            INSERT INTO herald.jobs (message, project) SELECT jsonb_build_object('token', 'p1-late-' || g), 'p1' FROM generate_series(1, 5) g
            """)
        #expect(waitUntil(timeout: 15) { m.delivered(1) == 25 }, "\(pool.output)")
        #expect(m.delivered(3) == 20)
        #expect(m.forbidden == 0 && m.misplaced().isEmpty, "\(m.misplaced().prefix(3))")
        #expect(!pool.output.contains("PRIVATE KEY"), "a key in the log")
        #expect(pool.isRunning)
    }

    /// A thousand projects whose key files are gone, each with due jobs, beside one healthy
    /// project: each broken one is paused naming its file, and the healthy one's jobs go out as
    /// they would alone (the broken ones are looked at again every 5 s, not at every claim).
    @Test func manyBrokenProjectsLeaveAHealthyOneItsPace() throws {
        let m = try ManyProjects(count: 1001)
        defer { m.close() }
        for index in 2...1001 {
            try FileManager.default.removeItem(atPath: m.keyPath(index))
            try m.enqueue(3, project: index)
        }
        let pool = try HeraldProcess(["work", "--processes", "1", "--poll-interval", "0.2"], environment: m.stack.environment)
        try pool.start()
        defer { pool.signal(SIGTERM); _ = pool.wait(timeout: 60) }
        #expect(try waitUntil(timeout: 60) {
            try m.stack.count("SELECT count(*) FROM herald.projects WHERE paused_reason LIKE 'credentials: %does not exist%'") == 1000
        }, "\(pool.output.suffix(2000))")
        // The healthy project's one-time codes, one at a time, each delivered before the next.
        var waits: [Double] = []
        for n in 1...20 {
            try m.stack.connection.query("SELECT herald.enqueue(jsonb_build_object('token', 'p1-code-' || $1::text), project => 'p1')", [.int(n)])
            let enqueued = Date()
            #expect(waitUntil(timeout: 10) { m.delivered(1) == n })
            waits.append(Date().timeIntervalSince(enqueued) * 1000)
        }
        waits.sort()
        print("one healthy project beside 1,000 broken ones: codes delivered in p50 \(Int(waits[waits.count / 2])) ms, max \(Int(waits.last!)) ms")
        #expect(waits[waits.count / 2] < 500, "\(waits)")
        #expect(m.forbidden == 0 && m.stack.emulator.deliveredMessages().count == 20)
        let reasons = try m.stack.connection.query("SELECT paused_reason FROM herald.projects WHERE name = 'p57'")[0, 0] ?? ""
        #expect(reasons.contains(m.keyPath(57)), "\(reasons)")
    }

    @Test func aProjectAddedWhileThePoolRunsIsWorkedWithinSeconds() throws {
        let m = try ManyProjects(count: 2)
        defer { m.close() }
        try m.stack.connection.query("DELETE FROM herald.projects WHERE name = 'p2'")
        var environment = m.stack.environment
        environment["HERALD_REGISTRY_POLL_SECONDS"] = "1"
        let pool = try HeraldProcess(["work", "--processes", "1", "--poll-interval", "0.2"], environment: environment)
        try pool.start()
        defer { pool.signal(SIGTERM); _ = pool.wait(timeout: 60) }
        try m.enqueue(5, project: 1)
        #expect(waitUntil(timeout: 60) { m.delivered(1) == 5 }, "\(pool.output)")
        try m.stack.connection.query("INSERT INTO herald.projects (name, fcm_project_id, credentials) VALUES ('p2', 'herald-project-2', $1)",
                                     [.text(m.keyPath(2))])
        try m.enqueue(5, project: 2)
        #expect(waitUntil(timeout: 10) { m.delivered(2) == 5 }, "\(pool.output)")
        #expect(m.forbidden == 0 && m.misplaced().isEmpty)

        // p1 leaves the registry: the worker lets it go within a reading, and keeps p2.
        #expect(waitUntil(timeout: 10) { (try? m.stack.count("SELECT count(*) FROM herald.jobs WHERE state <> 'completed'")) == 0 })
        try m.stack.connection.query("SELECT herald.remove_project('p1')")
        #expect(waitUntil(timeout: 10) { pool.output.contains("project p1 left the registry") }, "\(pool.output)")
        try m.enqueue(5, project: 2)
        #expect(waitUntil(timeout: 10) { m.delivered(2) == 10 }, "\(pool.output)")
        #expect(pool.isRunning)
    }

    /// Topic subscriptions of the registry's projects go out, from a worker carrying them, each
    /// with its own project's access token (the emulator files a batchAdd under the project of
    /// the token it carried, and a topic's subscribers are a project's own); those of no project
    /// with the pool's own key. p1 and p2 have no job (the carrier loads their keys itself), p3
    /// has jobs (the carrier uses the keys the store thread took up).
    @Test func eachCarriedProjectsTopicSubscriptionsGoOutWithItsOwnToken() throws {
        let m = try ManyProjects(count: 3)
        defer { m.close() }
        let c = m.stack.connection
        for index in 1...3 {
            _ = try c.query("SELECT herald.subscribe('news', $1::text[], project => $2)",
                            [.textArray(["p\(index)-a", "p\(index)-b"]), .text("herald-project-\(index)")])
        }
        _ = try c.query("SELECT herald.subscribe('news', ARRAY['none-a'])")
        try m.enqueue(5, project: 3)
        let pool = try HeraldProcess(["work", "--processes", "1", "--poll-interval", "0.2"], environment: m.stack.environment)
        try pool.start()
        defer { pool.signal(SIGKILL); _ = pool.wait(timeout: 10) }
        #expect(waitUntil(timeout: 60) {
            (try? m.stack.count("SELECT count(*) FROM herald.topic_subscriptions WHERE state <> 'subscribed'")) == 0
        }, "\(pool.output)")
        let topics = m.stack.emulator.topics
        for index in 1...3 {
            #expect(topics.subscribers(project: "herald-project-\(index)", topic: "news") == ["p\(index)-a", "p\(index)-b"], "p\(index)")
        }
        #expect(topics.subscribers(project: "e2e-project", topic: "news") == ["none-a"])
        // One request per project, each carrying that project's token and its tokens alone.
        let requests = topics.requests
        #expect(requests.allSatisfy { $0.status == 200 && $0.add }, "\(requests)")
        #expect(requests.map(\.project).sorted() == ["e2e-project", "herald-project-1", "herald-project-2", "herald-project-3"], "\(requests)")
        #expect(requests.allSatisfy { $0.tokens == ($0.project == "e2e-project" ? 1 : 2) }, "\(requests)")
        #expect(waitUntil(timeout: 30) { m.delivered(3) == 5 })

        // Unsubscribing p2's: removed at p2 with p2's token, the others untouched.
        _ = try c.query("SELECT herald.unsubscribe('news', ARRAY['p2-a'], project => 'herald-project-2')")
        #expect(waitUntil(timeout: 30) {
            (try? m.stack.count("SELECT count(*) FROM herald.topic_subscriptions WHERE state = 'removing'")) == 0
        }, "\(pool.output)")
        let after = m.stack.emulator.topics
        #expect(after.subscribers(project: "herald-project-2", topic: "news") == ["p2-b"])
        #expect(after.requests.last.map { !$0.add && $0.project == "herald-project-2" } == true, "\(after.requests)")
        #expect(after.subscribers(project: "herald-project-1", topic: "news").count == 2)
        #expect(m.forbidden == 0)
        pool.signal(SIGTERM)
        #expect(pool.wait(timeout: 60) == 0, "\(pool.output)")
    }

    /// `--skip-project big`: the pool works every other project's jobs (and the jobs of no
    /// project) and leaves big's available, its topic subscriptions too, for a pool of its own.
    @Test func aPoolSkippingAProjectLeavesItsJobsAvailable() throws {
        let m = try ManyProjects(count: 3)
        defer { m.close() }
        let c = m.stack.connection
        try c.query("UPDATE herald.projects SET name = 'big' WHERE name = 'p3'")
        try m.enqueue(5, project: 1)
        try m.enqueue(5, project: 2)
        try m.enqueue(5, project: nil)
        try c.query("""
            INSERT INTO herald.jobs (message, project)
            SELECT jsonb_build_object('token', 'p3-' || g, 'data', jsonb_build_object('k', 'v')), 'big' FROM generate_series(1, 20) AS g
            """)
        let run = try m.stack.work(["--drain", "--processes", "2", "--poll-interval", "0.2", "--skip-project", "big"])
        #expect(run.status == 0, "\(run.output)")
        #expect(run.output.contains("every registry entry but big (--skip-project)"), "\(run.output)")
        #expect(m.delivered(1) == 5 && m.delivered(2) == 5)
        #expect(m.stack.emulator.deliveredMessages().filter { $0.projectID == "e2e-project" }.count == 5)
        #expect(m.delivered(3) == 0, "big's jobs went out")
        #expect(try m.stack.count("SELECT count(*) FROM herald.jobs WHERE project = 'big' AND state = 'available' AND attempts = 0") == 20)
        #expect(try m.stack.count("SELECT count(*) FROM herald.jobs WHERE project IS DISTINCT FROM 'big' AND state <> 'completed'") == 0)

        // The old shape of workers per project starts none for big.
        try m.enqueue(2, project: 1)
        var perProject = m.stack.environment
        perProject["HERALD_WORKERS_PER_PROJECT"] = "1"
        let old = try HeraldProcess.run(["work", "--drain", "--processes", "1", "--poll-interval", "0.2", "--skip-project", "big"],
                                        environment: perProject, timeout: 120)
        #expect(old.status == 0, "\(old.output)")
        #expect(old.output.contains("project p1") && !old.output.contains("project big"), "\(old.output)")
        #expect(m.delivered(1) == 7 && m.delivered(3) == 0)
        #expect(try m.stack.count("SELECT count(*) FROM herald.jobs WHERE project = 'big' AND state = 'available' AND attempts = 0") == 20)

        // The variable says the same (names separated by commas); big's subscriptions wait too,
        // while p1's, due earlier, are made.
        _ = try c.query("SELECT herald.subscribe('news', ARRAY['big-a'], project => 'herald-project-3')")
        _ = try c.query("SELECT herald.subscribe('news', ARRAY['p1-a'], project => 'herald-project-1')")
        var environment = m.stack.environment
        environment["HERALD_SKIP_PROJECTS"] = "p2, big"
        let pool = try HeraldProcess(["work", "--processes", "1", "--poll-interval", "0.2"], environment: environment)
        try pool.start()
        defer { pool.signal(SIGKILL); _ = pool.wait(timeout: 10) }
        try m.enqueue(3, project: 1)
        try m.enqueue(3, project: 2)
        #expect(waitUntil(timeout: 30) { m.delivered(1) == 10 }, "\(pool.output)")
        #expect(waitUntil(timeout: 30) {
            (try? m.stack.count("SELECT count(*) FROM herald.topic_subscriptions WHERE token = 'p1-a' AND state = 'subscribed'")) == 1
        }, "\(pool.output)")
        #expect(m.delivered(2) == 5 && m.delivered(3) == 0)
        #expect(try m.stack.count("SELECT count(*) FROM herald.topic_subscriptions WHERE token = 'big-a' AND state = 'pending' AND attempts = 0") == 1)
        #expect(m.stack.emulator.topics.subscribers(project: "herald-project-3", topic: "news").isEmpty)
        pool.signal(SIGTERM)
        #expect(pool.wait(timeout: 60) == 0, "\(pool.output)")
    }

    /// A name the registry does not hold stops start-up naming the setting (a typo would leave
    /// the project worked here), before any job is touched; so does --skip-project beside --project.
    @Test func anUnknownSkippedProjectStopsStartUpNamingTheSetting() throws {
        let m = try ManyProjects(count: 2)
        defer { m.close() }
        try m.enqueue(3, project: 1)
        let flag = try m.stack.work(["--drain", "--processes", "1", "--skip-project", "p9"], timeout: 60)
        #expect(flag.status == 2, "\(flag.output)")
        #expect(flag.output.contains(#"--skip-project names "p9", not in the project registry"#), "\(flag.output)")
        #expect(flag.output.contains(#"did you mean "p1"?"#), "\(flag.output)")
        var environment = m.stack.environment
        environment["HERALD_SKIP_PROJECTS"] = "p2,nosuch"
        let variable = try HeraldProcess.run(["work", "--drain", "--processes", "1"], environment: environment, timeout: 60)
        #expect(variable.status == 2, "\(variable.output)")
        #expect(variable.output.contains(#"HERALD_SKIP_PROJECTS names "nosuch", not in the project registry"#), "\(variable.output)")
        environment["HERALD_SKIP_PROJECTS"] = "p2,,p1"
        let empty = try HeraldProcess.run(["work", "--drain", "--processes", "1"], environment: environment, timeout: 60)
        #expect(empty.status == 2 && empty.output.contains("HERALD_SKIP_PROJECTS holds an empty name"), "\(empty.output)")
        let named = try m.stack.work(["--drain", "--processes", "1", "--project", "p1", "--skip-project", "p2"], timeout: 60)
        #expect(named.status == 2 && named.output.contains("--skip-project p2 leaves projects out of a pool of the whole registry"), "\(named.output)")
        #expect(try m.stack.count("SELECT count(*) FROM herald.jobs WHERE state = 'available' AND attempts = 0") == 3, "a job was touched")
        #expect(m.delivered(1) == 0)
    }

    static func rss(_ pids: [Int32]) -> Int {
        pids.reduce(0) { total, pid in
            guard let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
                  let line = text.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }) else { return total }
            return total + (Int(line.split(separator: " ").dropFirst().first ?? "0") ?? 0) * 1024
        }
    }
    static func children(of pid: Int32) -> [Int32] {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/task/\(pid)/children", encoding: .utf8) else { return [] }
        return text.split(separator: " ").compactMap { Int32($0) }
    }

    /// The issue's shape, from outside: a thousand registered projects with 20 jobs each,
    /// `--processes 2`: at most 3 processes (the supervisor and 2 workers), their RSS in all,
    /// their PostgreSQL connections, and every message with its own project's token.
    @Test func aThousandProjectsInTwoWorkerProcesses() throws {
        let stack = try WorkerStack()
        defer { stack.close() }
        let folder = NSTemporaryDirectory() + "herald-scale-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: false)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let projects = try stack.emulator.writeServiceAccounts(count: 1000, folder: folder)
        try stack.connection.query("""
            INSERT INTO herald.projects (name, fcm_project_id, credentials)
            SELECT 'p' || i, f, $1::text || '/' || f || '.json' FROM unnest($2::text[]) WITH ORDINALITY AS t(f, i)
            """, [.text(folder), .textArray(projects)])
        try stack.connection.query("""
            INSERT INTO herald.jobs (message, project)
            SELECT jsonb_build_object('token', 'p' || i || '-' || g, 'data', jsonb_build_object('k', 'v')), 'p' || i
            FROM generate_series(1, 1000) i, generate_series(1, 20) g
            """)
        let pool = try HeraldProcess(["work", "--processes", "2", "--poll-interval", "0.2", "--admin-address", "off"], environment: stack.environment)
        let started = Date()
        try pool.start()
        defer { pool.signal(SIGTERM); _ = pool.wait(timeout: 60) }
        var peak = 0, processes = 0, connections = 0
        var done = false
        while Date().timeIntervalSince(started) < 120 {
            let supervisor = pool.process.processIdentifier
            let workers = Self.children(of: supervisor)
            processes = max(processes, 1 + workers.count)
            peak = max(peak, Self.rss([supervisor] + workers))
            connections = max(connections, (try? stack.count("SELECT count(*) FROM pg_stat_activity WHERE application_name = 'herald work'")) ?? 0)
            if stack.emulator.deliveredMessages().count >= 20_000 { done = true; break }
            Thread.sleep(forTimeInterval: 0.25)
        }
        let took = Date().timeIntervalSince(started)
        let forbidden = stack.emulator.statistics["by_status"]?["403"]?.intValue ?? 0
        let misplaced = stack.emulator.deliveredMessages().filter { m in
            guard let t = m.token, let d = t.firstIndex(of: "-") else { return true }
            return m.projectID != "herald-project-" + t[..<d].dropFirst()
        }.count
        // Each project is taken up by the worker that owns it; the other takes it up only once
        // its own leave room: about one access token a project for the pool, not one a worker.
        let tokens = stack.emulator.statistics["tokens_issued"]?.intValue ?? 0
        print("1000 projects x 20 jobs, --processes 2: delivered \(stack.emulator.deliveredMessages().count) in \(String(format: "%.1f", took)) s (done \(done)); processes at most \(processes); RSS peak \(peak / 1_048_576) MiB; 'herald work' connections at most \(connections); 403 \(forbidden); misplaced \(misplaced); access tokens \(tokens)")
        #expect(tokens >= 1000 && tokens <= 1500, "\(tokens) access tokens for 1,000 projects and 2 workers")
        #expect(done, "all 20,000 delivered within 120 s")
        #expect(processes <= 3)
        #expect(peak <= 256 * 1_048_576, "RSS \(peak / 1_048_576) MiB")
        #expect(connections <= 2 * 3)
        #expect(forbidden == 0 && misplaced == 0)
    }
}
