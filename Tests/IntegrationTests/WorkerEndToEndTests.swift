import Emulator
import Foundation
import JSON
import Postgres
import Queue
import Testing
import TestSupport

@Suite(.serialized) struct WorkerEndToEndTests {
    @Test func fourProcessesDeliverTenThousandJobsExactlyOnce() throws {
        // Answers 10 ms late, so streams overlap at the emulator: over TLS it reads a record at
        // a time and answers at once, and with no delay a connection's streams would be seen one
        // by one however many the worker multiplexes.
        let stack = try WorkerStack(latencyMilliseconds: 10)
        defer { stack.close() }
        try stack.enqueue(10_000, prefix: "device-")
        let run = try stack.work(["--drain", "--processes", "4", "--poll-interval", "0.2"])
        #expect(run.status == 0, "\(run.output)")
        #expect(try stack.count("SELECT count(*) FROM herald.jobs WHERE state = 'completed' AND fcm_message_name LIKE 'projects/e2e-project/messages/%'") == 10_000)
        #expect(try stack.count("SELECT count(*) FROM herald.jobs WHERE state <> 'completed'") == 0)
        let delivered = stack.emulator.deliveredMessages()
        #expect(delivered.count == 10_000, "every job sent once, none twice")
        #expect(Set(delivered.map(\.target)).count == 10_000)
        // The name FCM returned is the one recorded.
        let sample = try #require(delivered.first)
        let token = String(sample.target.dropFirst("token:".count))
        #expect(try stack.connection.query("SELECT fcm_message_name FROM herald.jobs WHERE message->>'token' = $1", [.text(token)])[0, 0] == sample.name)
        #expect((stack.emulator.statistics["http2_requests"]?.intValue ?? 0) >= 10_000, "sent over HTTP/2")
        #expect(stack.emulator.statistics["http1_requests"]?.intValue == 0)
        // Multiplexed: many streams share a connection, never more than about 100 on one.
        let perConnection = stack.emulator.statistics["peak_streams_per_connection"]?.intValue ?? 0
        #expect(perConnection > 10 && perConnection <= 100, "peak streams per connection: \(perConnection)")
        // A connection for every 100 requests the window holds (at most 1,024: 11), plus token requests.
        #expect((stack.emulator.statistics["connections_accepted"]?.intValue ?? 0) <= 4 * 11 + 4,
                "a few connections per process (the window over 100 streams), plus token requests")
    }

    /// Plain http:// to a loopback emulator, as a user may still ask for it (`herald emulator
    /// --tls off`): the worker speaks HTTP/1.1 to it on connections it keeps, and delivers
    /// every job once; the retried 503 and the pruned token come out as they do over TLS.
    @Test func aPlainHTTPEmulatorIsReachedOverHTTP1() throws {
        let stack = try WorkerStack(transport: .cleartext)
        defer { stack.close() }
        #expect(stack.emulator.baseURL.hasPrefix("http://") && stack.environment["HERALD_CA_FILE"] == nil)
        try stack.enqueue(3_000, prefix: "plain-")
        try stack.connection.query("""
            INSERT INTO herald.jobs (message) VALUES ('{"token": "fail-unavailable-1-plain"}'), ('{"token": "fail-unregistered-plain"}')
            """)
        let run = try stack.work(["--drain", "--processes", "2", "--poll-interval", "0.2"])
        #expect(run.status == 0, "\(run.output)")
        #expect(try stack.count("SELECT count(*) FROM herald.jobs WHERE state = 'completed'") == 3_001)
        #expect(try stack.count("SELECT count(*) FROM herald.jobs WHERE state = 'discarded'") == 1)
        #expect(try stack.count("SELECT attempts FROM herald.jobs WHERE message->>'token' = 'fail-unavailable-1-plain'") == 2)
        let delivered = stack.emulator.deliveredMessages()
        #expect(delivered.count == 3_001 && Set(delivered.map(\.target)).count == 3_001, "every job sent once, none twice")
        let statistics = stack.emulator.statistics
        let http1 = statistics["http1_requests"]?.intValue ?? 0
        let connections = statistics["connections_accepted"]?.intValue ?? 0
        #expect(statistics["http2_requests"]?.intValue == 0, "\(statistics)")
        #expect(http1 >= 3_003, "\(http1) HTTP/1.1 requests")
        // Kept alive: a connection carries request after request, not one each.
        #expect(connections * 20 < http1, "\(connections) connections for \(http1) requests")
        print("plain http, 2 processes: \(http1) HTTP/1.1 requests on \(connections) connections")
    }

    /// Each claimed job leaves its entry in the claim index until a VACUUM; a drain must not wait
    /// for autovacuum (a minute apart at best) while claims step over more and more of them.
    @Test func aWorkerVacuumsTheJobsTableWhenDeadRowsPileUp() throws {
        let stack = try WorkerStack()
        defer { stack.close() }
        let vacuumCount = "SELECT vacuum_count FROM pg_stat_user_tables WHERE relid = 'herald.jobs'::regclass"
        let pool = try HeraldProcess(["work", "--processes", "2", "--poll-interval", "0.2"], environment: stack.environment)
        try pool.start()
        defer { pool.signal(SIGTERM); _ = pool.wait(timeout: 60) }
        #expect(waitUntil(timeout: 60) { ((try? Administration.connectedWorkers(stack.connection)) ?? 0) >= 2 })
        let before = try stack.count(vacuumCount)
        // 120,000 jobs finished and purged leave 120,000 dead row versions, past the minimum.
        try stack.connection.query("""
            INSERT INTO herald.jobs (message, state, finished_at)
            SELECT jsonb_build_object('token', 'gone-' || g), 'completed', now() FROM generate_series(1, 120000) AS g
            """)
        try stack.connection.query("DELETE FROM herald.jobs WHERE state = 'completed'")
        // This session's counts reach the statistics now rather than within the next 10 s.
        try stack.connection.query("SELECT pg_stat_force_next_flush()")
        #expect(waitUntil(timeout: 30, interval: 0.2) { ((try? stack.count(vacuumCount)) ?? before) > before },
                "herald.jobs was not vacuumed by the workers (autovacuum runs are not counted in vacuum_count)")
        #expect(try stack.count("SELECT n_dead_tup FROM pg_stat_user_tables WHERE relid = 'herald.jobs'::regclass") < 100_000)
    }

    @Test func everyOutcomeOfTheErrorTable() throws {
        let stack = try WorkerStack()
        defer { stack.close() }
        let c = stack.connection
        try c.query("INSERT INTO herald.device_tokens (token) VALUES ('fail-unregistered-1'), ('kept-1')")
        func add(_ message: String, maxAttempts: Int = 25) throws -> Int {
            try c.query("SELECT herald.enqueue($1::jsonb, max_attempts => $2)", [.text(message), .int(maxAttempts)]).int(0, 0)!
        }
        let ok = try add(#"{"token":"kept-1","notification":{"title":"t"}}"#)
        let unregistered = try add(#"{"token":"fail-unregistered-1","data":{"k":"v"}}"#)
        let invalid = try add(#"{"token":"fail-invalid-1","data":{"k":"v"}}"#)
        let mismatch = try add(#"{"token":"fail-mismatch-1","data":{"k":"v"}}"#)
        let auth = try add(#"{"token":"fail-auth-1","data":{"k":"v"}}"#)
        let quota = try add(#"{"token":"fail-quota-1-a","data":{"k":"v"}}"#)
        let unavailable = try add(#"{"token":"fail-unavailable-1-a","data":{"k":"v"}}"#)
        let internalTwice = try add(#"{"token":"fail-internal-2-a","data":{"k":"v"}}"#)
        let exhausted = try add(#"{"token":"fail-internal-b","data":{"k":"v"}}"#, maxAttempts: 2)
        let badTTL = try add(#"{"token":"never-sent","android":{"ttl":"abc"}}"#)
        let twoTargets = try add(#"{"token":"never-sent-2","topic":"news"}"#)
        let notObject = try add(#"["token"]"#)

        let run = try stack.work(["--drain", "--processes", "1", "--poll-interval", "0.2"])
        #expect(run.status == 0, "\(run.output)")

        func state(_ id: Int) throws -> String? { try c.query("SELECT state FROM herald.jobs WHERE id = $1", [.int(id)])[0, 0] }
        func reason(_ id: Int) throws -> String? { try c.query("SELECT reason FROM herald.dead_letters WHERE job_id = $1", [.int(id)])[0, 0] }
        #expect(try state(ok) == "completed")
        #expect(try state(unregistered) == "discarded")
        #expect(try stack.count("SELECT count(*) FROM herald.pruned_tokens WHERE token = 'fail-unregistered-1' AND job_id = $1", [.int(unregistered)]) == 1)
        #expect(try stack.count("SELECT count(*) FROM herald.device_tokens WHERE token = 'fail-unregistered-1'") == 0)
        #expect(try stack.count("SELECT count(*) FROM herald.device_tokens WHERE token = 'kept-1'") == 1)
        #expect(try reason(invalid)?.hasPrefix("INVALID_ARGUMENT") == true)
        #expect(try reason(mismatch)?.hasPrefix("SENDER_ID_MISMATCH") == true)
        #expect(try reason(auth)?.hasPrefix("THIRD_PARTY_AUTH_ERROR") == true)
        for id in [quota, unavailable, internalTwice] {
            #expect(try state(id) == "completed", "job \(id) was retried until delivered")
        }
        #expect(try stack.count("SELECT attempts FROM herald.jobs WHERE id = $1", [.int(internalTwice)]) == 3)
        // A quota answer is a snooze: the second request is still the first attempt.
        #expect(try stack.count("SELECT attempts FROM herald.jobs WHERE id = $1", [.int(quota)]) == 1)
        #expect(try stack.count("SELECT snoozes FROM herald.jobs WHERE id = $1", [.int(quota)]) == 1)
        let gaveUp = try #require(try reason(exhausted))
        #expect(gaveUp.contains("gave up after 2 attempts") && gaveUp.contains("INTERNAL"))
        #expect(try stack.count("SELECT jsonb_array_length(errors) FROM herald.dead_letters WHERE job_id = $1", [.int(exhausted)]) == 2)
        #expect(try reason(badTTL)?.contains(#"message.android.ttl: "abc" is not a duration"#) == true)
        #expect(try reason(twoTargets)?.contains("message") == true)
        #expect(try reason(notObject) == "message: expected an object, got an array")
        #expect(stack.emulator.deliveredMessages(token: "never-sent").isEmpty && stack.emulator.deliveredMessages(token: "never-sent-2").isEmpty)
        // Requests: 1 ok + 4 permanent failures + 2 (quota) + 2 (unavailable) + 3 (internal x2) + 2 (exhausted); invalid messages cost none.
        #expect(stack.emulator.statistics["requests"]?.intValue == 14)
        #expect(stack.emulator.retryAfterViolations == 0, "no retry came before its Retry-After")
        // A replayed dead letter is a fresh job that is sent again.
        let dead = try c.query("SELECT id FROM herald.dead_letters WHERE job_id = $1", [.int(invalid)]).int(0, 0)!
        let replay = try c.query("SELECT herald.retry_dead_letter($1)", [.int(dead)]).int(0, 0)!
        #expect(try stack.count("SELECT attempts FROM herald.jobs WHERE id = $1", [.int(replay)]) == 0)
    }

    @Test func aPrunedTokensPendingJobsAreDiscardedWithoutARequest() throws {
        let stack = try WorkerStack()
        defer { stack.close() }
        let c = stack.connection
        try c.query("INSERT INTO herald.pruned_tokens (token, reason) VALUES ('old-token', 'UNREGISTERED: earlier')")
        let id = try c.query(#"SELECT herald.enqueue('{"token":"old-token","notification":{"title":"t"}}')"#).int(0, 0)!
        let run = try stack.work(["--drain", "--processes", "1", "--poll-interval", "0.2"])
        #expect(run.status == 0, "\(run.output)")
        let row = try c.query("SELECT state, last_error FROM herald.jobs WHERE id = $1", [.int(id)])
        #expect(row[0, 0] == "discarded" && row[0, 1]?.contains("pruned earlier") == true)
        #expect(stack.emulator.statistics["requests"]?.intValue == 0)
    }

    @Test func killMinusNineLosesNothing() throws {
        let stack = try WorkerStack(latencyMilliseconds: 20)
        defer { stack.close() }
        try stack.enqueue(3_000, prefix: "crash-")
        let worker = try HeraldProcess(["work", "--processes", "1", "--concurrency", "64", "--lease", "2", "--poll-interval", "0.2"],
                                       environment: stack.environment)
        try worker.start()
        defer { worker.signal(SIGKILL); worker.wait(timeout: 10) }
        // Mid-run: some delivered, many still queued.
        #expect(waitUntil(timeout: 60) { stack.emulator.deliveredMessages().count >= 300 })
        let holder = try stack.connection.query("SELECT locked_by FROM herald.jobs WHERE state = 'running' AND locked_by IS NOT NULL LIMIT 1")
        let pid = try #require(holder[0, 0].flatMap { Int32($0.split(separator: ":").dropLast().last!) })
        #expect(pid != worker.pid, "the job is held by a worker process, not the supervisor")
        kill(pid, SIGKILL)
        // The supervisor starts another worker, which takes the dead one's leases back when they expire.
        #expect(waitUntil(timeout: 120) { (try? stack.count("SELECT count(*) FROM herald.jobs WHERE state <> 'completed'")) == 0 },
                "\(worker.output)")
        let tokens = Set(stack.emulator.deliveredMessages().map(\.target))
        #expect(tokens.count == 3_000, "every job reached FCM")
        #expect(worker.output.contains("was killed by signal 9"))
        worker.signal(SIGTERM)
        #expect(worker.wait(timeout: 60) == 0)
    }

    @Test func sigtermFinishesInFlightAndPutsTheRestBackUncounted() throws {
        let stack = try WorkerStack(latencyMilliseconds: 1500)
        defer { stack.close() }
        try stack.enqueue(500, prefix: "term-")
        let worker = try HeraldProcess(["work", "--processes", "1", "--concurrency", "50", "--poll-interval", "0.2"],
                                       environment: stack.environment)
        try worker.start()
        // Claimed is not yet sent: wait until the sends are at FCM (each held there 1.5 s).
        #expect(waitUntil(timeout: 60) {
            (try? stack.count("SELECT count(*) FROM herald.jobs WHERE state = 'running'")) ?? 0 > 0
                && stack.emulator.serverStatistics.activeStreams > 0
        })
        worker.signal(SIGTERM)
        #expect(worker.wait(timeout: 60) == 0, "\(worker.output)")
        #expect(try stack.count("SELECT count(*) FROM herald.jobs WHERE state = 'running'") == 0)
        let completed = try stack.count("SELECT count(*) FROM herald.jobs WHERE state = 'completed'")
        #expect(completed > 0 && completed <= 100, "the requests in flight finished; nothing new was claimed")
        #expect(completed == stack.emulator.deliveredMessages().count)
        #expect(try stack.count("SELECT count(*) FROM herald.jobs WHERE state = 'available' AND attempts = 0") == 500 - completed)
    }

    @Test func aProjectQuotaSlowsEveryWorkerAndLosesNothing() throws {
        var scenario = Scenario()
        scenario.quota = Scenario.Quota(perMinute: 6000, burst: 100, window: .continuous)
        // The older answer (QuotaFailure project:ID with Retry-After), which Herald reads today.
        scenario.quotaAnswer = .legacy
        let stack = try WorkerStack(scenario: scenario)
        defer { stack.close() }
        try stack.enqueue(300, prefix: "quota-")
        let run = try stack.work(["--drain", "--processes", "2", "--poll-interval", "0.2"], timeout: 240)
        #expect(run.status == 0, "\(run.output)")
        #expect(try stack.count("SELECT count(*) FROM herald.jobs WHERE state = 'completed'") == 300)
        #expect(try stack.count("SELECT count(*) FROM herald.jobs WHERE state = 'completed' AND last_error LIKE 'QUOTA_EXCEEDED%'") > 0,
                "the quota was hit and retried")
        #expect(try stack.count("SELECT count(*) FROM herald.project_pauses WHERE project_id = 'e2e-project'") == 1,
                "the pause was shared with the other worker")
        #expect(Set(stack.emulator.deliveredMessages().map(\.target)).count == 300)
    }

    @Test func aFlakyFCMDeliversEveryJobExactlyOnce() throws {
        // A tenth of all answers fail at random (503 or 500); four processes retry through it.
        var scenario = Scenario()
        scenario.seed = 7
        scenario.errorRate = 0.1
        scenario.randomErrors = [ErrorAnswer(code: .unavailable), ErrorAnswer(code: .internal)]
        let stack = try WorkerStack(scenario: scenario)
        defer { stack.close() }
        try stack.enqueue(1_000, prefix: "flaky-")
        let run = try stack.work(["--drain", "--processes", "4", "--poll-interval", "0.2"], timeout: 240)
        #expect(run.status == 0, "\(run.output)")
        #expect(try stack.count("SELECT count(*) FROM herald.jobs WHERE state = 'completed'") == 1_000)
        #expect(try stack.count("SELECT count(*) FROM herald.jobs WHERE attempts > 1") > 30, "many jobs needed a retry")
        #expect(try stack.count("SELECT count(*) FROM herald.dead_letters") == 0)
        let delivered = stack.emulator.deliveredMessages().map(\.target)
        #expect(delivered.count == 1_000 && Set(delivered).count == 1_000, "each delivered once")
    }

    @Test func slowAnswersKeepTheirLeaseAndAreNotSentTwice() throws {
        // Each answer takes longer than the lease: the worker extends the leases it holds.
        let stack = try WorkerStack(latencyMilliseconds: 3000)
        defer { stack.close() }
        try stack.enqueue(50, prefix: "slow-")
        let run = try stack.work(["--drain", "--processes", "2", "--lease", "2", "--poll-interval", "0.2"])
        #expect(run.status == 0, "\(run.output)")
        #expect(try stack.count("SELECT count(*) FROM herald.jobs WHERE state = 'completed' AND attempts = 1") == 50)
        #expect(stack.emulator.deliveredMessages().count == 50, "no lease ran out, so nothing was sent twice")
        #expect(!run.output.contains("took back"))
    }

    @Test func badCredentialsStopStartUpNamingTheFile() throws {
        let stack = try WorkerStack()
        defer { stack.close() }
        var environment = stack.environment
        environment["GOOGLE_APPLICATION_CREDENTIALS"] = "/nonexistent/sa.json"
        let missing = try HeraldProcess.run(["work", "--drain"], environment: environment, timeout: 60)
        #expect(missing.status != 0 && missing.status != nil)
        #expect(missing.output.contains("/nonexistent/sa.json"))
        let broken = NSTemporaryDirectory() + "herald-broken-\(UUID().uuidString).json"
        try #"{"type":"service_account","project_id":"p","client_email":"a@b","private_key":"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"}"#
            .write(toFile: broken, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: broken) }
        environment["GOOGLE_APPLICATION_CREDENTIALS"] = broken
        let bad = try HeraldProcess.run(["work", "--drain"], environment: environment, timeout: 60)
        #expect(bad.status != 0 && bad.status != nil)
        #expect(bad.output.contains(broken) && bad.output.contains("private_key"))
        #expect(!bad.output.contains("AAAA"), "no key material in the error")
    }

    @Test func accessTokensAreRenewedBeforeTheyExpire() throws {
        let stack = try WorkerStack(tokenLifetimeSeconds: 2)
        defer { stack.close() }
        // Jobs due over four seconds: the worker needs more than one token to send them.
        try stack.connection.query("""
            INSERT INTO herald.jobs (message, run_at)
            SELECT jsonb_build_object('token', 'renew-' || g), now() + g * interval '40 milliseconds' FROM generate_series(1, 100) g
            """)
        let run = try stack.work(["--drain", "--processes", "1", "--poll-interval", "0.1"])
        #expect(run.status == 0, "\(run.output)")
        #expect(try stack.count("SELECT count(*) FROM herald.jobs WHERE state = 'completed'") == 100)
        #expect(stack.emulator.tokensIssued >= 2)
        #expect(!run.output.contains("ya29") && !run.output.contains("Bearer "), "no access token in the logs")
    }
}
