import Emulator
import Foundation
import Postgres
import Testing
import TestSupport

/// APNs apps across pools: an app's outage pause shared through herald.project_pauses by every
/// worker of every pool, and `herald work --project APP` working one app's jobs (beside FCM
/// projects when they are named too).
@Suite(.serialized) struct APNsPoolTests {
    /// An APNs stand-in of its own (so it can go away while FCM stays) and FCM project `news`
    /// registered beside app `shop`.
    struct Setting {
        let s: APNsWorkerTests.Stand
        let newsKey: String

        init() throws {
            s = try APNsWorkerTests.Stand(apnsConfiguration: EmulatorConfiguration(host: "127.0.0.1", port: 0, threads: 1))
            newsKey = s.folder + "/news-fcm.json"
            try s.stack.emulator.writeServiceAccount(to: newsKey, projectID: "news-fcm")
            try s.stack.connection.query("SELECT herald.add_project('news', 'news-fcm', $1)", [.text(newsKey)])
        }

        /// `n` FCM jobs of project news to tokens `prefix1...prefixN`.
        func enqueueNews(_ n: Int, prefix: String) throws {
            try s.stack.connection.query("""
                INSERT INTO herald.jobs (message, project)
                SELECT jsonb_build_object('token', $1::text || g, 'notification', jsonb_build_object('title', 'News')), 'news'
                FROM generate_series(1, $2::int) AS g
                """, [.text(prefix), .int(n)])
        }

        /// News messages FCM received whose token starts with `prefix`.
        func newsDelivered(_ prefix: String) -> Int {
            s.stack.emulator.deliveredMessages().filter { $0.projectID == "news-fcm" && ($0.token ?? "").hasPrefix(prefix) }.count
        }

        func close() { s.close() }
    }

    /// The pids of a pool's worker processes, from its log lines (`herald work[PID]`).
    static func workerPIDs(_ output: String) -> Set<String> {
        Set(output.matches(of: /herald work\[([0-9]+)\]/).map { String($0.1) })
    }

    /// An app's endpoint stops answering while a pool of two workers sends its jobs: the pool's
    /// circuit opens and the pause goes to herald.project_pauses; a second pool, started during the
    /// outage with `--project shop --project news`, sends none of the app's jobs while it lasts
    /// (not one request), yet delivers FCM project news throughout. No job is dead-lettered, few
    /// spend an attempt; when APNs answers again both pools deliver the app's jobs, each once.
    @Test func anUnreachableAppIsHeldByEveryPoolWhileAnFCMProjectBesideItDelivers() throws {
        try MachineLock.alone {
            let t = try Setting()
            defer { t.close() }
            let s = t.s
            let apnsPort = s.apns.port
            let environment = ["HERALD_APNS_URL": s.apns.baseURL]
            let first = try RunningPool(s.stack, arguments: ["--processes", "2", "--poll-interval", "0.2"], environment: environment)
            defer { _ = first.stop() }
            try s.enqueueAlerts(20, prefix: "a1")
            try t.enqueueNews(20, prefix: "n1-")
            #expect(waitUntil(timeout: 60) { s.apns.apnsDeliveries().count == 20 && t.newsDelivered("n1-") == 20 }, "\(first.process.output)")

            // APNs goes away (connections refused); the app's jobs keep coming. A rate keeps the
            // backlog going out over seconds once APNs is back, so both pools take part.
            s.apns.stop()
            try s.stack.connection.query("UPDATE herald.projects SET max_rate = 100 WHERE name = 'shop'")
            try s.enqueueAlerts(300, prefix: "b2")
            try s.stack.connection.query("UPDATE herald.jobs SET max_attempts = 3 WHERE project = 'shop'")
            #expect(try waitUntil(timeout: 30) {
                try s.stack.count("""
                    SELECT count(*) FROM herald.project_pauses
                    WHERE project_id = 'APNs:shop' AND paused_until > now() AND reason LIKE 'APNS_UNREACHABLE (%'
                    """) == 1
            }, "the app's pause is published for every pool: \(first.process.output)")

