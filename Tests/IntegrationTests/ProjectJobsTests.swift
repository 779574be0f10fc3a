import Emulator
import Foundation
import JSON
import Postgres
import Testing
import TestSupport

/// Jobs addressed to a project of the registry: each pool started with `--project NAME` sends
/// only that project's jobs, with that project's key, to that project's URL; the jobs of no
/// project stay with the pool's own credentials.
@Suite(.serialized) struct ProjectJobsTests {
    /// A stack with two more Firebase projects on the same emulator, registered as alpha and beta.
    struct Projects {
        let stack: WorkerStack
        let alphaKey: String
        let betaKey: String

        init(scenario: Scenario = Scenario()) throws {
            stack = try WorkerStack(scenario: scenario)
            alphaKey = NSTemporaryDirectory() + "herald-alpha-\(UUID().uuidString).json"
            betaKey = NSTemporaryDirectory() + "herald-beta-\(UUID().uuidString).json"
            try stack.emulator.writeServiceAccount(to: alphaKey, projectID: "alpha-fcm")
            try stack.emulator.writeServiceAccount(to: betaKey, projectID: "beta-fcm")
            try register("alpha", fcm: "alpha-fcm", credentials: alphaKey)
            try register("beta", fcm: "beta-fcm", credentials: betaKey)
        }

        func register(_ name: String, fcm: String, credentials: String) throws {
            try stack.connection.query("INSERT INTO herald.projects (name, fcm_project_id, credentials) VALUES ($1, $2, $3)",
                                       [.text(name), .text(fcm), .text(credentials)])
        }

        /// `n` jobs to tokens `prefix1...prefixN` for `project` (nil: no project).
        func enqueue(_ n: Int, prefix: String, project: String?) throws {
            try stack.connection.query("""
                INSERT INTO herald.jobs (message, project)
                SELECT jsonb_build_object('token', $1::text || g, 'notification', jsonb_build_object('title', 'Hi', 'body', 'n' || g)), $3
                FROM generate_series(1, $2::int) AS g
                """, [.text(prefix), .int(n), project.map { .text($0) }])
        }

        /// `herald work ARGUMENTS` started against the stack, running until `stop`.
        func startPool(_ arguments: [String]) throws -> HeraldProcess {
            let pool = try HeraldProcess(["work"] + arguments, environment: stack.environment)
            try pool.start()
            return pool
        }

        func stop(_ pool: HeraldProcess) {
            pool.signal(SIGTERM)
            _ = pool.wait(timeout: 60)
        }

        func close() {
            stack.close()
            try? FileManager.default.removeItem(atPath: alphaKey)
            try? FileManager.default.removeItem(atPath: betaKey)
        }
    }

    @Test func eachProjectsJobsGoOutWithItsOwnKeyToItsOwnProject() throws {
        let p = try Projects()
        defer { p.close() }
        try p.enqueue(300, prefix: "a-", project: "alpha")
        try p.enqueue(300, prefix: "b-", project: "beta")
        try p.enqueue(300, prefix: "n-", project: nil)

        // A pool for alpha drains alpha's jobs and leaves everyone else's untouched.
        let alpha = try p.stack.work(["--project", "alpha", "--drain", "--processes", "1", "--poll-interval", "0.2"])
        #expect(alpha.status == 0, "\(alpha.output)")
        #expect(try p.stack.count("SELECT count(*) FROM herald.jobs WHERE project = 'alpha' AND state = 'completed'") == 300)
        #expect(try p.stack.count("SELECT count(*) FROM herald.jobs WHERE project IS DISTINCT FROM 'alpha' AND state <> 'available'") == 0)
        // Then beta's pool, then the pool of no project.
        let beta = try p.stack.work(["--project", "beta", "--drain", "--processes", "2", "--poll-interval", "0.2"])
        #expect(beta.status == 0, "\(beta.output)")
        let plain = try p.stack.work(["--drain", "--processes", "1", "--poll-interval", "0.2"])
        #expect(plain.status == 0, "\(plain.output)")
        #expect(try p.stack.count("SELECT count(*) FROM herald.jobs WHERE state = 'completed'") == 900)

        // At FCM's side: every message once, in its own project, and not one request refused
        // for a key of another project (403 PERMISSION_DENIED).
        let delivered = p.stack.emulator.deliveredMessages()
        #expect(delivered.count == 900)
        var wrong: [String] = []
        for message in delivered {
            let token = message.token ?? ""
            let expected = token.hasPrefix("a-") ? "alpha-fcm" : token.hasPrefix("b-") ? "beta-fcm" : "e2e-project"
            if message.projectID != expected { wrong.append("\(token) in \(message.projectID)") }
        }
        #expect(wrong.isEmpty, "sent to the wrong project: \(wrong.prefix(5))")
        #expect(Set(delivered.compactMap(\.token)).count == 900)
        #expect(p.stack.emulator.statistics["by_status"]?["403"]?.intValue ?? 0 == 0)
    }

