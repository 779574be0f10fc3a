import Foundation
import Testing
import Postgres
import Queue
@testable import Worker
import TestSupport

/// The schema, the SQL API and the JobStore against a real PostgreSQL.
@Suite struct QueueTests {
    func withDatabase(_ body: (PGConnection, FreshDatabase) throws -> Void) throws {
        let database = try TestDatabase.fresh()
        defer { database.drop() }
        let connection = try database.connect()
        try body(connection, database)
    }

    func enqueue(_ c: PGConnection, token: String = "tok") throws -> Int {
        try c.query("SELECT herald.enqueue(jsonb_build_object('token', $1::text, 'notification', jsonb_build_object('title', 'hi')))",
                    [.text(token)]).int(0, 0)!
    }

    @Test func migrateIsIdempotentAndKeepsAReplacedPruneToken() throws {
        try withDatabase { c, _ in
            #expect(try Migrator.migrate(c).isEmpty)
            let recorded = try c.query("SELECT version FROM herald.schema_migrations ORDER BY version")
            #expect((0..<recorded.rowCount).map { recorded[$0, 0]! } == Migrator.migrations.map(\.name))
            try c.execute("""
                CREATE TABLE public.my_tokens (token text PRIMARY KEY);
                CREATE OR REPLACE FUNCTION herald.prune_token(token text, reason text, job_id bigint) RETURNS void
                LANGUAGE sql AS $$ DELETE FROM public.my_tokens WHERE my_tokens.token = prune_token.token $$;
                """)
            try Migrator.migrate(c)
            let body = try c.query("SELECT prosrc FROM pg_proc WHERE proname = 'prune_token'")[0, 0]!
            #expect(body.contains("public.my_tokens"))
            // validate_message works: the migrator loaded the rules.
            let issues = try c.query("SELECT cardinality(herald.validate_message('{\"notification\":{}}'::jsonb))").int(0, 0)!
            #expect(issues > 0)
        }
    }

    @Test func twoMigratorsAtOnceApplyEachMigrationOnce() throws {
        let database = try TestDatabase.fresh(migrated: false)
        defer { database.drop() }
        let results = UnsafeSendableBox<[Result<[String], Error>]>([])
        let group = DispatchGroup()
        for _ in 0..<2 {
            DispatchQueue.global().async(group: group) {
                let result = Result { () throws -> [String] in try Migrator.migrate(try database.connect()) }
                results.mutate { $0.append(result) }
            }
        }
        #expect(group.wait(timeout: .now() + 60) == .success)
        let applied = try results.value.map { try $0.get() }
        #expect(applied.map(\.count).sorted() == [0, Migrator.migrations.count])
        let c = try database.connect()
        #expect(try c.query("SELECT count(*) FROM herald.schema_migrations").int(0, 0) == Migrator.migrations.count)
    }

    @Test func dedupeKeyReturnsThePendingJob() throws {
        try withDatabase { c, _ in
            let sql = "SELECT herald.enqueue('{\"token\":\"a\"}'::jsonb, dedupe_key => 'order-7')"
            let first = try c.query(sql).int(0, 0)!
            #expect(try c.query(sql).int(0, 0) == first)
            let store = JobStore(connection: c, retention: 3600)
            let claimed = try store.claimer.claim(queues: [], limit: 10, leaseSeconds: 60)
            #expect(claimed.map(\.id) == [first])
            #expect(try c.query(sql).int(0, 0) == first, "a running job is still pending")
            try store.recorder.record([JobOutcome(id: first, attempt: 1, .completed(messageName: "projects/p/messages/1"))])
            let second = try c.query(sql).int(0, 0)!
            #expect(second != first, "a finished job no longer holds the key")
        }
    }