            // A second pool carrying the app and an FCM project, started while the pause holds.
            let second = try RunningPool(s.stack, arguments: ["--processes", "1", "--poll-interval", "0.2", "--project", "shop", "--project", "news"],
                                         environment: environment)
            defer { _ = second.stop() }
            #expect(waitUntil(timeout: 30) { second.process.output.contains("working the jobs of") }, "\(second.process.output)")
            try t.enqueueNews(100, prefix: "n2-")
            #expect(waitUntil(timeout: 30) { t.newsDelivered("n2-") == 100 }, "FCM project news delivers during the app's outage")
            // The outage's length is what is tested: long enough for pools spending attempts
            // (backoff from 1 s, doubling) to spend all three of many jobs, and for probes to fail
            // several times (every 0.5 to 4 s).
            Thread.sleep(forTimeInterval: 8)
            try t.enqueueNews(50, prefix: "n3-")
            #expect(waitUntil(timeout: 30) { t.newsDelivered("n3-") == 50 }, "FCM project news still delivers")
            #expect(try s.stack.count("SELECT count(*) FROM herald.jobs WHERE project = 'shop' AND state = 'completed'") == 20)

            // Held by both: the first pool met the outage; the second sent the app nothing.
            let firstMetrics = try first.metrics(), secondMetrics = try second.metrics()
            #expect(firstMetrics.sum("herald_apns_requests_total", ["project": "shop", "code": "TRANSPORT"]) > 0, "\(firstMetrics.text)")
            #expect(secondMetrics.sum("herald_apns_requests_total", ["project": "shop"]) == 0, "\(secondMetrics.text)")
            #expect(!second.process.output.contains("APNs unreachable"), "\(second.process.output)")
            // herald stats says why the app's jobs wait.
            let stats = try HeraldProcess.run(["stats"], environment: s.environment, timeout: 60)
            let line = stats.output.split(separator: "\n").first { $0.hasPrefix("shop ") }.map(String.init) ?? ""
            #expect(line.contains("(APNs unreachable, "), "\(stats.output)")
            #expect(stats.output.contains("shop holds ") && stats.output.contains("(apns_unreachable pause)"), "\(stats.output)")
            #expect(try s.stack.count("SELECT count(*) FROM herald.dead_letters") == 0)
            #expect(try s.stack.count("SELECT coalesce(max(attempts), 0) FROM herald.jobs WHERE project = 'shop'") < 3)

