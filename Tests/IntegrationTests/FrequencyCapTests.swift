import Foundation
import Testing
import Postgres
import TestSupport

/// Frequency caps and quiet hours per queue, enforced in the claim (herald.claim_batch at a time
/// the test gives: p_now).
@Suite(.serialized) struct FrequencyCapTests {
    func refusal(_ body: () throws(PostgresError) -> Void) -> PostgresError? {
        do { try body(); return nil } catch { return error }
    }

    /// Claims what is due at `at` (an ISO time); returns the tokens claimed.
    func claim(_ c: PGConnection, at: String, limit: Int = 50) throws -> [String] {
        // What the workers' promotion does at that time.
        try c.query("UPDATE herald.jobs SET state = 'available' WHERE state = 'scheduled' AND run_at <= $1::timestamptz", [.text(at)])
        let rows = try c.query("""
            SELECT (j.message::jsonb)->>'token', j.token_pruned, j.last_error
            FROM herald.claim_batch(NULL, $2, 60, 'test-worker', p_now => $1::timestamptz) c, unnest(c.claimed) j ORDER BY j.id
            """, [.text(at), .int(limit)])
        return (0..<rows.rowCount).map { rows[$0, 1] == "t" ? "discarded:" + rows[$0, 0]! : rows[$0, 0]! }
    }

    func enqueue(_ c: PGConnection, _ token: String, queue: String = "marketing", at: String) throws {
        _ = try c.query("SELECT herald.enqueue(jsonb_build_object('token', $1::text, 'notification', jsonb_build_object('title', 'Sale')), $3::timestamptz, queue => $2)",
                        [.text(token), .text(queue), .text(at)])
    }

    @Test func quietHoursWaitInTheDevicesZoneAndACapHoldsADevice() throws {
        let database = try TestDatabase.fresh()
        defer { database.drop() }
        let c = try database.connect()
        try c.query("SELECT herald.set_quiet_hours('marketing', '21:00', '08:00')")
        try c.query("SELECT herald.set_frequency_cap('marketing', 2, '1 day')")
        try c.query("SELECT herald.touch_token('istanbul-device', time_zone => 'Europe/Istanbul')")
        // 20:30 UTC is 23:30 in Istanbul (quiet) and 20:30 for a device of unknown zone (UTC).
        let evening = "2026-06-01 20:30:00+00"
        try enqueue(c, "istanbul-device", at: "2026-06-01 20:00:00+00")
        try enqueue(c, "utc-device", at: "2026-06-01 20:00:00+00")
        try enqueue(c, "utc-device", queue: "default", at: "2026-06-01 20:00:00+00")
        #expect(try claim(c, at: evening).sorted() == ["utc-device", "utc-device"])
        let waiting = try c.query("SELECT state, run_at = '2026-06-02 08:00:00 Europe/Istanbul'::timestamptz, attempts FROM herald.jobs WHERE message->>'token' = 'istanbul-device'")
        #expect(waiting[0, 0] == "scheduled" && waiting[0, 1] == "t" && waiting[0, 2] == "0", "waits for 08:00 in Istanbul, not dropped")
        #expect(try claim(c, at: "2026-06-02 04:59:00+00").isEmpty, "07:59 in Istanbul")
        #expect(try claim(c, at: "2026-06-02 05:00:00+00") == ["istanbul-device"], "08:00 in Istanbul: the next morning")

        // The cap, 2 a day per device across the queue's jobs: the third waits for a day after the first.
        for _ in 0..<3 { try enqueue(c, "capped-device", at: "2026-06-02 12:00:00+00") }
        #expect(try claim(c, at: "2026-06-02 12:00:00+00") == ["capped-device", "capped-device"])
        let third = try c.query("SELECT run_at = '2026-06-03 12:00:00+00'::timestamptz FROM herald.jobs WHERE message->>'token' = 'capped-device' AND state = 'scheduled'")
        #expect(third.rowCount == 1 && third[0, 0] == "t")
        #expect(try claim(c, at: "2026-06-03 11:59:59+00").isEmpty)
        #expect(try claim(c, at: "2026-06-03 12:00:01+00") == ["capped-device"])

        // A queue that discards over the cap: the job is handed to the worker flagged, with the reason.
        try c.query("SELECT herald.set_frequency_cap('digest', 1, '1 hour', discard => true)")
        for _ in 0..<2 { try enqueue(c, "busy-device", queue: "digest", at: "2026-06-03 12:00:00+00") }
        #expect(try claim(c, at: "2026-06-03 12:00:00+00") == ["busy-device", "discarded:busy-device"])
        let reason = try c.query("SELECT last_error FROM herald.jobs WHERE queue = 'digest' AND last_error IS NOT NULL")[0, 0]!
        #expect(reason.hasPrefix("CAPPED:") && reason.contains("the cap: 1"), "\(reason)")

        // NULL removes them.
        try c.query("SELECT herald.set_quiet_hours('marketing', NULL, NULL)")
        try c.query("SELECT herald.set_frequency_cap('marketing', NULL, NULL)")
        try enqueue(c, "istanbul-device", at: "2026-06-03 20:00:00+00")
        #expect(try claim(c, at: "2026-06-03 20:30:00+00") == ["istanbul-device"])
    }