    @Test func claimsByPriorityThenRunAtAndSkipsScheduledAndOtherQueues() throws {
        try withDatabase { c, _ in
            let late = try c.query("SELECT herald.enqueue('{\"token\":\"a\"}', now() - interval '1 minute')").int(0, 0)!
            let early = try c.query("SELECT herald.enqueue('{\"token\":\"b\"}', now() - interval '2 minutes')").int(0, 0)!
            let urgent = try c.query("SELECT herald.enqueue('{\"token\":\"c\"}', priority => -5)").int(0, 0)!
            _ = try c.query("SELECT herald.enqueue('{\"token\":\"d\"}', now() + interval '1 hour')")
            let other = try c.query("SELECT herald.enqueue('{\"token\":\"e\"}', queue => 'marketing')").int(0, 0)!
            let store = JobStore(connection: c)
            let claimed = try store.claimer.claim(queues: ["default"], limit: 10, leaseSeconds: 60)
            #expect(Set(claimed.map(\.id)) == [late, early, urgent])
            let order = try c.query("SELECT id FROM herald.jobs WHERE state = 'running' ORDER BY priority, run_at, id")
            #expect((0..<order.rowCount).map { order.int($0, 0)! } == [urgent, early, late])
            #expect(claimed.allSatisfy { $0.attempt == 1 && $0.maxAttempts == 25 })
            #expect(try store.claimer.claim(queues: ["marketing"], limit: 10, leaseSeconds: 60).map(\.id) == [other])
            #expect(try store.claimer.claim(queues: [], limit: 10, leaseSeconds: 60).isEmpty, "the scheduled job is not due")
            let pending = try store.claimer.pendingWork(queues: [], horizon: 60)
            #expect(pending.due, "jobs are running")
            #expect(pending.later == 1, "the job due in an hour waits beyond a minute's horizon")
            #expect(abs((pending.nextDueIn ?? 0) - 3600) < 60)
        }
    }

    @Test func concurrentClaimersNeverShareAJob() throws {
        try withDatabase { c, database in
            try c.query("INSERT INTO herald.jobs (message) SELECT jsonb_build_object('token', 't' || g) FROM generate_series(1, 2000) g")
            let seen = UnsafeSendableBox<[Int]>([])
            let group = DispatchGroup()
            for worker in 0..<4 {
                DispatchQueue.global().async(group: group) {
                    guard let conn = try? database.connect() else { return }
                    let store = JobStore(connection: conn, workerID: "w\(worker)")
                    while let batch = try? store.claimer.claim(queues: [], limit: 50, leaseSeconds: 60), !batch.isEmpty {
                        seen.mutate { $0 += batch.map(\.id) }
                        _ = try? store.recorder.record(batch.map { $0.outcome(.completed(messageName: nil)) })
                    }
                }
            }
            #expect(group.wait(timeout: .now() + 120) == .success)
            #expect(seen.value.count == 2000)
            #expect(Set(seen.value).count == 2000)
            #expect(try c.query("SELECT count(*) FROM herald.jobs WHERE state = 'completed'").int(0, 0) == 2000)
        }
    }