    @Test func aPoolsMetricsShowEachProjectsCountsAndTheySumToWhatEachFCMProjectReceived() throws {
        let p = try Projects()
        defer { p.close() }
        try p.enqueue(120, prefix: "a-", project: "alpha")
        try p.enqueue(80, prefix: "b-", project: "beta")
        try p.enqueue(3, prefix: "fail-invalid-b", project: "beta")
        try p.enqueue(50, prefix: "n-", project: nil)
        // Workers of one project each, the old shape on request: every series of a worker is
        // labelled with its project (a worker carrying many labels its answers, quota answers,
        // snoozes, rate and pause only: SharedWorkerTests).
        let pool = try RunningPool(p.stack, arguments: ["--processes", "1", "--poll-interval", "0.2", "--admin-address", "127.0.0.1:0"],
                                   environment: ["HERALD_WORKERS_PER_PROJECT": "1"])
        defer { _ = pool.stop() }
        #expect(waitUntil(timeout: 120) {
            (try? p.stack.count("SELECT count(*) FROM herald.jobs WHERE state NOT IN ('completed', 'discarded')")) == 0
        }, "\(pool.process.output)")
        // Counted right after each commit: wait until the page has every delivery.
        #expect(waitUntil(timeout: 10) { (try? pool.metrics().sum("herald_messages_total", ["outcome": "completed"])) == 250 })
        let page = try pool.metrics()
        func of(_ project: String?, _ name: String, _ labels: [String: String] = [:]) -> Int {
            Self.sum(page, project: project, name, labels)
        }
        let byFCMProject = ["alpha": "alpha-fcm", "beta": "beta-fcm"]
        // At FCM's side: 253 requests, of which beta's 3 refused (INVALID_ARGUMENT, dead at once), the rest delivered.
        let stats = p.stack.emulator.statistics
        let refused = stats["by_error"]?.objectValue ?? JSONObject()
        #expect(stats["requests"]?.intValue == 253 && refused.keys.sorted() == ["INVALID_ARGUMENT"] && refused["INVALID_ARGUMENT"]?.intValue == 3)
        for project in [nil, "alpha", "beta"] as [String?] {
            let fcm = project.map { byFCMProject[$0]! } ?? "e2e-project"
            let name = project ?? "(none)"
            let requests = Self.delivered(p, fcm) + (project == "beta" ? 3 : 0)
            #expect(of(project, "herald_messages_total", ["outcome": "completed"]) == Self.delivered(p, fcm), "\(name): completed = delivered at FCM")
            #expect(of(project, "herald_fcm_requests_total") == requests, "\(name): requests = what FCM received for the project")
            #expect(of(project, "herald_fcm_requests_total", ["code": "OK"]) == Self.delivered(p, fcm), "\(name)")
            #expect(of(project, "herald_fcm_request_duration_seconds_count") == requests, "\(name)")
            #expect(of(project, "herald_delivery_latency_seconds_count") == Self.delivered(p, fcm), "\(name)")
            #expect(of(project, "herald_messages_total", ["outcome": "dead"])
                    == (try p.stack.count("SELECT count(*) FROM herald.dead_letters WHERE project IS NOT DISTINCT FROM $1", [project.map { .text($0) }])), "\(name)")
            #expect(of(project, "herald_access_token_refreshes_total") >= 1, "\(name): its own token")
        }
        #expect(Self.delivered(p, "alpha-fcm") == 120 && Self.delivered(p, "beta-fcm") == 80 && Self.delivered(p, "e2e-project") == 50)
        #expect(of("beta", "herald_messages_total", ["outcome": "dead"]) == 3 && of("beta", "herald_fcm_requests_total", ["code": "INVALID_ARGUMENT"]) == 3)
        // The pool's totals are the sums over the projects, as before.
        #expect(page.sum("herald_messages_total", ["outcome": "completed"]) == p.stack.emulator.deliveredMessages().count)
        #expect(page.sum("herald_fcm_requests_total") == stats["requests"]?.intValue)
        #expect(page.text.contains("herald_project_rate_per_second{project=\"alpha\"}") && page.text.contains("herald_quota_paused{project=\"beta\"} 0\n"))
        let lint = try promtool(["check", "metrics"], input: page.text)
        #expect(lint.status == 0, "promtool check metrics: \(lint.output)")
    }

    /// The sum of `name`'s series of one project (nil: the series without a project label).
    static func sum(_ page: MetricsPage, project: String?, _ name: String, _ labels: [String: String]) -> Int {
        var total = 0.0
        for (series, value) in page.samples {
            guard series == name || series.hasPrefix(name + "{") else { continue }
            guard labels.allSatisfy({ series.contains("\($0.key)=\"\($0.value)\"") }) else { continue }
            let label = project.map { "project=\"\($0)\"" } ?? "project="
            if series.contains(label) == (project != nil) { total += value }
        }
        return Int(total)
    }

    @Test func aProjectAddedToTheRegistryWhileThePoolRunsIsWorkedAndARemovedOneStopped() throws {
        let p = try Projects()
        defer { p.close() }
        try p.stack.connection.query("SELECT herald.remove_project('beta')")
        let pool = try RunningPool(p.stack, arguments: ["--processes", "1", "--poll-interval", "0.2", "--admin-address", "127.0.0.1:0"],
                                   environment: ["HERALD_REGISTRY_POLL_SECONDS": "0.5", "HERALD_WORKERS_PER_PROJECT": "1"])
        defer { _ = pool.stop() }
        #expect(waitUntil(timeout: 60) { (try? pool.get("/readyz").status) == 200 }, "\(pool.process.output)")
        let before = try pool.get("/healthz").body
        #expect(before.contains("2 of 2 worker processes"), "the jobs of no project and alpha: \(before)")

        // beta joins the registry: the running pool starts its workers, and its jobs go out with its key.
        try p.register("beta", fcm: "beta-fcm", credentials: p.betaKey)
        try p.enqueue(30, prefix: "b-", project: "beta")
        try p.enqueue(10, prefix: "a-", project: "alpha")
        #expect(waitUntil(timeout: 60) { Self.delivered(p, "beta-fcm") == 30 && Self.delivered(p, "alpha-fcm") == 10 }, "\(pool.process.output)")
        #expect(pool.process.output.contains("project beta joined the registry"), "\(pool.process.output)")
        #expect(waitUntil(timeout: 30) { (try? pool.get("/healthz").body.contains("3 of 3 worker processes")) == true })
        #expect(waitUntil(timeout: 10) { (try? Self.sum(pool.metrics(), project: "beta", "herald_messages_total", ["outcome": "completed"])) == 30 },
                "beta's counts under its project label")
        #expect(p.stack.emulator.statistics["by_status"]?["403"]?.intValue ?? 0 == 0)

        // alpha leaves it: its worker stops, the pool stays healthy and keeps delivering the others'.
        #expect(waitUntil(timeout: 30) {
            (try? p.stack.count("SELECT count(*) FROM herald.jobs WHERE project = 'alpha' AND state <> 'completed'")) == 0
        })
        try p.stack.connection.query("SELECT herald.remove_project('alpha')")
        #expect(waitUntil(timeout: 30) { pool.process.output.contains("project alpha left the registry") }, "\(pool.process.output)")
        #expect(waitUntil(timeout: 30) { (try? pool.get("/healthz"))?.body.contains("2 of 2 worker processes") == true },
                "\((try? pool.get("/healthz").body) ?? "")")
        #expect(try pool.get("/readyz").status == 200)
        try p.enqueue(5, prefix: "b2-", project: "beta")
        try p.enqueue(5, prefix: "n-", project: nil)
        #expect(waitUntil(timeout: 60) { Self.delivered(p, "beta-fcm") == 35 && Self.delivered(p, "e2e-project") == 5 }, "\(pool.process.output)")
        #expect(pool.process.process.isRunning, "one pool throughout, never restarted")
        #expect(try Self.sum(pool.metrics(), project: "alpha", "herald_messages_total", ["outcome": "completed"]) == 10, "alpha's counts are kept")
    }

    /// `sql` refused, with an error that names every one of `names`.
    static func expectRefused(_ p: Projects, _ sql: String, naming names: [String], sourceLocation: SourceLocation = #_sourceLocation) {
        do {
            try p.stack.connection.query(sql)
            Issue.record("accepted: \(sql)", sourceLocation: sourceLocation)
        } catch {
            #expect(names.allSatisfy { "\(error)".contains($0) }, "\(error)", sourceLocation: sourceLocation)
        }
    }

    @Test func aCampaignAndADeviceGroupOperationAreAddressedToAProjectAndTheCampaignsJobsTakeIt() throws {
        let p = try Projects()
        defer { p.close() }
        // An unregistered name is refused, naming it; nothing is written.
        Self.expectRefused(p, "SELECT herald.create_campaign('spring', project => 'gamma')", naming: ["gamma", "herald projects add"])
        Self.expectRefused(p, "SELECT herald.enqueue_group_op('create', 'family', ARRAY['g1'], project => 'gamma')", naming: ["gamma", "herald projects add"])
        #expect(try p.stack.count("SELECT count(*) FROM herald.campaigns") == 0 && p.stack.count("SELECT count(*) FROM herald.jobs") == 0)

        // A campaign of alpha: its jobs, inserted without a project, are alpha's.
        let spring = try #require(try p.stack.connection.query("SELECT herald.create_campaign('spring', project => 'alpha')").int(0, 0))
        try p.stack.connection.query("""
            INSERT INTO herald.jobs (message, campaign_id)
            SELECT jsonb_build_object('token', 'camp-' || g, 'notification', jsonb_build_object('title', 'Spring')), $1
            FROM generate_series(1, 40) AS g
            """, [.int(spring)])
        _ = try p.stack.connection.query("SELECT herald.enqueue('{\"token\": \"camp-41\"}'::jsonb, campaign_id => $1)", [.int(spring)])
        #expect(try p.stack.count("SELECT count(*) FROM herald.jobs WHERE campaign_id = $1 AND project = 'alpha'", [.int(spring)]) == 41)
        // A job of the campaign naming another project is refused, naming both; so is a project's
        // job in a campaign of no project.
        Self.expectRefused(p, "INSERT INTO herald.jobs (message, campaign_id, project) VALUES ('{\"token\": \"x\"}', \(spring), 'beta')",
                           naming: ["\"beta\"", "campaign \(spring)", "alpha"])
        let plain = try #require(try p.stack.connection.query("SELECT herald.create_campaign('plain')").int(0, 0))
        Self.expectRefused(p, "SELECT herald.enqueue('{\"token\": \"x\"}'::jsonb, campaign_id => \(plain), project => 'beta')",
                           naming: ["\"beta\"", "campaign \(plain)", "no project"])
        _ = try p.stack.connection.query("SELECT herald.enqueue('{\"token\": \"plain-1\"}'::jsonb, campaign_id => $1)", [.int(plain)])
        #expect(try p.stack.count("SELECT count(*) FROM herald.jobs WHERE campaign_id = $1 AND project IS NULL", [.int(plain)]) == 1)
        // Moving a job of another project into the campaign is refused as well.
        _ = try p.stack.connection.query("SELECT herald.enqueue('{\"token\": \"beta-1\"}'::jsonb, project => 'beta')")
        Self.expectRefused(p, "UPDATE herald.jobs SET campaign_id = \(spring) WHERE message->>'token' = 'beta-1'", naming: ["\"beta\"", "campaign \(spring)"])

        // A device-group operation of beta.
        _ = try p.stack.connection.query("SELECT herald.enqueue_group_op('create', 'family', ARRAY['g1', 'g2'], project => 'beta')")
        #expect(try p.stack.count("SELECT count(*) FROM herald.jobs WHERE kind = 'group' AND project = 'beta'") == 1)

        // One pool works them all, each with its own project's key.
        let run = try p.stack.work(["--drain", "--processes", "1", "--poll-interval", "0.2"])
        #expect(run.status == 0, "\(run.output)")
        #expect(try p.stack.count("SELECT count(*) FROM herald.jobs WHERE state <> 'completed'") == 0, "\(run.output)")
        let delivered = p.stack.emulator.deliveredMessages()
        #expect(delivered.filter { ($0.token ?? "").hasPrefix("camp-") && $0.projectID == "alpha-fcm" }.count == 41)
        #expect(delivered.filter { $0.token == "plain-1" }.map(\.projectID) == ["e2e-project"])
        #expect(delivered.filter { $0.token == "beta-1" }.map(\.projectID) == ["beta-fcm"])
        #expect(p.stack.emulator.statistics["by_status"]?["403"]?.intValue ?? 0 == 0, "no request with another project's key")
    }

    @Test func aJobForAProjectNobodyRegisteredIsRefusedNamingIt() throws {
        let p = try Projects()
        defer { p.close() }
        #expect(throws: PostgresError.self) { try p.enqueue(1, prefix: "x-", project: "gamma") }
        do {
            try p.stack.connection.query("SELECT herald.enqueue('{\"token\": \"t\"}'::jsonb, project => 'gamma')")
            Issue.record("herald.enqueue accepted a project nobody registered")
        } catch {
            #expect("\(error)".contains("gamma") && "\(error)".contains("herald projects add"), "\(error)")
        }
        #expect(try p.stack.count("SELECT count(*) FROM herald.jobs") == 0)
        // A registered one is taken, by herald.enqueue and herald.enqueue_multicast too.
        _ = try p.stack.connection.query("SELECT herald.enqueue('{\"token\": \"t\"}'::jsonb, project => 'beta')")
        _ = try p.stack.connection.query("""
            SELECT herald.enqueue_multicast('{"data": {"k": "v"}}'::jsonb, ARRAY['m1', 'm2', 'm3'], project => 'beta')
            """)
        #expect(try p.stack.count("SELECT count(*) FROM herald.jobs WHERE project = 'beta'") == 4)
        #expect(throws: PostgresError.self) {
            try p.stack.connection.query("SELECT herald.enqueue_multicast('{\"data\": {}}'::jsonb, ARRAY['m4'], project => 'gamma')")
        }
        #expect(try p.stack.count("SELECT count(*) FROM herald.jobs") == 4)
        // A legacy multicast row fans out into jobs of its project.
        try p.stack.connection.query("""
            INSERT INTO herald.jobs (message, project)
            VALUES ('{"registration_ids": ["l1", "l2", "l3"], "data": {"k": "v"}}'::jsonb, 'beta')
            """)
        #expect(try p.stack.count("SELECT count(*) FROM herald.jobs WHERE project = 'beta'") == 7)
        try p.stack.connection.query("DELETE FROM herald.jobs WHERE message ? 'registration_ids'")

        // A project with pending jobs is not removed: they would be left with no pool.
        do {
            try p.stack.connection.query("SELECT herald.remove_project('beta')")
            Issue.record("beta was removed with 4 jobs pending")
        } catch {
            #expect("\(error)".contains("4 pending jobs"), "\(error)")
        }
        try p.stack.connection.query("DELETE FROM herald.jobs")
        try p.stack.connection.query("SELECT herald.remove_project('beta')")
        #expect(try p.stack.count("SELECT count(*) FROM herald.projects WHERE name = 'beta'") == 0)
    }

    @Test func credentialsForAnotherFCMProjectStopThePoolBeforeAnyJob() throws {
        let p = try Projects()
        defer { p.close() }
        // gamma names FCM project gamma-fcm but points at beta's key.
        try p.register("gamma", fcm: "gamma-fcm", credentials: p.betaKey)
        try p.enqueue(10, prefix: "g-", project: "gamma")
        let run = try p.stack.work(["--project", "gamma", "--drain", "--processes", "1"], timeout: 60)
        #expect(run.status != 0 && run.status != nil)
        #expect(run.output.contains("beta-fcm") && run.output.contains("gamma-fcm") && run.output.contains("--project gamma"), "\(run.output)")
        #expect(!run.output.contains("PRIVATE KEY"), "\(run.output)")
        #expect(p.stack.emulator.deliveredMessages().isEmpty)
        #expect(try p.stack.count("SELECT count(*) FROM herald.jobs WHERE state = 'available'") == 10)
        // An unregistered name, and a key that is gone, are named as well.
        let unknown = try p.stack.work(["--project", "delta", "--drain"], timeout: 60)
        #expect(unknown.status != 0 && unknown.output.contains("\"delta\"") && unknown.output.contains("herald projects"), "\(unknown.output)")
        try FileManager.default.removeItem(atPath: p.alphaKey)
        let gone = try p.stack.work(["--project", "alpha", "--drain"], timeout: 60)
        #expect(gone.status != 0 && gone.output.contains(p.alphaKey) && gone.output.contains("does not exist"), "\(gone.output)")
    }

    @Test func aKeyInAnEnvironmentVariableIsReadFromThePoolsEnvironment() throws {
        let p = try Projects()
        defer { p.close() }
        try p.stack.connection.query("UPDATE herald.projects SET credentials = 'env:HERALD_TEST_BETA_KEY' WHERE name = 'beta'")
        try p.enqueue(20, prefix: "b-", project: "beta")
        let missing = try p.stack.work(["--project", "beta", "--drain"], timeout: 60)
        #expect(missing.status != 0 && missing.output.contains("HERALD_TEST_BETA_KEY"), "\(missing.output)")
        var environment = p.stack.environment
        environment["HERALD_TEST_BETA_KEY"] = try String(contentsOfFile: p.betaKey, encoding: .utf8)
        let run = try HeraldProcess.run(["work", "--project", "beta", "--drain", "--processes", "1", "--poll-interval", "0.2"],
                                        environment: environment, timeout: 120)
        #expect(run.status == 0, "\(run.output)")
        #expect(p.stack.emulator.deliveredMessages().filter { $0.projectID == "beta-fcm" }.count == 20)
    }

    @Test func aPausedProjectIsNotClaimedAndADeadLetterKeepsItsProject() throws {
        let p = try Projects()
        defer { p.close() }
        try p.enqueue(5, prefix: "a-", project: "alpha")
        try p.enqueue(5, prefix: "n-", project: nil)
        func claim(_ project: String?) throws -> Int {
            let result = try p.stack.connection.query("""
                SELECT coalesce(cardinality(claimed), 0) FROM herald.claim_batch(NULL, 100, 60, 'test', p_project => $1)
                """, [project.map { .text($0) }])
            return result.int(0, 0) ?? -1
        }
        try p.stack.connection.query("UPDATE herald.projects SET paused_reason = 'operator', paused_at = now() WHERE name = 'alpha'")
        #expect(try claim("alpha") == 0)
        #expect(try claim(nil) == 5, "the jobs of no project are not held back by alpha's pause")
        try p.stack.connection.query("UPDATE herald.projects SET paused_reason = NULL, paused_at = NULL WHERE name = 'alpha'")
        #expect(try claim("alpha") == 5)
        // Those claims were this test's own: out of the way of the pool below.
        try p.stack.connection.query("DELETE FROM herald.jobs")

        // A job of alpha that FCM refuses for good is dead-lettered with its project, and a
        // replay goes out for alpha again (never with the pool's own key).
        try p.enqueue(1, prefix: "fail-invalid-a", project: "alpha")
        let run = try p.stack.work(["--project", "alpha", "--drain", "--processes", "1", "--poll-interval", "0.2"], timeout: 120)
        #expect(run.status == 0, "\(run.output)")
        #expect(try p.stack.count("SELECT count(*) FROM herald.dead_letters WHERE project = 'alpha'") == 1)
        // herald dead chooses by project too.
        let shell = ["DATABASE_URL": p.stack.database.url]
        let listed = try HeraldProcess.run(["dead", "list", "--project", "alpha", "--json"], environment: shell)
        let letters = try JSONValue.parse(listed.output).arrayValue ?? []
        #expect(letters.count == 1 && letters.first?["project"]?.stringValue == "alpha", "\(listed.output)")
        let none = try HeraldProcess.run(["dead", "retry", "--all", "--project", "beta"], environment: shell)
        #expect(none.status == 0 && none.output.contains("retried 0 dead letters"), "\(none.output)")
        let replay = try HeraldProcess.run(["dead", "retry", "--all", "--project", "alpha"], environment: shell)
        #expect(replay.status == 0 && replay.output.contains("retried 1 dead letter"), "\(replay.output)")
        #expect(try p.stack.count("SELECT count(*) FROM herald.dead_letters") == 0)
        #expect(try p.stack.count("SELECT count(*) FROM herald.jobs WHERE state = 'available' AND project = 'alpha' AND message->>'token' LIKE 'fail-invalid-a%'") == 1)
    }

    /// Messages the emulator delivered for FCM project `id`.
    static func delivered(_ p: Projects, _ id: String) -> Int {
        p.stack.emulator.deliveredMessages().filter { $0.projectID == id }.count
    }

    @Test func onePoolWorksEveryRegisteredProjectWithItsOwnKey() throws {
        let p = try Projects()
        defer { p.close() }
        try p.enqueue(200, prefix: "a-", project: "alpha")
        try p.enqueue(200, prefix: "b-", project: "beta")
        try p.enqueue(200, prefix: "n-", project: nil)
        let run = try p.stack.work(["--drain", "--processes", "1", "--poll-interval", "0.2"])
        #expect(run.status == 0, "\(run.output)")
        #expect(run.output.contains("project alpha") && run.output.contains("project beta"), "\(run.output)")
        #expect(Self.delivered(p, "alpha-fcm") == 200 && Self.delivered(p, "beta-fcm") == 200 && Self.delivered(p, "e2e-project") == 200)
        #expect(Set(p.stack.emulator.deliveredMessages().compactMap(\.token)).count == 600)
        let misplaced = p.stack.emulator.deliveredMessages().filter {
            ($0.token ?? "").hasPrefix("a-") != ($0.projectID == "alpha-fcm") || ($0.token ?? "").hasPrefix("b-") != ($0.projectID == "beta-fcm")
        }
        #expect(misplaced.isEmpty, "\(misplaced.prefix(3).map { "\($0.token ?? "") in \($0.projectID)" })")
        #expect(p.stack.emulator.statistics["by_status"]?["403"]?.intValue ?? 0 == 0)

        // Without a key of its own the pool works the registry's projects only.
        try p.enqueue(20, prefix: "a2-", project: "alpha")
        try p.enqueue(20, prefix: "n2-", project: nil)
        var environment = p.stack.environment
        environment["GOOGLE_APPLICATION_CREDENTIALS"] = nil
        let keyless = try HeraldProcess.run(["work", "--drain", "--processes", "1", "--poll-interval", "0.2"], environment: environment,
                                            timeout: 120)
        #expect(keyless.status == 0, "\(keyless.output)")
        #expect(keyless.output.contains("jobs of no project wait"), "\(keyless.output)")
        #expect(Self.delivered(p, "alpha-fcm") == 220 && Self.delivered(p, "e2e-project") == 200)
        #expect(try p.stack.count("SELECT count(*) FROM herald.jobs WHERE project IS NULL AND state = 'available'") == 20)
    }

    /// `--project` given twice restricts a pool to those two projects, each in workers of its own
    /// with its own key; a third registered project and the jobs of no project stay for others.
    @Test func aPoolGivenTwoProjectsWorksThoseTwoOnly() throws {
        let p = try Projects()
        defer { p.close() }
        let gammaKey = NSTemporaryDirectory() + "herald-gamma-\(UUID().uuidString).json"
        defer { try? FileManager.default.removeItem(atPath: gammaKey) }
        try p.stack.emulator.writeServiceAccount(to: gammaKey, projectID: "gamma-fcm")
        try p.register("gamma", fcm: "gamma-fcm", credentials: gammaKey)
        try p.enqueue(50, prefix: "a-", project: "alpha")
        try p.enqueue(50, prefix: "b-", project: "beta")
        try p.enqueue(50, prefix: "g-", project: "gamma")
        try p.enqueue(50, prefix: "n-", project: nil)
        let run = try p.stack.work(["--drain", "--processes", "1", "--poll-interval", "0.2", "--project", "alpha", "--project=beta"])
        #expect(run.status == 0, "\(run.output)")
        #expect(run.output.contains("project alpha") && run.output.contains("project beta") && !run.output.contains("project gamma"), "\(run.output)")
        #expect(Self.delivered(p, "alpha-fcm") == 50 && Self.delivered(p, "beta-fcm") == 50, "\(run.output)")
        #expect(Self.delivered(p, "gamma-fcm") == 0 && Self.delivered(p, "e2e-project") == 0)
        let misplaced = p.stack.emulator.deliveredMessages().filter {
            ($0.token ?? "").hasPrefix("a-") != ($0.projectID == "alpha-fcm") || ($0.token ?? "").hasPrefix("b-") != ($0.projectID == "beta-fcm")
        }
        #expect(misplaced.isEmpty)
        #expect(try p.stack.count("SELECT count(*) FROM herald.jobs WHERE (project = 'gamma' OR project IS NULL) AND state = 'available'") == 100)

        let twice = try p.stack.work(["--drain", "--project", "alpha", "--project", "alpha"])
        #expect(twice.status == 2 && twice.output.contains("--project alpha is given twice"), "\(twice.output)")
        let unknown = try p.stack.work(["--drain", "--project", "alpha", "--project", "nosuch"])
        #expect(unknown.status != 0 && unknown.output.contains("nosuch"), "\(unknown.output)")
    }

    @Test func aProjectWithAMissingKeyIsPausedWhileTheOthersDeliverAndComesBackWhenTheFileDoes() throws {
        let p = try Projects()
        defer { p.close() }
        let aside = p.alphaKey + ".aside"
        try FileManager.default.moveItem(atPath: p.alphaKey, toPath: aside)
        try p.enqueue(100, prefix: "a-", project: "alpha")
        try p.enqueue(100, prefix: "b-", project: "beta")
        let pool = try p.startPool(["--processes", "1", "--poll-interval", "0.2"])
        defer { p.stop(pool) }
        // beta delivers; alpha is paused with the reason, naming the file, and sends nothing.
        #expect(waitUntil(timeout: 60) { Self.delivered(p, "beta-fcm") == 100 }, "\(pool.output)")
        var reason = ""
        #expect(try waitUntil(timeout: 30) {
            reason = try p.stack.connection.query("SELECT coalesce(paused_reason, '') FROM herald.projects WHERE name = 'alpha'")[0, 0] ?? ""
            return !reason.isEmpty
        })
        #expect(reason.hasPrefix("credentials: ") && !reason.hasPrefix("credentials: credentials") && reason.contains(p.alphaKey) && reason.contains("does not exist"), "\(reason)")
        #expect(Self.delivered(p, "alpha-fcm") == 0)
        #expect(pool.isRunning, "the pool stays up")

        // The file is back: within the group's next try (30 s), without a restart of the pool.
        try FileManager.default.moveItem(atPath: aside, toPath: p.alphaKey)
        #expect(waitUntil(timeout: 90) { Self.delivered(p, "alpha-fcm") == 100 }, "\(pool.output)")
        #expect(try p.stack.count("SELECT count(*) FROM herald.projects WHERE name = 'alpha' AND paused_reason IS NULL") == 1)
        #expect(pool.output.contains("its pause for the key is lifted"), "\(pool.output)")
    }

    @Test func aRotatedKeyFileIsTakenUpWithoutRestartingThePool() throws {
        let p = try Projects()
        defer { p.close() }
        try p.enqueue(50, prefix: "a-", project: "alpha")
        let pool = try p.startPool(["--project", "alpha", "--processes", "1", "--poll-interval", "0.2"])
        defer { p.stop(pool) }
        #expect(waitUntil(timeout: 60) { Self.delivered(p, "alpha-fcm") == 50 }, "\(pool.output)")
        let tokensBefore = p.stack.emulator.tokensIssued

        // A new key for the same FCM project replaces the file in one rename, as a secret
        // manager does.
        let fresh = p.alphaKey + ".new"
        try p.stack.emulator.writeServiceAccount(to: fresh, projectID: "alpha-fcm")
        let email = try #require(try JSONValue.parse(String(contentsOfFile: fresh, encoding: .utf8))["client_email"]?.stringValue)
        #expect(rename(fresh, p.alphaKey) == 0)
        #expect(waitUntil(timeout: 60) { pool.output.contains("a new key of \(email)") }, "\(pool.output)")
        try p.enqueue(50, prefix: "a2-", project: "alpha")
        #expect(waitUntil(timeout: 60) { Self.delivered(p, "alpha-fcm") == 100 }, "\(pool.output)")
        #expect(p.stack.emulator.tokensIssued > tokensBefore, "a token from the new key")
        #expect(pool.isRunning, "the pool stays up")
        #expect(Set(p.stack.emulator.deliveredMessages().compactMap(\.token)).count == 100)

        // A file changed to another project's key is not taken.
        try p.stack.emulator.writeServiceAccount(to: fresh, projectID: "beta-fcm")
        #expect(rename(fresh, p.alphaKey) == 0)
        #expect(waitUntil(timeout: 60) { pool.output.contains("not \"alpha-fcm\"; keeping the key in use") }, "\(pool.output)")
    }

    @Test func aStandaloneEmulatorServesSeveralProjectsEachWithItsOwnKey() throws {
        let folder = NSTemporaryDirectory() + "herald-emulator-projects-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let emulator = try HeraldProcess(["emulator", "--port", "0", "--write-service-account", folder + "/default.json",
                                          "--write-service-account", "shop-fcm=" + folder + "/shop.json",
                                          "--write-service-account", "news-fcm=" + folder + "/news.json"], environment: [:])
        try emulator.start()
        defer { emulator.signal(SIGKILL) }
        var exports: [String] = []
        #expect(waitUntil(timeout: 30) { exports = StandaloneEmulatorTests.exportLines(emulator) ?? []; return !exports.isEmpty }, "\(emulator.output)")
        func exported(_ name: String) -> String? {
            exports.first { $0.hasPrefix("export \(name)=") }.map { String($0.dropFirst("export \(name)=".count).prefix { $0 != " " }) }
        }
        let url = try #require(exported("HERALD_FCM_URL"))
        // Over TLS, as it serves by default: the worker and `projects test` trust its authority.
        let authority = try #require(exported("HERALD_CA_FILE"), "\(exports)")
        for (file, project) in [("shop", "shop-fcm"), ("news", "news-fcm"), ("default", "herald-emulator")] {
            let key = try JSONValue.parse(String(contentsOfFile: folder + "/\(file).json", encoding: .utf8))
            #expect(key["project_id"]?.stringValue == project)
        }

        let database = try TestDatabase.fresh()
        defer { database.drop() }
        let connection = try database.connect()
        try connection.query("SELECT herald.add_project('shop', 'shop-fcm', $1)", [.text(folder + "/shop.json")])
        try connection.query("SELECT herald.add_project('news', 'news-fcm', $1)", [.text(folder + "/news.json")])
        try connection.query("""
            SELECT herald.enqueue(jsonb_build_object('token', p || '-' || g), project => nullif(p, 'none'))
            FROM unnest(ARRAY['shop', 'news', 'none']) p, generate_series(1, 10) g
            """)
        let environment = ["DATABASE_URL": database.url, "GOOGLE_APPLICATION_CREDENTIALS": folder + "/default.json",
                           "HERALD_FCM_URL": url, "HERALD_IID_URL": url, "HERALD_CA_FILE": authority,
                           "HERALD_ADMIN_ADDRESS": "127.0.0.1:0"]
        let run = try HeraldProcess.run(["work", "--drain", "--processes", "1", "--poll-interval", "0.2"], environment: environment)
        #expect(run.status == 0, "\(run.output)")
        #expect(try database.connect().query("SELECT count(*) FROM herald.jobs WHERE state = 'completed'").int(0, 0) == 30)
        // Each project's key is good for its own project only.
        let test = try HeraldProcess.run(["projects", "test", "shop"], environment: environment)
        #expect(test.status == 0, "\(test.output)")
    }

    @Test func aProjectsOneTimeCodesAreNotStuckBehindAnotherProjectsBacklog() throws {
        try MachineLock.alone {
            let p = try Projects()
            defer { p.close() }
            try p.enqueue(100_000, prefix: "backlog-", project: "alpha")
            // One pool: workers for the jobs of no project, for alpha and for beta (64 in flight
            // each, as the queue fairness test has it, for the same reason: the emulator shares
            // the two cores).
            let pool = try p.startPool(["--processes", "1", "--poll-interval", "0.5", "--concurrency", "64"])
            defer { p.stop(pool) }
            let backlog = { p.stack.emulator.deliveredMessages().filter { $0.token?.hasPrefix("backlog-") == true }.count }
            #expect(waitUntil(timeout: 60) { backlog() > 2_000 }, "the backlog is draining: \(pool.output)")
            for n in 1...150 {
                try p.stack.connection.query("""
                    SELECT herald.enqueue(jsonb_build_object('token', 'otp-' || $1::text, 'data', jsonb_build_object('code', '123456')),
                                          project => 'beta')
                    """, [.int(n)])
                Thread.sleep(forTimeInterval: 0.02)  // the offered load's pace, not a synchronisation
            }
            let codes = { p.stack.emulator.deliveredMessages().filter { $0.token?.hasPrefix("otp-") == true } }
            #expect(waitUntil(timeout: 60) { codes().count == 150 })
            let created = try p.stack.connection.query(
                "SELECT message->>'token', extract(epoch FROM created_at) * 1000 FROM herald.jobs WHERE project = 'beta'")
            var enqueuedAt: [String: Double] = [:]
            for row in 0..<created.rowCount { enqueuedAt[created[row, 0]!] = created.double(row, 1)! }
            let waits = codes().compactMap { m in m.token.flatMap { enqueuedAt[$0] }.map { Double(m.receivedAtMilliseconds) - $0 } }.sorted()
            #expect(waits.count == 150)
            guard !waits.isEmpty else { return }
            let p50 = waits[waits.count / 2], p99 = waits[waits.count * 99 / 100]
            let left = try p.stack.count("SELECT count(*) FROM herald.jobs WHERE project = 'alpha' AND state = 'available'")
            print("beta's one-time codes behind alpha's 100,000-job backlog, one pool: enqueue to FCM p50 \(Int(p50)) ms, p99 \(Int(p99)) ms (target p99 150 ms); \(left) of alpha's jobs still waiting")
            #expect(left > 0, "the backlog was still there while the codes went out")
            // The target is the printed figure; the bound separates "past the backlog" from
            // "behind it" (draining it takes tens of seconds), so a busy machine does not fail it.
            #expect(p99 <= 1_000, "p99 \(p99) ms")
            #expect(codes().allSatisfy { $0.projectID == "beta-fcm" })
        }
    }

    @Test func aProjectPausedByItsQuotaDoesNotSlowAnother() throws {
        // alpha's first sends draw FCM's project quota answer with Retry-After: 30.
        let scenario = try Scenario.parse(#"""
            {"scripts": [{"prefix": "qa-", "answers": [{"error": "QUOTA_EXCEEDED", "quota": "project", "retry_after": 30}]}]}
            """#)
        let p = try Projects(scenario: scenario)
        defer { p.close() }
        try p.enqueue(20, prefix: "qa-", project: "alpha")
        let pool = try p.startPool(["--processes", "1", "--poll-interval", "0.2"])
        defer { p.stop(pool) }
        #expect(try waitUntil(timeout: 30) {
            try p.stack.count("SELECT count(*) FROM herald.project_pauses WHERE project_id = 'alpha-fcm' AND paused_until > now()") == 1
        }, "\(pool.output)")
        // While alpha waits out its Retry-After, beta's jobs go out at once.
        try p.enqueue(200, prefix: "b-", project: "beta")
        let start = Date()
        #expect(waitUntil(timeout: 20) { Self.delivered(p, "beta-fcm") == 200 }, "\(pool.output)")
        let seconds = Date().timeIntervalSince(start)
        print("beta's 200 jobs while alpha is paused by its quota: delivered in \(String(format: "%.2f", seconds)) s")
        #expect(try p.stack.count("SELECT count(*) FROM herald.project_pauses WHERE project_id = 'beta-fcm'") == 0)
        #expect(try p.stack.count("SELECT count(*) FROM herald.project_pauses WHERE project_id = 'alpha-fcm' AND paused_until > now()") == 1)
        #expect(p.stack.emulator.deliveredMessages().filter { $0.projectID == "alpha-fcm" }.isEmpty, "alpha honours its Retry-After")
        #expect(p.stack.emulator.retryAfterViolations == 0)
    }

    @Test func aPoolOnADatabaseWithoutTheSchemaSaysToMigrate() throws {
        let database = try TestDatabase.fresh(migrated: false)
        defer { database.drop() }
        let stack = try WorkerStack()
        defer { stack.close() }
        var environment = stack.environment
        environment["DATABASE_URL"] = database.url
        for arguments in [["work", "--drain"], ["work", "--drain", "--project", "shop"]] {
            let run = try HeraldProcess.run(arguments, environment: environment, timeout: 60)
            #expect(run.status == 2 && run.output.contains("run `herald migrate` first"), "\(arguments): \(run.output)")
        }
    }
}
