import Emulator
import Foundation
import LocalPostgres
import Postgres
import Queue
import Testing
import TestSupport

/// A primary with a synchronous streaming standby, both named in a multi-host DATABASE_URL with
/// target_session_attrs=read-write: the primary crashes under load, the standby is promoted, the
/// pool carries on against it.
@Suite(.serialized) struct FailoverTests {
    @Test func aFailoverToASynchronousStandbyUnderLoadLosesNothing() throws {
        try failover(projects: 0)
    }

    /// The same with the pool carrying fifty registry projects (and jobs of no project beside
    /// them): each job still reaches FCM once at least, under its own project, nothing is lost,
    /// and no project is left paused.
    @Test func aFailoverWhileThePoolCarriesFiftyProjectsLosesNothing() throws {
        try failover(projects: 50)
    }

    /// 4,000 jobs (with `projects`, every tenth of no project and the rest spread over p1...pN,
    /// each token naming its owner), a pool of two workers, the primary crashed under load and
    /// the standby promoted.
    private func failover(projects: Int) throws {
        let root = NSTemporaryDirectory() + "herald-failover-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: root) }
        let replication = ["synchronous_commit": "on", "wal_level": "replica", "full_page_writes": "on"]
        let primary = try LocalCluster.start(directory: root + "/primary", durable: false, settings: replication)
        defer { try? primary.crash() }
        try PGConnection(url: primary.url).execute("CREATE DATABASE failover")
        try Migrator.migrate(try PGConnection(url: primary.url(database: "failover")))
        let standby = try LocalCluster.startStandby(of: primary, directory: root + "/standby", durable: false,
                                                    settings: ["synchronous_commit": "on"])
        defer { try? standby.crash() }
        // From now on commits wait for the standby (synchronous_commit on, the standby named synchronous).
        let admin = try PGConnection(url: primary.url)
        try admin.execute("ALTER SYSTEM SET synchronous_standby_names = 'standby1'")
        try admin.execute("SELECT pg_reload_conf()")
        let jobs = try PGConnection(url: primary.url(database: "failover"))
        #expect(waitUntil(timeout: 30) {
            (try? jobs.query("SELECT sync_state FROM pg_stat_replication WHERE application_name = 'standby1'"))?[0, 0] == "sync"
        }, "the standby streams synchronously")

        let emulator = try startWorkerEmulator { $0.latencyMilliseconds = 100 }
        defer { emulator.stop() }
        let credentials = NSTemporaryDirectory() + "herald-sa-\(UUID().uuidString).json"
        try emulator.writeServiceAccount(to: credentials, projectID: "failover")
        defer { try? FileManager.default.removeItem(atPath: credentials) }
        if projects > 0 {
            let folder = root + "/keys"
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            let ids = try emulator.writeServiceAccounts(count: projects, folder: folder)
            try jobs.query("""
                INSERT INTO herald.projects (name, fcm_project_id, credentials)
                SELECT 'p' || i, f, $1::text || '/' || f || '.json' FROM unnest($2::text[]) WITH ORDINALITY AS t(f, i)
                """, [.text(folder), .textArray(ids)])
        }

        let total = 4_000
        try jobs.query("""
            INSERT INTO herald.jobs (message, project)
            SELECT jsonb_build_object('token', coalesce(p, 'none') || '-' || g), p
            FROM generate_series(1, $1::int) g, LATERAL (SELECT CASE WHEN $2::int > 0 AND g % 10 <> 0 THEN 'p' || ((g / 10) % $2::int + 1) END AS p) owner
            """, [.int(total), .int(projects)])
        let url = "postgresql://herald@127.0.0.1:\(primary.port),127.0.0.1:\(standby.port)/failover?target_session_attrs=read-write"
        let concurrency = 64
        let pool = try HeraldProcess(["work", "--processes", "2", "--concurrency", String(concurrency), "--poll-interval", "0.2", "--drain"],
                                     environment: ["DATABASE_URL": url, "GOOGLE_APPLICATION_CREDENTIALS": credentials]
                                                  .merging(try emulatorEnvironment(emulator)) { $1 })
        try pool.start()
        defer { pool.signal(SIGKILL); pool.wait(timeout: 10) }
        #expect(waitUntil(timeout: 60) { emulator.deliveredMessages().count >= 800 }, "\(pool.output)")

        // The primary dies under load; the standby takes over.
        let inFlightBound = 2 * concurrency
        let crashedAt = Date()
        let deliveredAtCrash = emulator.deliveredMessages().count
        try primary.crash()
        try standby.promote()
        let promotedAfter = Date().timeIntervalSince(crashedAt)

        #expect(pool.wait(timeout: 180) == 0, "the pool drained against the promoted standby:\n\(pool.output)")
        let shape = projects > 0 ? "failover, \(projects) projects carried" : "failover"
        print("\(shape): \(deliveredAtCrash) of \(total) delivered at the crash; standby promoted \(String(format: "%.1f", promotedAfter)) s after it; pool drained \(String(format: "%.1f", Date().timeIntervalSince(crashedAt))) s after it")
        let check = try PGConnection(url: standby.url(database: "failover"))
        #expect(try check.query("SELECT count(*) FROM herald.jobs WHERE state = 'completed'").int(0, 0) == total, "0 lost")
        #expect(try check.query("SELECT count(*) FROM herald.dead_letters").int(0, 0) == 0)
        let messages = emulator.deliveredMessages()
        let delivered = messages.compactMap(\.token)
        #expect(Set(delivered).count == total, "every job reached FCM")
        let resent = delivered.count - total
        print("\(shape): \(total) jobs, \(delivered.count) sends, \(resent) resent (at most \(inFlightBound) were in flight)")
        #expect(resent <= inFlightBound, "resent \(resent) > in flight \(inFlightBound)")
        #expect(pool.output.contains("reconnected to PostgreSQL"))
        if projects > 0 {
            // Each under its own project: p7's tokens in herald-project-7, the others' in the pool's.
            let misplaced = messages.filter { message in
                guard let token = message.token, let dash = token.firstIndex(of: "-") else { return true }
                let owner = token[..<dash]
                return message.projectID != (owner == "none" ? "failover" : "herald-project-" + owner.dropFirst())
            }
            #expect(misplaced.isEmpty, "\(misplaced.count) sent under another project, e.g. \(misplaced.prefix(3).map { "\($0.token ?? "") in \($0.projectID)" })")
            #expect(Set(messages.map(\.projectID)).count == projects + 1)
            #expect(try check.query("SELECT count(*) FROM herald.projects WHERE paused_reason IS NOT NULL").int(0, 0) == 0, "a project left paused")
        }
    }
}