    @Test func outcomesLandWhereTheyBelong() throws {
        try withDatabase { c, _ in
            try c.query("INSERT INTO herald.device_tokens (token, user_ref) VALUES ('gone', 'u1'), ('kept', 'u2')")
            let ok = try enqueue(c, token: "kept")
            let retry = try enqueue(c, token: "r")
            let dead = try enqueue(c, token: "d")
            let prune = try enqueue(c, token: "gone")
            let release = try enqueue(c, token: "x")
            let store = JobStore(connection: c, retention: 3600)
            let claimed = try store.claimer.claim(queues: [], limit: 10, leaseSeconds: 60)
            #expect(claimed.count == 5)
            let summary = try store.recorder.record([
                JobOutcome(id: ok, attempt: 1, .completed(messageName: "projects/p/messages/42")),
                JobOutcome(id: retry, attempt: 1, .retry(error: "UNAVAILABLE: try later", delay: 120)),
                JobOutcome(id: dead, attempt: 1, .dead(reason: "INVALID_ARGUMENT: message.android.ttl is bad")),
                JobOutcome(id: prune, attempt: 1, .pruned(token: "gone", reason: "UNREGISTERED: not registered")),
                JobOutcome(id: release, attempt: 1, .released()),
            ])
            #expect(summary.finished == 2 && summary.retried == 1 && summary.dead == 1 && summary.released == 1 && summary.stale == 0)
            let row = try c.query("SELECT state, fcm_message_name, finished_at IS NOT NULL FROM herald.jobs WHERE id = $1", [.int(ok)])
            #expect(row[0, 0] == "completed" && row[0, 1] == "projects/p/messages/42" && row.bool(0, 2) == true)
            let r = try c.query("SELECT state, attempts, run_at > now() + interval '100 seconds', last_error, jsonb_array_length(errors) FROM herald.jobs WHERE id = $1", [.int(retry)])
            #expect(r[0, 0] == "scheduled" && r.int(0, 1) == 1 && r.bool(0, 2) == true && r[0, 3] == "UNAVAILABLE: try later" && r.int(0, 4) == 1)
            #expect(try c.query("SELECT count(*) FROM herald.jobs WHERE id = $1", [.int(dead)]).int(0, 0) == 0)
            let d = try c.query("SELECT id, reason, attempts, message->>'token' FROM herald.dead_letters WHERE job_id = $1", [.int(dead)])
            #expect(d.rowCount == 1 && d[0, 1] == "INVALID_ARGUMENT: message.android.ttl is bad" && d.int(0, 2) == 1 && d[0, 3] == "d")
            let p = try c.query("SELECT state FROM herald.jobs WHERE id = $1", [.int(prune)])
            #expect(p[0, 0] == "discarded")
            #expect(try c.query("SELECT token FROM herald.device_tokens ORDER BY token")[0, 0] == "kept")
            #expect(try c.query("SELECT job_id FROM herald.pruned_tokens WHERE token = 'gone'").int(0, 0) == prune)
            let rel = try c.query("SELECT state, attempts FROM herald.jobs WHERE id = $1", [.int(release)])
            #expect(rel[0, 0] == "available" && rel.int(0, 1) == 0, "a released job's attempt does not count")

            // A later job for the pruned token is flagged at claim, so it is discarded without a request.
            let again = try enqueue(c, token: "gone")
            let next = try store.claimer.claim(queues: [], limit: 10, leaseSeconds: 60)
            #expect(next.first { $0.id == again }?.tokenPruned == true)
            #expect(next.first { $0.id == release }?.tokenPruned == false)

            // Replay the dead letter: a fresh job, attempts reset, the dead letter gone.
            let replayed = try c.query("SELECT herald.retry_dead_letter($1)", [.int(d.int(0, 0)!)]).int(0, 0)!
            let j = try c.query("SELECT state, attempts, message->>'token' FROM herald.jobs WHERE id = $1", [.int(replayed)])
            #expect(j[0, 0] == "available" && j.int(0, 1) == 0 && j[0, 2] == "d")
            #expect(try c.query("SELECT count(*) FROM herald.dead_letters").int(0, 0) == 0)
            #expect(throws: PostgresError.self) { try c.query("SELECT herald.retry_dead_letter(987654)") }

            // A dead letter whose dedupe_key is pending again is kept, not dropped.
            let keyed = try c.query("SELECT herald.enqueue('{\"token\":\"k\"}', dedupe_key => 'welcome-1')").int(0, 0)!
            let held = try store.claimer.claim(queues: [], limit: 10, leaseSeconds: 60)
            #expect(held.contains { $0.id == keyed })
            try store.recorder.record([JobOutcome(id: keyed, attempt: 1, .dead(reason: "INVALID_ARGUMENT: x"))])
            let letter = try c.query("SELECT id FROM herald.dead_letters WHERE job_id = $1", [.int(keyed)]).int(0, 0)!
            _ = try c.query("SELECT herald.enqueue('{\"token\":\"k2\"}', dedupe_key => 'welcome-1')")
            #expect(throws: PostgresError.self) { try c.query("SELECT herald.retry_dead_letter($1)", [.int(letter)]) }
            #expect(try c.query("SELECT count(*) FROM herald.dead_letters WHERE id = $1", [.int(letter)]).int(0, 0) == 1)
        }
    }

    @Test func anApplicationPruneHookThatFailsLosesNoOutcome() throws {
        try withDatabase { c, _ in
            try c.execute("""
                CREATE OR REPLACE FUNCTION herald.prune_token(token text, reason text, job_id bigint) RETURNS void
                LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'my table is gone'; END $$;
                """)
            let id = try enqueue(c, token: "gone")
            let store = JobStore(connection: c)
            _ = try store.claimer.claim(queues: [], limit: 10, leaseSeconds: 60)
            var logged: [String] = []
            try store.recorder.record([JobOutcome(id: id, attempt: 1, .pruned(token: "gone", reason: "UNREGISTERED"))], log: { logged.append($0) })
            #expect(try c.query("SELECT state FROM herald.jobs WHERE id = $1", [.int(id)])[0, 0] == "discarded")
            #expect(try c.query("SELECT count(*) FROM herald.pruned_tokens").int(0, 0) == 1)
            #expect(logged.contains { $0.contains("my table is gone") })
        }
    }