    @Test func badInputIsRefusedNamingItAndChangesNothing() throws {
        let database = try TestDatabase.fresh()
        defer { database.drop() }
        let c = try database.connect()
        for (sql, named) in [("SELECT herald.set_frequency_cap('m', 0, '1 day')", "max_per_token must be between 1 and 1000, not 0"),
                             ("SELECT herald.set_frequency_cap('m', -2, '1 day')", "not -2"),
                             ("SELECT herald.set_frequency_cap('m', 5000, '1 day')", "not 5000"),
                             ("SELECT herald.set_frequency_cap('m', 3, '0')", "per must be a positive interval"),
                             ("SELECT herald.set_frequency_cap('m', 3, '-1 day')", "-1 days"),
                             ("SELECT herald.set_frequency_cap('m', 3, '100 years')", "100 years"),
                             ("SELECT herald.set_frequency_cap('m', 3, NULL)", "give both"),
                             ("SELECT herald.set_frequency_cap('', 3, '1 day')", "queue name"),
                             ("SELECT herald.set_quiet_hours('m', '22:00', '22:00')", "both 22:00:00"),
                             ("SELECT herald.set_quiet_hours('m', '22:00', NULL)", "give both")] {
            let error = refusal { () throws(PostgresError) in _ = try c.query(sql) }
            #expect(error?.serverMessage?.contains(named) == true, "\(sql): \(String(describing: error))")
        }
        let left = try c.query("SELECT count(*) FROM herald.queues").int(0, 0)
        #expect(left == 0)
    }

    /// A benchmark figure: the claim's cost with a cap and quiet hours on, against the same claim
    /// without (5,000 jobs to 5,000 tokens, batches of 100, at a time outside the quiet hours).
    /// The claim's cost with a cap and quiet hours against without, measured as the CPU time of
    /// the PostgreSQL backend that runs the claims (read from /proc, so other load on the machine
    /// moves it little) and as wall-clock time. Printed; the target (1.2x) is a benchmark figure.
    @Test func claimCostWithCapsOnAgainstWithout() throws {
        let database = try TestDatabase.fresh()
        defer { database.drop() }
        let c = try database.connect()
        let backend = try #require(try c.query("SELECT pg_backend_pid()").int(0, 0))
        func cpuSeconds() -> Double {
            // utime and stime, fields 14 and 15 of /proc/PID/stat (after the command's parentheses).
            guard let stat = try? String(contentsOfFile: "/proc/\(backend)/stat", encoding: .utf8),
                  let close = stat.lastIndex(of: ")") else { return .nan }
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            return (Double(fields[11]) ?? .nan) / 100 + (Double(fields[12]) ?? .nan) / 100
        }
        let jobs = 20_000
        func run(_ queue: String) throws -> (wall: Double, cpu: Double) {
            try c.query("""
                INSERT INTO herald.jobs (message, queue, run_at)
                SELECT jsonb_build_object('token', $1::text || '-' || g), $1, '2026-06-01 10:00:00+00' FROM generate_series(1, $2::integer) g
                """, [.text(queue), .int(jobs)])
            try c.execute("ANALYZE herald.jobs")
            let start = Date()
            let cpuStart = cpuSeconds()
            var claimed = 0
            while true {
                let n = try c.query("SELECT cardinality(c.claimed) FROM herald.claim_batch(ARRAY[$1::text], 100, 60, 'bench', p_now => '2026-06-01 12:00:00+00') c",
                                    [.text(queue)]).int(0, 0) ?? 0
                if n == 0 { break }
                claimed += n
            }
            #expect(claimed == jobs)
            return (Date().timeIntervalSince(start), cpuSeconds() - cpuStart)
        }
        try c.query("SELECT herald.set_frequency_cap('capped', 3, '1 day')")
        try c.query("SELECT herald.set_quiet_hours('capped', '21:00', '08:00')")
        try c.query("SELECT herald.set_quiet_hours('quiet', '21:00', '08:00')")
        try c.query("SELECT herald.set_frequency_cap('cap-only', 3, '1 day')")
        let without = try run("plain")
        let quiet = try run("quiet")
        let cap = try run("cap-only")
        let with = try run("capped")
        func figures(_ name: String, _ r: (wall: Double, cpu: Double)) -> String {
            String(format: "%@ %.1f µs CPU per job (%.2fx), %.0f claims/s (%.2fx the time)", name, r.cpu * 1e6 / Double(jobs),
                   r.cpu / without.cpu, Double(jobs) / r.wall, r.wall / without.wall)
        }
        print("claim cost, \(jobs) jobs in batches of 100, PostgreSQL backend: " + [
            figures("without rules", without), figures("quiet hours", quiet), figures("a cap", cap), figures("a cap and quiet hours", with),
        ].joined(separator: "; "))
    }
}
