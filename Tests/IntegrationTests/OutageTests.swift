import Emulator
import Foundation
import LocalPostgres
import Postgres
import Queue
import Testing
import TestSupport

/// Nothing is lost when FCM or PostgreSQL goes away under a running worker.
@Suite(.serialized) struct OutageTests {
    @Test func anFCMOutageDelaysButLosesNothing() throws {
        let stack = try WorkerStack()
        defer { stack.close() }
        try stack.enqueue(200, prefix: "before-")
        let worker = try HeraldProcess(["work", "--processes", "1", "--concurrency", "64", "--poll-interval", "0.2"],
                                       environment: stack.environment)
        try worker.start()
        defer { worker.signal(SIGKILL); worker.wait(timeout: 10) }
        #expect(waitUntil(timeout: 60) { (try? stack.count("SELECT count(*) FROM herald.jobs WHERE state = 'completed'")) == 200 })

        // FCM goes away; new jobs fail to connect and are retried with backoff.
        stack.emulator.stop()
        try stack.enqueue(300, prefix: "during-")
        #expect(waitUntil(timeout: 60) {
            (try? stack.count("SELECT count(*) FROM herald.jobs WHERE state IN ('scheduled', 'available') AND attempts >= 1 AND last_error LIKE 'CONNECTION%'")) ?? 0 > 0
        }, "\(worker.output)")

        // FCM comes back on the same address. It knows the service account but none of the
        // access tokens the first one issued: the worker gets 401, renews once and sends again.
        let revived = try stack.revivedEmulator()
        defer { revived.stop() }
        #expect(waitUntil(timeout: 120) { (try? stack.count("SELECT count(*) FROM herald.jobs WHERE state = 'completed'")) == 500 },
                "\(worker.output)")
        #expect(Set(revived.deliveredMessages().map(\.target)).count == 300)
        #expect(revived.tokensIssued >= 1, "a new access token after the 401")
        #expect(try stack.count("SELECT count(*) FROM herald.dead_letters") == 0)
        worker.signal(SIGTERM)
        #expect(worker.wait(timeout: 60) == 0)
    }

    /// A 30 s outage is a pause, not every message's failure: the circuit opens, what the
    /// worker holds goes back without using an attempt, a probe finds FCM again, and the backlog
    /// goes out at once instead of over minutes of per-job backoff.
    @Test func aLongFCMOutageIsAPauseNotEveryMessagesFailure() throws {
        try MachineLock.alone {
            let stack = try WorkerStack()
            defer { stack.close() }
            let worker = try HeraldProcess(["work", "--processes", "1", "--concurrency", "64", "--poll-interval", "0.2"],
                                           environment: stack.environment)
            try worker.start()
            defer { worker.signal(SIGKILL); worker.wait(timeout: 10) }
            try stack.enqueue(200, prefix: "before-")
            #expect(waitUntil(timeout: 60) { (try? stack.count("SELECT count(*) FROM herald.jobs WHERE state = 'completed'")) == 200 })

            // FCM refuses connections for 30 s while jobs keep coming.
            stack.emulator.stop()
            let outageStarted = Date()
            try stack.enqueue(2000, prefix: "during-")
            #expect(waitUntil(timeout: 20) {
                (try? stack.count("SELECT count(*) FROM herald.project_pauses WHERE paused_until > now() AND reason LIKE 'FCM_UNREACHABLE (%'")) == 1
            }, "the circuit holds back every pool through herald.project_pauses: \(worker.output)")
            #expect(worker.output.contains("FCM unreachable or failing for every message"), "\(worker.output)")
            while Date().timeIntervalSince(outageStarted) < 30 { Thread.sleep(forTimeInterval: 0.2) }  // the outage's length, not a wait for a condition

            let revived = try stack.revivedEmulator()
            defer { revived.stop() }
            let returned = Date()
            #expect(waitUntil(timeout: 60) { (try? stack.count("SELECT count(*) FROM herald.jobs WHERE state = 'completed'")) == 2200 },
                    "\(worker.output)")
            let delivered = revived.deliveredMessages().filter { $0.token?.hasPrefix("during-") == true }
            #expect(Set(delivered.compactMap(\.token)).count == 2000)
            let last = Double(delivered.map(\.receivedAtMilliseconds).max() ?? 0) / 1000
            let seconds = last - returned.timeIntervalSince1970
            print("outage: 2000 jobs held through a 30 s FCM outage, all delivered \(String(format: "%.1f", seconds)) s after FCM returned (target 10 s)")
            #expect(seconds <= 10, "the last job reached FCM \(seconds) s after it returned")
            let attempts = try stack.count("SELECT coalesce(max(attempts), 0) FROM herald.jobs")
            print("outage: at most \(attempts) attempts used by a job (target 3)")
            #expect(attempts <= 3)
            #expect(try stack.count("SELECT count(*) FROM herald.dead_letters") == 0)
            worker.signal(SIGTERM)
            #expect(worker.wait(timeout: 60) == 0)
        }
    }

    @Test func aPostgreSQLRestartLosesNoOutcome() throws {
        let directory = NSTemporaryDirectory() + "herald-outage-pg-\(UUID().uuidString)"
        let cluster = try LocalCluster.start(directory: directory, durable: false)
        defer { try? cluster.stop(); try? FileManager.default.removeItem(atPath: directory) }
        let admin = try PGConnection(url: cluster.url)
        try admin.execute("CREATE DATABASE outage")
        let url = cluster.url(database: "outage")
        try Migrator.migrate(try PGConnection(url: url))

        let emulator = try startWorkerEmulator { $0.latencyMilliseconds = 300 }
        defer { emulator.stop() }
        let credentials = NSTemporaryDirectory() + "herald-sa-\(UUID().uuidString).json"
        try emulator.writeServiceAccount(to: credentials, projectID: "outage")
        defer { try? FileManager.default.removeItem(atPath: credentials) }

        let jobs = try PGConnection(url: url)
        try jobs.query("INSERT INTO herald.jobs (message) SELECT jsonb_build_object('token', 'pg-' || g) FROM generate_series(1, 2000) g")
        let worker = try HeraldProcess(["work", "--processes", "1", "--concurrency", "100", "--poll-interval", "0.2", "--drain"],
                                       environment: ["DATABASE_URL": url, "GOOGLE_APPLICATION_CREDENTIALS": credentials]
                                                    .merging(try emulatorEnvironment(emulator)) { $1 })
        try worker.start()
        defer { worker.signal(SIGKILL); worker.wait(timeout: 10) }
        #expect(waitUntil(timeout: 60) { emulator.deliveredMessages().count >= 200 })

        // PostgreSQL stops while requests are in flight; their answers arrive while it is down.
        try cluster.stop()
        _ = try LocalCluster.start(directory: directory, port: cluster.port, durable: false)

        #expect(worker.wait(timeout: 180) == 0, "\(worker.output)")
        let check = try PGConnection(url: url)
        #expect(try check.query("SELECT count(*) FROM herald.jobs WHERE state = 'completed'").int(0, 0) == 2000)
        let delivered = emulator.deliveredMessages().map(\.target)
        #expect(Set(delivered).count == 2000, "every job delivered")
        #expect(delivered.count == 2000, "the outcomes held during the outage were recorded, not sent again")
        // The worker held the answers that came while PostgreSQL was down and recorded them after.
        let held = worker.output.components(separatedBy: "reconnected to PostgreSQL; ").dropFirst()
            .compactMap { Int($0.prefix { $0.isNumber }) }
        #expect(held.contains { $0 > 0 }, "\(worker.output)")
    }
}
