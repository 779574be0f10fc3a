import Foundation
import Postgres
import Queue
import Testing
import TestSupport

/// A rolling upgrade: applications and pools of a recent release keep running while this
/// release's `herald migrate` runs under them, until this release's pools replace them. The last
/// two releases' SQL is kept as it was released in Tests/Fixtures/PreviousRelease and
/// Tests/Fixtures/ReleaseBefore (their migrations, their function and view files, and the
/// statements their workers and admin commands run): a deployment may skip a release.
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

    /// Every statement of `release` that does not prepare on `connection`, with why.
    static func unpreparable(_ release: FixtureRelease, on connection: PGConnection) throws -> [String] {
        let statements = try release.files("SQL").map { ("\($0.name).sql", $0.sql) }
            + release.files("SQL/admin").map { ("admin/\($0.name).sql", $0.sql) }
        var failures: [String] = []
        var prepared = 0
        for (name, sql) in statements {
            guard let body = preparable(sql) else { continue }
            do {
                try connection.execute("PREPARE recent_release AS \(body)")
                try connection.execute("DEALLOCATE recent_release")
                prepared += 1
            } catch {
                failures.append("\(name): \(error)")
            }
        }
        #expect(prepared >= 100, "\(release)'s statements were found (\(prepared) prepared)")
        return failures
    }

    @Test(arguments: FixtureRelease.allCases)
    func everyStatementOfARecentReleasePreparesOnAnUpgradedDatabase(release: FixtureRelease) throws {
        let database = try TestDatabase.fresh(migrated: false)
        defer { database.drop() }
        let c = try database.connect()
        try TestDatabase.migrate(c, as: release)
        let own = try Self.unpreparable(release, on: c)
        #expect(own.isEmpty, "the fixture is \(release)'s own schema:\n\(own.joined(separator: "\n"))")
        let result = try HeraldProcess.run(["migrate"], environment: ["DATABASE_URL": database.url])
        #expect(result.status == 0, "\(result.output)")
        let failures = try Self.unpreparable(release, on: try database.connect())
        #expect(failures.isEmpty, "statements of \(release) that no longer work:\n\(failures.joined(separator: "\n"))")
    }

    // MARK: - The functions a recent release calls keep their OID

    /// The text without its `--` comments.
    static func code(_ sql: String) -> String {
        sql.split(separator: "\n", omittingEmptySubsequences: false)
            .map { line in line.range(of: "--").map { String(line[..<$0.lowerBound]) } ?? String(line) }
            .joined(separator: "\n")
    }

    /// The herald functions `release`'s SQL calls, each with the first file that names it: every
    /// `herald.name(` in its statements and definitions (calls, triggers' EXECUTE FUNCTION). Its
    /// entry points (names without a leading underscore) are called by applications and operators
    /// too, named in no file of it; `Self.dropped` counts them as called.
    static func named(by release: FixtureRelease) throws -> [String: String] {
        var files = try release.files("SQL").map { ("\($0.name).sql", $0.sql) }
        files += try release.files("SQL/admin").map { ("admin/\($0.name).sql", $0.sql) }
        files += try release.files("SQL/functions").map { ("functions/\($0.name).sql", $0.sql) }
        files += try release.files("SQL/views").map { ("views/\($0.name).sql", $0.sql) }
        var named: [String: String] = [:]
        for (file, sql) in files {
            // A definition's own CREATE OR REPLACE FUNCTION herald.name( is no call.
            for match in code(sql).matches(of: /(?i)(FUNCTION\s+)?herald\.(\w+)\s*\(/) where match.1 == nil && named[String(match.2)] == nil {
                named[String(match.2)] = file
            }
        }
        return named
    }

    /// A herald function as a caller that resolved it holds it: by its OID, with its language.
    struct Function {
        var signature: String
        var name: String
        var language: String
    }

    /// Every herald function on `connection`, by OID.
    static func functions(_ connection: PGConnection) throws -> [Int: Function] {
        let rows = try connection.query("""
            SELECT p.oid::int8, 'herald.' || p.proname || '(' || pg_get_function_identity_arguments(p.oid) || ')',
                   p.proname::text, l.lanname::text
            FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
            WHERE p.pronamespace = 'herald'::regnamespace
            """)
        var functions: [Int: Function] = [:]
        for row in 0..<rows.rowCount { functions[rows.int(row, 0)!] = Function(signature: rows[row, 1]!, name: rows[row, 2]!, language: rows[row, 3]!) }
        return functions
    }

    /// The functions of `before` (a database at `release`'s schema) that `release` calls and that
    /// a call in flight no longer finds as it resolved them in `after` (the same database after
    /// this release's migrate), each said as the error that call meets. A function keeps its OID
    /// when it is replaced (CREATE OR REPLACE) or renamed; dropped and created again it has a new
    /// one, and a caller that resolved the name before the migrate committed fails with "cache
    /// lookup failed for function N". A call in flight also keeps the handler of the function's
    /// language, which then compiles the new text: a body in another language fails it.
    static func lost(_ release: FixtureRelease, before: [Int: Function], after: [Int: Function]) throws -> [String] {
        let named = try Self.named(by: release)
        return before.sorted { $0.value.signature < $1.value.signature }.compactMap { oid, function in
            let now = after[oid]
            guard now == nil || now?.language != function.language else { return nil }
            let caller: String
            if let file = named[function.name] {
                caller = "\(release)'s \(file) calls it"
            } else if !function.name.hasPrefix("_") {
                caller = "it is an entry point of \(release) (applications, operators, its pool)"
            } else {
                return nil  // an internal helper nothing of that release calls any more
            }
            if let now {
                return """
                    \(function.signature) is written in \(now.language) by this release, in \(function.language) by \(release), and \
                    \(caller): a call in flight when the migrate commits compiles the new text as \(function.language) and fails
                    """
            }
            return """
                \(function.signature) is dropped by this release's herald migrate, and \(caller): a call that resolved it \
                before the migrate committed fails with "cache lookup failed for function \(oid)"
                """
        }
    }

    /// Pairs of herald functions of one name that both take some call: a call of `n` positional
    /// arguments of the same types that each accepts (with its defaults). PostgreSQL refuses such
    /// a call ("function ... is not unique"), so an old signature kept beside a new one under the
    /// same name breaks every caller that leaves out what they differ in.
    static func ambiguousOverloads(_ connection: PGConnection) throws -> [String] {
        let rows = try connection.query("""
            SELECT 'herald.' || a.proname || '(' || pg_get_function_identity_arguments(a.oid) || ')',
                   'herald.' || b.proname || '(' || pg_get_function_identity_arguments(b.oid) || ')'
            FROM pg_proc a JOIN pg_proc b ON b.pronamespace = a.pronamespace AND b.proname = a.proname AND b.oid > a.oid
            WHERE a.pronamespace = 'herald'::regnamespace
              AND EXISTS (SELECT 1
                          FROM generate_series(greatest(a.pronargs - a.pronargdefaults, b.pronargs - b.pronargdefaults)::int,
                                               least(a.pronargs, b.pronargs)::int) AS n
                          WHERE (a.proargtypes::oid[])[0:n - 1] = (b.proargtypes::oid[])[0:n - 1])
            ORDER BY 1, 2
            """)
        return (0..<rows.rowCount).map { row in
            "\(rows[row, 0]!) and \(rows[row, 1]!) both take the same call: rename the old one aside (docs/sql-layout.md)"
        }
    }

    @Test(arguments: FixtureRelease.allCases)
    func everyFunctionARecentReleaseCallsKeepsItsOIDAndLanguageThroughTheMigrate(release: FixtureRelease) throws {
        let database = try TestDatabase.fresh(migrated: false)
        defer { database.drop() }
        let c = try database.connect()
        try TestDatabase.migrate(c, as: release)
        let before = try Self.functions(c)
        #expect(before.values.contains { $0.name == "enqueue" } && before.count > 80, "\(release)'s functions were read")

        var warnings: [String] = []
        try Migrator.apply(c) { warnings.append($0) }
        // The migrations released with another text (280, 290) are recognised, none run again.
        #expect(warnings.isEmpty, "\(warnings)")
        let lost = try Self.lost(release, before: before, after: try Self.functions(c))
        #expect(lost.isEmpty, """
            \(lost.count) function(s) \(release) calls are lost to its calls in flight:
            \(lost.joined(separator: "\n"))
            Keep each with CREATE OR REPLACE in its language (the OID stays), or, for a new signature, rename the \
            old one aside in the migration instead of dropping it (docs/sql-layout.md, "Changing a function's signature").
            """)
        let ambiguous = try Self.ambiguousOverloads(c)
        #expect(ambiguous.isEmpty, "\(ambiguous.joined(separator: "\n"))")
    }

    @Test func aFreshDatabaseHasNoTwoFunctionsThatTakeTheSameCall() throws {
        let database = try TestDatabase.fresh()
        defer { database.drop() }
        #expect(try Self.ambiguousOverloads(try database.connect()).isEmpty)
    }

    // MARK: - The migrate is never a pool's deadlock

    /// A pool's claim takes its FCM project's tokens (herald.project_rates) before it updates
    /// herald.jobs. A migrate that held herald.jobs while it waited for herald.project_rates met
    /// such a claim in a deadlock, and when the claim had waited longer, PostgreSQL chose the
    /// claim to fail ("deadlock detected" in the pool's log). Here: the migrate is kept waiting
    /// for herald.campaigns (another transaction writes it) after it could take herald.jobs; a
    /// transaction holding herald.project_rates then inserts a job; the campaigns' writer commits.
    /// The insert goes through, and so does the migrate.
    @Test func aTransactionHoldingATableTheMigrateWantsIsNeverItsDeadlockVictim() throws {
        let database = try TestDatabase.fresh()
        defer { database.drop() }
        let admin = try database.connect()
        // A definition is due, so the migrate locks the tables.
        try admin.execute("UPDATE herald.schema_definitions SET checksum = 'older' WHERE name = 'functions/_burst'")
        let campaigns = try database.connect(), claim = try database.connect()
        try campaigns.execute("BEGIN; LOCK TABLE herald.campaigns IN ROW EXCLUSIVE MODE")
        try claim.execute("BEGIN; LOCK TABLE herald.project_rates IN ROW EXCLUSIVE MODE")
        let claimPID = try claim.query("SELECT pg_backend_pid()").int(0, 0)!

        let migrate = try HeraldProcess(["migrate"], environment: ["DATABASE_URL": database.url])
        try migrate.start()
        defer { migrate.signal(SIGKILL); migrate.wait(timeout: 10) }
        /// Whether a session waits for a lock on a herald table (`table`, or any; `pid`'s, or anyone's).
        func waiting(on table: String?, pid: Int? = nil) -> Bool {
            (try? admin.query("""
                SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
                WHERE NOT l.granted AND c.relnamespace = 'herald'::regnamespace
                  AND ($1::text IS NULL OR c.relname = $1::text) AND ($2::int IS NULL OR l.pid = $2::int)
                """, [table.map { .text($0) }, pid.map { .int($0) }]).int(0, 0) ?? 0) ?? 0 > 0
        }
        #expect(waitUntil(timeout: 30) { waiting(on: "campaigns") }, "the migrate waits for herald.campaigns: \(migrate.output)")
        // Waiting, it holds no lock on herald's tables that a write waits for (the catalog's reads
        // of the views hold ACCESS SHARE on their tables; the records are its own).
        let held = try admin.query("""
            SELECT coalesce(string_agg(DISTINCT c.relname || ' ' || l.mode, ', '), '') FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
            WHERE l.granted AND l.mode <> 'AccessShareLock' AND c.relnamespace = 'herald'::regnamespace AND c.relkind IN ('r', 'p')
              AND c.relname NOT IN ('schema_migrations', 'schema_definitions')
              AND l.pid IN (SELECT w.pid FROM pg_locks w JOIN pg_class t ON t.oid = w.relation
                            WHERE NOT w.granted AND t.relname = 'campaigns' AND t.relnamespace = 'herald'::regnamespace)
            """)[0, 0] ?? ""
        #expect(held.isEmpty, "the migrate waits for herald.campaigns holding \(held)")

        // The claim's insert: it waits for the migrate while the migrate holds herald.jobs (or, as
        // its triggers read campaigns, behind the migrate's request for them).
        let inserted = UnsafeSendableBox<String?>(nil)
        let done = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            do {
                try claim.query("INSERT INTO herald.jobs (message) VALUES ('{\"token\": \"t\", \"data\": {\"k\": \"v\"}}')")
                inserted.mutate { $0 = "inserted" }
            } catch {
                inserted.mutate { $0 = "\(error)" }
            }
            done.signal()
        }
        #expect(waitUntil(timeout: 10) { inserted.value != nil || waiting(on: nil, pid: claimPID) })
        try campaigns.execute("COMMIT")
        #expect(done.wait(timeout: .now() + 30) == .success, "the insert ends")
        #expect(inserted.value == "inserted", "the transaction holding herald.project_rates: \(inserted.value ?? "still waiting")")
        try? claim.execute("COMMIT")
        #expect(migrate.wait(timeout: 60) == 0, "\(migrate.output)")
        #expect(try admin.query("SELECT herald._burst(100)")[0, 0] == "10", "the migrate applied the due definition")
    }

    // MARK: - Applications and the release's pool through the migrate

    /// One way an application calls Herald, as it calls it: its statement, the parameters of the
    /// `n`th call on `who` connections (each call to tokens of its own), and what one call adds
    /// (jobs, topic subscriptions, tokens).
    struct Call: Sendable {
        var name: String
        var sql: String
        var parameters: @Sendable (_ who: String, _ n: Int) -> [PGValue?]
        var jobs = 0, subscriptions = 0, tokens = 0

        /// Several rows of one statement call the function several times, as an application's
        /// `SELECT herald.enqueue(...) FROM unnest(...)` does: a statement that resolved a dropped
        /// function before the migrate committed meets it again after the commit.
        static let all: [Call] = [
            Call(name: "herald.enqueue", sql: """
                SELECT herald.enqueue(jsonb_build_object('token', $1::text || '-e' || g, 'notification', jsonb_build_object('title', 'hi')))
                FROM generate_series(1, 2) AS g
                """, parameters: { who, n in [.text("\(who)-\(n)")] }, jobs: 2),
            Call(name: "herald.enqueue_multicast", sql: """
                SELECT herald.enqueue_multicast('{"data": {"k": "v"}}'::jsonb, ARRAY[$1::text || '-m1', $1::text || '-m2'])
                """, parameters: { who, n in [.text("\(who)-\(n)")] }, jobs: 2),
            Call(name: "INSERT INTO herald.jobs", sql: """
                INSERT INTO herald.jobs (message)
                SELECT jsonb_build_object('token', $1::text || '-i' || g, 'data', jsonb_build_object('k', 'v'))
                FROM generate_series(1, 2) AS g
                """, parameters: { who, n in [.text("\(who)-\(n)")] }, jobs: 2),
            Call(name: "herald.subscribe", sql: """
                SELECT herald.subscribe('upgrade-' || $1::text, ARRAY[$2::text || '-s1', $2::text || '-s2'])
                """, parameters: { who, n in [.text(who), .text("\(who)-\(n)")] }, subscriptions: 2),
            Call(name: "herald.touch_token", sql: """
                SELECT herald.touch_token($1::text || '-t' || g, 'android') FROM generate_series(1, 2) AS g
                """, parameters: { who, n in [.text("\(who)-\(n)")] }, tokens: 2),
        ]
    }

    /// What one producer did: its calls (each with when it started and ended) and their errors.
    struct Produced {
        var calls = 0, jobs = 0, subscriptions = 0, tokens = 0
        var spans: [(start: Double, end: Double)] = []
        var errors: [String] = []

        /// Calls that were under way while the migrate ran.
        func during(_ migrate: (start: Double, end: Double)) -> Int {
            spans.filter { $0.start < migrate.end && $0.end > migrate.start }.count
        }
    }

    /// The connection kinds producers use: `fresh` opens a connection for every call (a cron job,
    /// a short-lived request); `long-lived` keeps one, whose statements are prepared once and run
    /// again (PGConnection prepares each text once), as a pooled web application holds them.
    static let connectionKinds = ["fresh", "long-lived"]

    /// One producer: `call` in a loop on connections of `kind`. Each call of the application
    /// has producers of its own, so each one is under way when the migrate commits.
    static func produce(_ call: Call, kind: String, url: String, stop: UnsafeSendableBox<Bool>, into produced: UnsafeSendableBox<Produced>) {
        var held: PGConnection?
        var n = 0
        while !stop.value {
            n += 1
            let start = Date().timeIntervalSince1970
            do {
                let c: PGConnection
                if kind == "fresh" {
                    c = try PGConnection(url: url)
                } else if let held {
                    c = held
                } else {
                    c = try PGConnection(url: url)
                    held = c
                }
                try c.query(call.sql, call.parameters(kind, n))
                produced.mutate {
                    $0.jobs += call.jobs
                    $0.subscriptions += call.subscriptions
                    $0.tokens += call.tokens
                }
            } catch {
                produced.mutate { $0.errors.append("\(call.name): \(error)") }
            }
            let end = Date().timeIntervalSince1970
            produced.mutate {
                $0.calls += 1
                $0.spans.append((start, end))
            }
            Thread.sleep(forTimeInterval: 0.01)
        }
    }

    /// The statements `release`'s worker runs, in the order its store thread runs them, recording
    /// each job it claims as sent (fcm_message_name `old-release/ID`). The claim and the quota
    /// pause are named claim_jobs.sql and pause_project.sql in the release before the last.
    static func runWorker(of release: FixtureRelease, url: String, stop: UnsafeSendableBox<Bool>,
                          completed: UnsafeSendableBox<Set<Int>>, errors: UnsafeSendableBox<[String]>) throws {
        let statements = Dictionary(uniqueKeysWithValues: try release.files("SQL").map { ($0.name, $0.sql) })
        let claimSQL = try #require(statements["claim_due_jobs"] ?? statements["claim_jobs"])
        let pauseSQL = try #require(statements["hold_fcm_project"] ?? statements["pause_project"])
        let recordSQL = try #require(statements["record_outcomes"]), extendSQL = try #require(statements["extend_leases"])
        let promoteSQL = try #require(statements["promote_due_jobs"]), leaderSQL = try #require(statements["take_leadership"])
        do {
            let c = try PGConnection(url: url)
            let worker = "old-host:1:\(release.rawValue)"
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
                    completed.mutate { $0.formUnion(ids) }
                } catch {
                    errors.mutate { $0.append("\(error)") }
                    Thread.sleep(forTimeInterval: 0.1)
                }
            }
        } catch {
            errors.mutate { $0.append("connect: \(error)") }
        }
    }

    /// Producers on fresh and on long-lived connections call every way in of the application
    /// (enqueue, enqueue_multicast, a plain INSERT, subscribe, touch_token) while the release's
    /// worker works and this release's `herald migrate` runs under them; then this release's pool
    /// joins and the release's worker stops. No call fails, every job is delivered once, every
    /// subscription is made and every token registered.
    @Test(arguments: FixtureRelease.allCases)
    func applicationsAndTheReleasesPoolGoOnThroughTheMigrateUntilThisReleasesPoolReplacesIt(release: FixtureRelease) throws {
        let stack = try WorkerStack(latencyMilliseconds: 5)
        defer { stack.close() }
        // The stack's database as the release left it.
        let admin = try stack.database.connect()
        try admin.execute("DROP SCHEMA herald CASCADE")
        try TestDatabase.migrate(admin, as: release)

        let stop = UnsafeSendableBox(false), stopProducers = UnsafeSendableBox(false)
        let oldErrors = UnsafeSendableBox<[String]>([])
        let oldCompleted = UnsafeSendableBox<Set<Int>>([])
        let producers = Self.connectionKinds.flatMap { kind in Call.all.map { (kind: kind, call: $0, box: UnsafeSendableBox(Produced())) } }
        let url = stack.database.url
        let group = DispatchGroup()
        DispatchQueue.global().async(group: group) {
            do {
                try Self.runWorker(of: release, url: url, stop: stop, completed: oldCompleted, errors: oldErrors)
            } catch {
                oldErrors.mutate { $0.append("\(error)") }
            }
        }
        for producer in producers {
            DispatchQueue.global().async(group: group) {
                Self.produce(producer.call, kind: producer.kind, url: url, stop: stopProducers, into: producer.box)
            }
        }
        defer {
            stop.mutate { $0 = true }
            stopProducers.mutate { $0 = true }
            _ = group.wait(timeout: .now() + 30)
        }
        /// Waits until every producer made `more` calls beyond those it had made when asked.
        func producersGoOn(_ more: Int) -> Bool {
            let made = producers.map { $0.box.value.calls }
            return waitUntil(timeout: 30) { zip(producers, made).allSatisfy { $0.0.box.value.calls >= $0.1 + more } }
        }

        #expect(waitUntil(timeout: 30) { oldCompleted.value.count >= 200 }, "\(release)'s worker works: \(oldErrors.value)")
        #expect(producersGoOn(10), "the producers call")
        // This release's migrate, under the running worker and producers.
        let migrateStart = Date().timeIntervalSince1970
        let migrated = try HeraldProcess.run(["migrate"], environment: ["DATABASE_URL": url])
        let migrateEnd = Date().timeIntervalSince1970
        #expect(migrated.status == 0, "\(migrated.output)")
        let schemaChanged = !migrated.output.contains("up to date")
        let afterMigrate = oldCompleted.value.count
        #expect(waitUntil(timeout: 30) { oldCompleted.value.count >= afterMigrate + 300 }, "\(release)'s worker goes on: \(oldErrors.value)")
        #expect(producersGoOn(10), "the producers go on")

        // This release's pool joins, then the release's worker stops; the producers a little later.
        let pool = try HeraldProcess(["work", "--processes", "1", "--poll-interval", "0.2"], environment: stack.environment)
        try pool.start()
        defer { pool.signal(SIGKILL); pool.wait(timeout: 10) }
        #expect(waitUntil(timeout: 60) { stack.emulator.deliveredMessages().count >= 200 }, "\(pool.output)")
        stop.mutate { $0 = true }
        #expect(producersGoOn(5))
        stopProducers.mutate { $0 = true }
        #expect(group.wait(timeout: .now() + 30) == .success)
        #expect(oldErrors.value.isEmpty, "errors of \(release)'s worker statements:\n\(oldErrors.value.prefix(5).joined(separator: "\n"))")

        var enqueued = 0, subscriptions = 0, tokens = 0
        for kind in Self.connectionKinds {
            let mine = producers.filter { $0.kind == kind }.map { (call: $0.call, produced: $0.box.value) }
            var calls = 0, failed = 0, during = 0
            for (call, p) in mine {
                enqueued += p.jobs
                subscriptions += p.subscriptions
                tokens += p.tokens
                calls += p.calls
                failed += p.errors.count
                during += p.during((migrateStart, migrateEnd))
                #expect(p.errors.isEmpty, "\(p.errors.count) of \(p.calls) calls of \(call.name) on \(kind) connections failed:\n\(p.errors.prefix(3).joined(separator: "\n"))")
                // The migrate held its transaction long enough for a call of each kind to wait on
                // it (when it had something to apply): the calls that met its commit were made.
                if schemaChanged {
                    #expect(p.during((migrateStart, migrateEnd)) > 0, "no call of \(call.name) on \(kind) connections was under way during the migrate")
                }
            }
            print("upgrade from \(release), \(kind) connections: \(calls) calls, \(failed) failed, \(during) under way during the migrate")
        }

        // Every job delivered once: by the release's worker or by this release's pool.
        #expect(waitUntil(timeout: 120) {
            (try? stack.count("SELECT count(*) FROM herald.jobs WHERE state <> 'completed'")) == 0
        }, "\(pool.output)")
        let total = try stack.count("SELECT count(*) FROM herald.jobs")
        #expect(total == enqueued)
        let byOld = try stack.count("SELECT count(*) FROM herald.jobs WHERE fcm_message_name LIKE 'old-release/%'")
        #expect(byOld == oldCompleted.value.count)
        let atFCM = stack.emulator.deliveredMessages().compactMap(\.token)
        #expect(Set(atFCM).count == atFCM.count, "no job sent twice")
        #expect(byOld + atFCM.count == total, "\(byOld) recorded by \(release)'s worker, \(atFCM.count) sent by this release's pool, of \(total)")
        // Every subscription made at FCM, every token registered.
        let subscribed = waitUntil(timeout: 120) {
            (try? stack.count("SELECT count(*) FROM herald.topic_subscriptions WHERE state = 'subscribed'")) == subscriptions
        }
        let unsubscribed = try stack.count("SELECT count(*) FROM herald.topic_subscriptions WHERE state <> 'subscribed'")
        #expect(subscribed, "\(unsubscribed) of \(subscriptions) subscriptions not made")
        #expect(try stack.count("SELECT count(*) FROM herald.device_tokens") == tokens)
        print("upgrade from \(release): \(total) jobs enqueued through the migrate (\(migrated.output.split(separator: "\n").last ?? "")); "
              + "\(byOld) completed by its worker's statements, \(atFCM.count) by this release's pool; \(subscriptions) subscriptions, \(tokens) tokens")
        pool.signal(SIGTERM)
        #expect(pool.wait(timeout: 60) == 0, "\(pool.output)")
    }
}