            // APNs answers again, at the same address, knowing the same key.
            let revived = EmulatorServer(configuration: try workerEmulatorConfiguration {
                $0.port = apnsPort
                $0.apnsProviderTokenMaxAge = 3600
            })
            _ = try revived.trustAPNsKeys(folder: s.folder)
            try revived.start()
            defer { revived.stop() }
            #expect(waitUntil(timeout: 60) { Set(revived.apnsDeliveries().map(\.deviceToken)).count == 300 }, "\(first.process.output)")
            #expect(revived.apnsDeliveries().count == 300, "a job delivered twice")
            #expect(try waitUntil(timeout: 30) {
                try s.stack.count("SELECT count(*) FROM herald.jobs WHERE project = 'shop' AND state = 'completed'") == 320
            })
            // Few jobs spent an attempt: those failing before a worker's circuit opened (8 in a
            // row open it), not one per job and outage second.
            let spent = try s.stack.count("SELECT count(*) FROM herald.jobs WHERE project = 'shop' AND attempts > 1")
            print("APNs outage: \(spent) of 300 jobs spent an attempt on it")
            #expect(spent <= 16, "\(spent) jobs spent an attempt")
            #expect(try s.stack.count("SELECT count(*) FROM herald.dead_letters") == 0)
            // Both pools took the app's jobs up again.
            let secondPIDs = Self.workerPIDs(second.process.output)
            let bySecond = try s.stack.count("""
                SELECT count(*) FROM herald.jobs WHERE project = 'shop' AND state = 'completed' AND split_part(locked_by, ':', 2) = ANY ($1::text[])
                """, [.text("{" + secondPIDs.joined(separator: ",") + "}")])
            #expect(bySecond > 0 && bySecond < 300, "the second pool delivered \(bySecond) of the app's 300 jobs")
        }
    }

    /// `--project APP` works that app's jobs and no one else's; an app and an FCM project named
    /// together are both worked; an app named in HERALD_PROJECT alone too; an unknown name stops
    /// start-up naming it.
    @Test func aPoolGivenAnAppWorksThatAppsJobsOnly() throws {
        let t = try Setting()
        defer { t.close() }
        let s = t.s
        try s.register("blog", keyFile: s.keyPath)
        try s.enqueueAlerts(30, prefix: "5a")
        for n in 1...10 { try s.enqueue(APNsWorkerTests.token("b1", n), app: "blog") }
        try t.enqueueNews(10, prefix: "news-")
        try s.stack.enqueue(10, prefix: "none-")

        let shop = try s.work(["--drain", "--processes", "1", "--poll-interval", "0.2", "--project", "shop"])
        #expect(shop.status == 0, "\(shop.output)")
        #expect(shop.output.contains("APNs app shop") && !shop.output.contains("blog"), "\(shop.output)")
        let tokens = s.apns.apnsDeliveries().map(\.deviceToken)
        #expect(tokens.count == 30 && tokens.allSatisfy { $0.hasPrefix("5a") }, "\(tokens.count) delivered")
        #expect(s.stack.emulator.deliveredMessages().isEmpty)
        #expect(try s.stack.count("SELECT count(*) FROM herald.jobs WHERE project IS DISTINCT FROM 'shop' AND state = 'available'") == 30)

        // An app and an FCM project together: both, and nothing else.
        let mixed = try s.work(["--drain", "--processes", "1", "--poll-interval", "0.2", "--project", "blog", "--project", "news"])
        #expect(mixed.status == 0, "\(mixed.output)")
        #expect(s.apns.apnsDeliveries().filter { $0.deviceToken.hasPrefix("b1") }.count == 10)
        #expect(t.newsDelivered("news-") == 10)
        #expect(s.stack.emulator.deliveredMessages().allSatisfy { $0.projectID == "news-fcm" })
        #expect(try s.stack.count("SELECT count(*) FROM herald.jobs WHERE project IS NULL AND state = 'available'") == 10)

        // One app named in HERALD_PROJECT instead of --project.
        for n in 1...5 { try s.enqueue(APNsWorkerTests.token("b2", n), app: "blog") }
        var environment = s.environment
        environment["HERALD_PROJECT"] = "blog"
        let fromEnvironment = try HeraldProcess.run(["work", "--drain", "--processes", "1", "--poll-interval", "0.2"],
                                                    environment: environment, timeout: 180)
        #expect(fromEnvironment.status == 0, "\(fromEnvironment.output)")
        #expect(s.apns.apnsDeliveries().filter { $0.deviceToken.hasPrefix("b2") }.count == 5)
        #expect(try s.stack.count("SELECT count(*) FROM herald.jobs WHERE project IS NULL AND state = 'available'") == 10)

        // A name nobody registered: today's error, naming it; nothing touched.
        let unknown = try s.work(["--drain", "--project", "shop", "--project", "nosuch"])
        #expect(unknown.status == 2 && unknown.output.contains("no project named \"nosuch\""), "\(unknown.output)")
        #expect(try s.stack.count("SELECT count(*) FROM herald.jobs WHERE project IS NULL AND state = 'available'") == 10)
    }

    /// The old shape, workers of each project (HERALD_WORKERS_PER_PROJECT=1), gives each APNs app
    /// workers of its own too: the app's jobs are delivered beside the FCM project's and the jobs
    /// of no project.
    @Test func aPoolOfWorkersPerProjectWorksTheAppsToo() throws {
        let t = try Setting()
        defer { t.close() }
        let s = t.s
        try s.enqueueAlerts(30, prefix: "6a")
        try t.enqueueNews(10, prefix: "news-")
        try s.stack.enqueue(10, prefix: "none-")
        var environment = s.environment
        environment["HERALD_WORKERS_PER_PROJECT"] = "1"
        let run = try HeraldProcess.run(["work", "--drain", "--processes", "1", "--poll-interval", "0.2"], environment: environment, timeout: 180)
        #expect(run.status == 0, "\(run.output)")
        #expect(run.output.contains("for each of: the jobs of no project, project news, project shop"), "\(run.output)")
        #expect(Set(s.apns.apnsDeliveries().map(\.deviceToken)).count == 30 && s.apns.apnsDeliveries().count == 30)
        #expect(t.newsDelivered("news-") == 10)
        #expect(s.stack.emulator.deliveredMessages().filter { $0.projectID == "e2e-project" }.count == 10)
        #expect(try s.stack.count("SELECT count(*) FROM herald.jobs WHERE state <> 'completed'") == 0)
    }
}