    @Test func expiredLeasesAreTakenBackAndStaleOutcomesIgnored() throws {
        try withDatabase { c, _ in
            let id = try enqueue(c)
            let dying = JobStore(connection: c, workerID: "dying")
            #expect(try dying.claimer.claim(queues: [], limit: 1, leaseSeconds: 0.2).map(\.id) == [id])
            #expect(waitUntil(timeout: 10) { (try? c.query("SELECT locked_until < now() FROM herald.jobs").bool(0, 0)) == true })
            #expect(try LeaseRescue().runOnce(MaintenanceRun(connection: c))["rescued"] == 1)
            let healthy = JobStore(connection: c, workerID: "healthy")
            let again = try healthy.claimer.claim(queues: [], limit: 1, leaseSeconds: 60)
            #expect(again.map(\.id) == [id] && again.first?.attempt == 2)
            #expect(again.first?.lastError?.contains("lease expired") == true)
            let stale = try dying.recorder.record([JobOutcome(id: id, attempt: 1, .completed(messageName: "late"))])
            #expect(stale.stale == 1 && stale.finished == 0)
            #expect(try c.query("SELECT state, locked_by FROM herald.jobs")[0, 1] == "healthy")
        }
    }

    @Test func anOutcomeAppliesOnlyToTheClaimItBelongsTo() throws {
        try withDatabase { c, _ in
            let id = try enqueue(c)
            let store = JobStore(connection: c, workerID: "same-worker")
            let first = try #require(try store.claimer.claim(queues: [], limit: 1, leaseSeconds: 0.2).first)
            #expect(waitUntil(timeout: 10) { (try? LeaseRescue().runOnce(MaintenanceRun(connection: c))["rescued"]) == 1 })
            let second = try #require(try store.claimer.claim(queues: [], limit: 1, leaseSeconds: 60).first)
            #expect(second.attempt == first.attempt + 1)
            // The first claim's late answer does not settle the second claim.
            let late = try store.recorder.record([first.outcome(.completed(messageName: "late"))])
            #expect(late.stale == 1)
            #expect(try c.query("SELECT state FROM herald.jobs WHERE id = $1", [.int(id)])[0, 0] == "running")
            let current = try store.recorder.record([second.outcome(.retry(error: "INTERNAL: nul\u{0}byte", delay: 0))])
            #expect(current.retried == 1)
            #expect(try c.query("SELECT last_error FROM herald.jobs WHERE id = $1", [.int(id)])[0, 0] == "INTERNAL: nul byte",
                    "a NUL byte in an error cannot block recording")
        }
    }

    @Test func aQuotaPauseHoldsBackEveryWorkerOfTheProject() throws {
        try withDatabase { c, _ in
            _ = try enqueue(c)
            let other = JobStore(connection: c, workerID: "b", fcmProject: "project-a")
            try JobStore(connection: c, workerID: "a", fcmProject: "project-a").fcmProjectRates.hold("project-a", seconds: 60, reason: "QUOTA_EXCEEDED")
            #expect(try other.claimer.claim(queues: [], limit: 10, leaseSeconds: 60).isEmpty, "the whole project waits")
            #expect(try JobStore(connection: c, workerID: "c", fcmProject: "project-b").claimer.claim(queues: [], limit: 10, leaseSeconds: 60).count == 1,
                    "another project's workers do not")
            try c.query("UPDATE herald.project_pauses SET paused_until = now() - interval '1 second'")
            _ = try enqueue(c)
            #expect(try other.claimer.claim(queues: [], limit: 10, leaseSeconds: 60).count == 1, "and it ends")
        }
    }

    /// A quota pause of one project spreads that project's held retries over the window after it;
    /// the retries of every other project (and of the jobs of no project) keep their due times.
    @Test func aPauseSpreadsOnlyThePausedProjectsHeldRetries() throws {
        try withDatabase { c, _ in
            try c.query("""
                INSERT INTO herald.projects (name, fcm_project_id, credentials)
                VALUES ('a', 'fcm-a', '/keys/a.json'), ('b', 'fcm-b', '/keys/b.json')
                """)
            // Per project (and none): 5 retries due a minute ago and 1 job never tried.
            try c.query("""
                INSERT INTO herald.jobs (message, project, state, run_at, attempts)
                SELECT jsonb_build_object('token', coalesce(p, 'none') || '-' || g, 'data', jsonb_build_object('k', 'v')), p,
                       'scheduled', now() - interval '1 minute', CASE WHEN g <= 5 THEN 1 ELSE 0 END
                FROM unnest(ARRAY['a', 'b', NULL]) AS p, generate_series(1, 6) AS g
                """)
            func dueTimes() throws -> [String: Double] {
                let rows = try c.query("SELECT message->>'token', extract(epoch FROM run_at)::float8 FROM herald.jobs")
                return Dictionary(uniqueKeysWithValues: (0..<rows.rowCount).map { (rows[$0, 0]!, rows.double($0, 1)!) })
            }
            func moved(_ before: [String: Double], _ after: [String: Double]) -> Set<String> {
                Set(before.keys.filter { before[$0] != after[$0] })
            }
            let rates = JobStore(connection: c, workerID: "a", fcmProject: "fcm-a").fcmProjectRates
            let until = try c.query("SELECT extract(epoch FROM now())::float8 + 60").double(0, 0)!
            let before = try dueTimes()

            #expect(try rates.spreadHeldRetries(project: "a", fcmProject: "fcm-a", until: until, window: 10) == 5)
            let afterA = try dueTimes()
            #expect(moved(before, afterA) == Set((1...5).map { "a-\($0)" }), "only project a's retries move")
            for n in 1...5 {
                let due = afterA["a-\(n)"]!
                #expect(due >= until - 0.001 && due <= until + 10.001, "a-\(n) comes back within the window after the pause: \(due - until)")
            }

            // The jobs of no project (the pool's key, an FCM project no registry entry has).
            #expect(try rates.spreadHeldRetries(project: nil, fcmProject: "pool-fcm", until: until, window: 10) == 5)
            let afterNone = try dueTimes()
            #expect(moved(afterA, afterNone) == Set((1...5).map { "none-\($0)" }), "the jobs of no project alone")

            // The pool's key of the FCM project of b: its hold stops b's claims too, so b's retries
            // are spread with them.
            try c.query("UPDATE herald.jobs SET run_at = now() - interval '1 minute' WHERE project IS NULL")
            let beforeShared = try dueTimes()
            #expect(try rates.spreadHeldRetries(project: nil, fcmProject: "fcm-b", until: until, window: 10) == 10)
            #expect(moved(beforeShared, try dueTimes()) == Set((1...5).flatMap { ["none-\($0)", "b-\($0)"] }))
        }
    }

    /// In a backlog the project's bucket is spent before the claim, in a statement of its own;
    /// outside one, within the claim. Either way what a claim was granted and could not use goes
    /// back for the other workers, and no claim takes more than the bucket holds.
    @Test func projectTokensAreTakenBeforeTheClaimAndTheUnusedGiveBack() throws {
        try withDatabase { c, database in
            // The bucket refills by the time since refilled_at; a refilled_at ahead of now stops
            // that, so what each claim finds is exactly what the one before left.
            let tokens = "SELECT tokens FROM herald.project_rates WHERE project_id = 'project-a'"
            func stopRefilling() throws { try c.query("UPDATE herald.project_rates SET refilled_at = now() + interval '1 hour'") }
            // Calls of each function, inner ones included: the claim's own take counts too.
            func calls(_ function: String) throws -> Int {
                try c.query("SELECT pg_stat_force_next_flush()")
                return try c.query("SELECT coalesce(sum(calls), 0) FROM pg_stat_user_functions WHERE schemaname = 'herald' AND funcname = $1",
                                   [.text(function)]).int(0, 0) ?? 0
            }
            try c.query("SET track_functions = 'pl'")
            for n in 1...3 { _ = try enqueue(c, token: "t\(n)") }
            // 100 a second: a bucket of 10 tokens (a tenth of a second's worth).
            let first = JobStore(connection: c, workerID: "a", fcmProject: "project-a")
            first.claimer.fcmProjectRate = 100
            let claim = try first.claimer.claimBatch(queues: [], limit: 50, leaseSeconds: 60)
            #expect(claim.jobs.count == 3 && claim.heldBackFor == nil, "three jobs were there")
            #expect(try c.query(tokens).double(0, 0) == 7, "10 granted, 3 used, 7 given back")

            try stopRefilling()
            for n in 4...40 { _ = try enqueue(c, token: "t\(n)") }
            let second = JobStore(connection: c, workerID: "b", fcmProject: "project-a")
            second.claimer.fcmProjectRate = 100
            let limited = try second.claimer.claimBatch(queues: [], limit: 50, leaseSeconds: 60)
            #expect(limited.jobs.count == 7, "no more than the bucket held")
            #expect(limited.heldBackFor.map { $0 > 0 && $0 <= 0.1 } == true, "told when to come back: \(String(describing: limited.heldBackFor))")
            #expect(try c.query(tokens).double(0, 0) == 0)

            // Held back: a backlog, so the next claim takes its tokens first, and finds none.
            let (takesBefore, claimsBefore) = (try calls("take_project_tokens"), try calls("claim_batch"))
            try stopRefilling()
            let empty = try second.claimer.claimBatch(queues: [], limit: 50, leaseSeconds: 60)
            #expect(empty.jobs.isEmpty, "an empty bucket grants nothing, so nothing is claimed")
            #expect(empty.heldBackFor == 0.05, "back when the bucket holds half its burst (5 tokens at 100/s)")
            // Refilled: the grant of 10 is spent on 10 jobs of the backlog.
            try c.query("UPDATE herald.project_rates SET tokens = 10")
            let backlog = try second.claimer.claimBatch(queues: [], limit: 50, leaseSeconds: 60)
            #expect(backlog.jobs.count == 10 && backlog.heldBackFor != nil)
            #expect(try c.query(tokens).double(0, 0).map { $0 < 1 } == true)
            // Two takes, one claim: the empty grant needed no claim, the other claim took no tokens itself.
            #expect(try calls("take_project_tokens") == takesBefore + 2)
            #expect(try calls("claim_batch") == claimsBefore + 1)
            #expect(try c.query("SELECT count(*) FROM herald.jobs WHERE state = 'running'").int(0, 0) == 20)
        }
    }

    @Test func retentionZeroDeletesAtOnceAndOldFinishedJobsArePurged() throws {
        try withDatabase { c, _ in
            let a = try enqueue(c), b = try enqueue(c)
            let immediate = JobStore(connection: c, retention: 0)
            _ = try immediate.claimer.claim(queues: [], limit: 1, leaseSeconds: 60)
            try immediate.recorder.record([JobOutcome(id: a, attempt: 1, .completed(messageName: nil))])
            #expect(try c.query("SELECT count(*) FROM herald.jobs WHERE id = $1", [.int(a)]).int(0, 0) == 0)
            let kept = JobStore(connection: c, retention: 3600)
            _ = try kept.claimer.claim(queues: [], limit: 1, leaseSeconds: 60)
            try kept.recorder.record([JobOutcome(id: b, attempt: 1, .completed(messageName: nil))])
            let retention = Retention(retention: 3600)
            #expect(try retention.runOnce(MaintenanceRun(connection: c))["purged"] == 0)
            try c.query("UPDATE herald.jobs SET finished_at = now() - interval '2 hours' WHERE id = $1", [.int(b)])
            #expect(try retention.runOnce(MaintenanceRun(connection: c))["purged"] == 1)
        }
    }

    @Test func oneNotificationPerStatementNotPerRow() throws {
        try withDatabase { c, database in
            let listener = try database.connect()
            try listener.listen("herald_jobs")
            try c.query("INSERT INTO herald.jobs (message) SELECT jsonb_build_object('token', 't' || g) FROM generate_series(1, 1000) g")
            var received: [PGNotification] = []
            _ = waitUntil(timeout: 10) {
                received += (try? listener.waitForNotifications(timeout: 0.1)) ?? []
                return !received.isEmpty
            }
            // Anything else would have arrived with the first one; a second statement sends a second.
            received += try listener.waitForNotifications(timeout: 0.3)
            #expect(received.count == 1)
            // It names the projects of the rows (`-`: no project), for workers carrying many.
            #expect(received.first?.payload == "-")
            _ = try enqueue(c)
            #expect(waitUntil(timeout: 10) { ((try? listener.waitForNotifications(timeout: 0.1)) ?? []).count == 1 })
        }
    }

    @Test func aNotificationThatCameWithAnAnswerIsKeptForTheListener() throws {
        // A worker in a backlog claims statement after statement on its listening connection:
        // a NOTIFY then arrives with a statement's answer, libpq keeps it, and the socket is
        // never readable for it. The store loop takes such kept ones after every statement.
        try withDatabase { c, database in
            let listener = try database.connect()
            try listener.listen("herald_jobs")
            try c.query("INSERT INTO herald.jobs (message, project) VALUES ('{\"token\": \"t\"}', NULL)")
            // The answer of the next statement brings the notification with it at the latest
            // (a backend sends what it was told before it says it is ready again).
            _ = try listener.query("SELECT 1")
            var kept = listener.bufferedNotifications()
            if kept.isEmpty {
                // It came before the statement, on its own: the statement's read took it in.
                _ = try listener.query("SELECT 1")
                kept = listener.bufferedNotifications()
            }
            #expect(kept.map(\.payload) == ["-"])
            #expect(listener.bufferedNotifications().isEmpty, "taken once")
        }
    }

    @Test func jobsDueLaterWaitAsScheduledUntilAWorkerPromotesThem() throws {
        try withDatabase { c, _ in
            let later = try c.query("SELECT herald.enqueue('{\"token\":\"a\"}', now() + interval '1 hour')").int(0, 0)!
            try c.query("INSERT INTO herald.jobs (message, run_at) VALUES ('{\"token\":\"b\"}', now() + interval '2 hours')")
            let due = try enqueue(c)
            let states = try c.query("SELECT state, count(*) FROM herald.jobs GROUP BY state ORDER BY state")
            #expect((0..<states.rowCount).map { "\(states[$0, 0]!)=\(states[$0, 1]!)" } == ["available=1", "scheduled=2"],
                    "an INSERT or enqueue with a future run_at makes a scheduled job")
            let store = JobStore(connection: c)
            #expect(try store.claimer.claim(queues: [], limit: 10, leaseSeconds: 60).map(\.id) == [due], "scheduled jobs are not claimed")
            let ahead = try store.claimer.promoteDueJobs()
            #expect(ahead.promoted == 0)
            #expect(abs((ahead.nextDueIn ?? 0) - 3600) < 60, "the next one is due in an hour, not \(String(describing: ahead.nextDueIn))")

            // Its time comes: promoted, then claimed; the other one stays.
            try c.query("UPDATE herald.jobs SET run_at = now() - interval '1 second' WHERE id = $1", [.int(later)])
            #expect(try c.query("SELECT state FROM herald.jobs WHERE id = $1", [.int(later)])[0, 0] == "scheduled")
            let promotion = try store.claimer.promoteDueJobs()
            #expect(promotion.promoted == 1)
            #expect(abs((promotion.nextDueIn ?? 0) - 7200) < 60)
            #expect(try store.claimer.claim(queues: [], limit: 10, leaseSeconds: 60).map(\.id) == [later])

            // Moving an available job's run_at ahead makes it scheduled again.
            let moved = try enqueue(c, token: "m")
            try c.query("UPDATE herald.jobs SET run_at = now() + interval '5 minutes' WHERE id = $1", [.int(moved)])
            #expect(try c.query("SELECT state FROM herald.jobs WHERE id = $1", [.int(moved)])[0, 0] == "scheduled")
            let pending = try store.claimer.pendingWork(queues: [], horizon: 600)
            #expect(pending.due, "due within ten minutes")
            #expect(pending.later == (try c.query("SELECT count(*) FROM herald.jobs WHERE state = 'scheduled' AND run_at > now() + interval '10 minutes'").int(0, 0)))
        }
    }

    @Test func aScheduledJobHoldsItsDedupeKey() throws {
        try withDatabase { c, _ in
            let sql = "SELECT herald.enqueue('{\"token\":\"a\"}', run_at => now() + interval '1 day', dedupe_key => 'reminder-9')"
            let first = try c.query(sql).int(0, 0)!
            #expect(try c.query(sql).int(0, 0) == first)
            #expect(throws: PostgresError.self, "a plain INSERT of the same pending key fails on the unique index") {
                try c.query("INSERT INTO herald.jobs (message, dedupe_key) VALUES ('{\"token\":\"b\"}', 'reminder-9')")
            }
        }
    }

    @Test func legacyMulticastsJoinTheirCampaignWithEveryToken() throws {
        try withDatabase { c, _ in
            let campaign = try c.query("SELECT herald.create_campaign('legacy-blast')").int(0, 0)!
            let ids = try c.query("""
                SELECT array_length(herald.enqueue_legacy('{"registration_ids": ["a", "b", "c"], "data": {"k": "v"}}', campaign_id => $1), 1)
                """, [.int(campaign)]).int(0, 0)
            #expect(ids == 3)
            // Old code writing a multicast straight into herald.jobs, with the campaign.
            try c.query("""
                INSERT INTO herald.jobs (message, campaign_id) VALUES ('{"registration_ids": ["d", "e"], "data": {"k": "v"}}', $1)
                """, [.int(campaign)])
            #expect(try c.query("SELECT count(*) FROM herald.jobs WHERE campaign_id = $1", [.int(campaign)]).int(0, 0) == 5)
            let progress = try c.query("SELECT total, pending FROM herald.campaign_progress WHERE campaign_id = $1", [.int(campaign)])
            #expect(progress.int(0, 0) == 5 && progress.int(0, 1) == 5, "each token counted once")
            #expect(throws: PostgresError.self, "an unknown campaign is refused") {
                try c.query("SELECT herald.enqueue_legacy('{\"to\": \"x\"}', campaign_id => 987654)")
            }
        }
    }

    @Test func aCampaignWhoseJobsAreAllSettledCannotBePausedOrCancelled() throws {
        try withDatabase { c, _ in
            let campaign = try c.query("SELECT herald.create_campaign('done-already')").int(0, 0)!
            try c.query("INSERT INTO herald.jobs (message, campaign_id) VALUES ('{\"token\": \"a\"}', $1)", [.int(campaign)])
            let store = JobStore(connection: c)
            let job = try #require(try store.claimer.claim(queues: [], limit: 1, leaseSeconds: 60).first)
            try store.recorder.record([job.outcome(.completed(messageName: "projects/p/messages/1"))])
            // Sent, and the maintenance leader has not looked yet: the table still says running.
            #expect(try c.query("SELECT state FROM herald.campaigns WHERE id = $1", [.int(campaign)])[0, 0] == "running")
            #expect(throws: PostgresError.self) { try c.query("SELECT herald.pause_campaign($1)", [.int(campaign)]) }
            #expect(throws: PostgresError.self) { try c.query("SELECT herald.cancel_campaign($1)", [.int(campaign)]) }
            #expect(try c.query("SELECT state FROM herald.campaign_progress WHERE campaign_id = $1", [.int(campaign)])[0, 0] == "finished")
        }
    }

    @Test func queueStatsShowsCountsAndOldestAge() throws {
        try withDatabase { c, _ in
            _ = try c.query("SELECT herald.enqueue('{\"token\":\"a\"}', now() - interval '10 minutes')")
            _ = try c.query("SELECT herald.enqueue('{\"token\":\"b\"}', queue => 'marketing')")
            let stats = try c.query("SELECT count, extract(epoch FROM oldest_available_age) FROM herald.queue_stats WHERE queue = 'default' AND state = 'available'")
            #expect(stats.int(0, 0) == 1)
            #expect((stats.double(0, 1) ?? 0) >= 590)
            _ = try c.query("SELECT herald.enqueue('{\"token\":\"c\"}', now() + interval '1 day')")
            let scheduled = try c.query("SELECT count, scheduled FROM herald.queue_stats WHERE queue = 'default' AND state = 'scheduled'")
            #expect(scheduled.int(0, 0) == 1 && scheduled.int(0, 1) == 1)
        }
    }

    @Test func groupOperationsFromSQL() throws {
        try withDatabase { c, _ in
            let id = try c.query("SELECT herald.enqueue_group_op('create', 'user-7', ARRAY['t1', 't2'])").int(0, 0)!
            let store = JobStore(connection: c)
            let job = try #require(try store.claimer.claim(queues: [], limit: 1, leaseSeconds: 60).first)
            #expect(job.id == id && job.kind == .group && job.groupKey == nil)
            try store.recorder.record([job.outcome(.completed(messageName: nil, group: GroupChange(operation: .create, name: "user-7", key: "KEY1", tokens: ["t1", "t2"])))])
            let g = try c.query("SELECT notification_key, array_to_string(members, ',') FROM herald.device_groups WHERE name = 'user-7'")
            #expect(g[0, 0] == "KEY1" && g[0, 1] == "t1,t2")
            _ = try c.query("SELECT herald.enqueue_group_op('remove', 'user-7', ARRAY['t1', 't2'])")
            let removal = try #require(try store.claimer.claim(queues: [], limit: 1, leaseSeconds: 60).first)
            #expect(removal.groupKey == "KEY1" && removal.groupMembers == ["t1", "t2"])
            try store.recorder.record([removal.outcome(.completed(messageName: nil, group: GroupChange(operation: .remove, name: "user-7", key: "KEY1", tokens: ["t1", "t2"])))])
            #expect(try c.query("SELECT count(*) FROM herald.device_groups").int(0, 0) == 0, "removing every member deletes the group")
            #expect(throws: PostgresError.self) { try c.query("SELECT herald.enqueue_group_op('rename', 'x', ARRAY['t'])") }
        }
    }
}

/// A value shared with the threads a test starts, behind a lock.
final class UnsafeSendableBox<T>: @unchecked Sendable {
    private var stored: T
    private let lock = NSLock()
    init(_ value: T) { stored = value }
    var value: T { lock.lock(); defer { lock.unlock() }; return stored }
    func mutate(_ body: (inout T) -> Void) { lock.lock(); body(&stored); lock.unlock() }
}
