import Foundation
import Postgres
import Testing
import TestSupport

/// A rolling upgrade: pools of the previous release keep running while this release's
/// `herald migrate` runs under them, until this release's pools replace them. The previous
/// release's SQL is kept as it was released in Tests/Fixtures/PreviousRelease (its migrations,
/// its function and view files, and the statements its workers and admin commands run).
@Suite(.serialized) struct UpgradeTests {
    /// A statement file's text without its comment lines, when it is one statement PREPARE takes.
    static func preparable(_ sql: String) -> String? {
        let body = sql.split(separator: "\n", omittingEmptySubsequences: false)
            .filter { !$0.trimmingCharacters(in: .whitespaces).hasPrefix("--") }
            .joined(separator: "\n").trimmingCharacters(in: .whitespacesAndNewlines)
        let first = body.prefix { !$0.isWhitespace && $0 != "(" }.uppercased()
        guard ["SELECT", "WITH", "INSERT", "UPDATE", "DELETE", "VALUES"].contains(first) else { return nil }
        return body.hasSuffix(";") ? String(body.dropLast()) : body
    }

    /// Every statement of the previous release that does not prepare on `connection`, with why.
    static func unpreparable(on connection: PGConnection) throws -> [String] {
        let statements = try TestDatabase.previousReleaseFiles("SQL").map { ("\($0.name).sql", $0.sql) }
            + TestDatabase.previousReleaseFiles("SQL/admin").map { ("admin/\($0.name).sql", $0.sql) }
        var failures: [String] = []
        var prepared = 0
        for (name, sql) in statements {
            guard let body = preparable(sql) else { continue }
            do {
                try connection.execute("PREPARE previous_release AS \(body)")
                try connection.execute("DEALLOCATE previous_release")
                prepared += 1
            } catch {
                failures.append("\(name): \(error)")
            }
        }
        #expect(prepared >= 100, "the previous release's statements were found (\(prepared) prepared)")
        return failures
    }

    @Test func everyStatementOfThePreviousReleasePreparesOnAnUpgradedDatabase() throws {
        let database = try TestDatabase.fresh(migrated: false)
        defer { database.drop() }
        let c = try database.connect()
        try TestDatabase.migrateAsPreviousRelease(c)
        #expect(try Self.unpreparable(on: c).isEmpty, "the fixture is the previous release's own schema")
        let result = try HeraldProcess.run(["migrate"], environment: ["DATABASE_URL": database.url])
        #expect(result.status == 0, "\(result.output)")
        let failures = try Self.unpreparable(on: try database.connect())
        #expect(failures.isEmpty, "statements of the previous release that no longer work:\n\(failures.joined(separator: "\n"))")
    }

    @Test func aPreviousReleasesWorkerGoesOnThroughTheMigrateUntilThisReleasesPoolReplacesIt() throws {
        let stack = try WorkerStack(latencyMilliseconds: 5)
        defer { stack.close() }
        // The stack's database as the previous release left it.
        let admin = try stack.database.connect()
        try admin.execute("DROP SCHEMA herald CASCADE")
        try TestDatabase.migrateAsPreviousRelease(admin)
        let statements = Dictionary(uniqueKeysWithValues: try TestDatabase.previousReleaseFiles("SQL").map { ($0.name, $0.sql) })
        let claimSQL = try #require(statements["claim_jobs"]), recordSQL = try #require(statements["record_outcomes"])
        let extendSQL = try #require(statements["extend_leases"]), promoteSQL = try #require(statements["promote_due_jobs"])
        let leaderSQL = try #require(statements["take_leadership"]), pauseSQL = try #require(statements["pause_project"])

        let stop = UnsafeSendableBox(false)
        let oldErrors = UnsafeSendableBox<[String]>([])
        let oldCompleted = UnsafeSendableBox<Set<Int>>([])
        let enqueued = UnsafeSendableBox(0)
        let url = stack.database.url
        let group = DispatchGroup()
        // The previous release's worker: its own statements, in the order its store thread runs
        // them, recording each job it claims as sent.
        DispatchQueue.global().async(group: group) {
            do {
                let c = try PGConnection(url: url)
                let worker = "old-host:1:previous"
                while !stop.value {
                    do {
                        try c.query(leaderSQL, [.text("upgrade-check"), .text(worker), .double(15)])
                        try c.query(promoteSQL, [.int(100)])
                        try c.query(pauseSQL, [.text("another-project"), .double(0.001), .text("upgrade check")])
                        let claimed = try c.query(claimSQL, [nil, .int(20), .double(30), .text(worker), .text("e2e-project"),
                                                             .double(0), nil, nil, nil])
                        let idColumn = try claimed.column("id"), attemptColumn = try claimed.column("attempt")
                        let ids = (0..<claimed.rowCount).compactMap { claimed.int($0, idColumn) }
                        if ids.isEmpty {
                            Thread.sleep(forTimeInterval: 0.05)
                            continue
                        }
                        try c.query(extendSQL, [.text("{" + ids.map(String.init).joined(separator: ",") + "}"), .text(worker), .double(30)])
                        let rows = (0..<claimed.rowCount).compactMap { row -> String? in
                            guard let id = claimed.int(row, idColumn), let attempt = claimed.int(row, attemptColumn) else { return nil }
                            return #"{"id": \#(id), "att": \#(attempt), "a": "completed", "name": "old-release/\#(id)"}"#
                        }
                        try c.query(recordSQL, [.text("[" + rows.joined(separator: ",") + "]"), .text(worker), .double(86_400)])
                        oldCompleted.mutate { $0.formUnion(ids) }
                    } catch {
                        oldErrors.mutate { $0.append("\(error)") }
                        Thread.sleep(forTimeInterval: 0.1)
                    }
                }
            } catch {
                oldErrors.mutate { $0.append("connect: \(error)") }
            }
        }
        // Producers: herald.enqueue and INSERT ... SELECT throughout.
        DispatchQueue.global().async(group: group) {
            do {
                let c = try PGConnection(url: url)
                var n = 0
                while !stop.value {
                    n += 1
                    do {
                        try c.query("SELECT herald.enqueue(jsonb_build_object('token', 'up-' || $1::text, 'notification', jsonb_build_object('title', 'hi')))",
                                    [.int(n)])
                        try c.query("""
                            INSERT INTO herald.jobs (message)
                            SELECT jsonb_build_object('token', 'up-' || $1::text || '-' || g, 'data', jsonb_build_object('k', 'v'))
                            FROM generate_series(1, 4) AS g
                            """, [.int(n)])
                        enqueued.mutate { $0 += 5 }
                    } catch {
                        oldErrors.mutate { $0.append("producer: \(error)") }
                    }
                    Thread.sleep(forTimeInterval: 0.01)
                }
            } catch {
                oldErrors.mutate { $0.append("producer connect: \(error)") }
            }
        }
        defer {
            stop.mutate { $0 = true }
            _ = group.wait(timeout: .now() + 30)
        }

        #expect(waitUntil(timeout: 30) { oldCompleted.value.count >= 200 }, "the previous release's worker works: \(oldErrors.value)")
        // This release's migrate, under the running worker and producers.
        let migrated = try HeraldProcess.run(["migrate"], environment: ["DATABASE_URL": url])
        #expect(migrated.status == 0, "\(migrated.output)")
        #expect(migrated.output.contains("applied 270_leader_sessions"), "\(migrated.output)")
        let afterMigrate = oldCompleted.value.count
        #expect(waitUntil(timeout: 30) { oldCompleted.value.count >= afterMigrate + 500 }, "the previous release's worker goes on: \(oldErrors.value)")

        // This release's pool joins, then the previous release's worker stops.
        let pool = try HeraldProcess(["work", "--processes", "1", "--poll-interval", "0.2"], environment: stack.environment)
        try pool.start()
        defer { pool.signal(SIGKILL); pool.wait(timeout: 10) }
        #expect(waitUntil(timeout: 60) { stack.emulator.deliveredMessages().count >= 200 }, "\(pool.output)")
        stop.mutate { $0 = true }
        #expect(group.wait(timeout: .now() + 30) == .success)
        #expect(oldErrors.value.isEmpty, "errors of the previous release's statements or of producers:\n\(oldErrors.value.prefix(5).joined(separator: "\n"))")

        // Every job delivered once: by the previous release's worker or by this release's pool.
        #expect(waitUntil(timeout: 120) {
            (try? stack.count("SELECT count(*) FROM herald.jobs WHERE state <> 'completed'")) == 0
        }, "\(pool.output)")
        let total = try stack.count("SELECT count(*) FROM herald.jobs")
        #expect(total == enqueued.value)
        let byOld = try stack.count("SELECT count(*) FROM herald.jobs WHERE fcm_message_name LIKE 'old-release/%'")
        #expect(byOld == oldCompleted.value.count)
        let atFCM = stack.emulator.deliveredMessages().compactMap(\.token)
        #expect(Set(atFCM).count == atFCM.count, "no job sent twice")
        #expect(byOld + atFCM.count == total, "\(byOld) recorded by the previous release, \(atFCM.count) sent by this one, of \(total)")
        print("upgrade: \(total) jobs enqueued through the migrate; \(byOld) completed by the previous release's statements, \(atFCM.count) by this release's pool; 0 errors")
        pool.signal(SIGTERM)
        #expect(pool.wait(timeout: 60) == 0, "\(pool.output)")
    }
}
