import Foundation
import Testing
import Postgres
import Queue
@testable import Worker
import TestSupport

/// The token registry that ages: herald.touch_token, herald.age_tokens (a clock the test
/// controls), herald.set_token_aging, and campaigns skipping stale tokens at the emulator.
@Suite(.serialized) struct TokenRegistryTests {
    func refusal(_ body: () throws(PostgresError) -> Void) -> PostgresError? {
        do { try body(); return nil } catch { return error }
    }

    func state(_ c: PGConnection, _ token: String) throws -> String {
        let row = try c.query("""
            SELECT CASE WHEN EXISTS (SELECT 1 FROM herald.pruned_tokens p WHERE p.token = $1) THEN 'pruned'
                        WHEN (SELECT stale_at FROM herald.device_tokens d WHERE d.token = $1) IS NOT NULL THEN 'stale'
                        WHEN EXISTS (SELECT 1 FROM herald.device_tokens d WHERE d.token = $1) THEN 'fresh'
                        ELSE 'unknown' END
            """, [.text(token)])
        return row[0, 0]!
    }

    /// An operator sees the registry's counts on the dashboard's overview and on its /metrics.
    @Test func theDashboardShowsTheRegistrysCounts() throws {
        let stack = try DashboardStack(token: nil)
        defer { stack.close() }
        let c = stack.fixture.connection
        #expect(try !stack.get("/").body.contains("<table id=\"tokens\">"), "no registry, no section")
        for token in ["phone-1", "phone-2", "phone-3", "phone-4"] {
            try c.query("SELECT herald.touch_token($1)", [.text(token)])
        }
        let now = Date().timeIntervalSince1970
        // phone-1 idle for 31 days (stale), phone-2 for 271 (pruned as idle), phone-3 unregistered.
        try c.query("UPDATE herald.device_tokens SET last_seen_at = now() - interval '31 days' WHERE token = 'phone-1'")
        try c.query("UPDATE herald.device_tokens SET last_seen_at = now() - interval '271 days' WHERE token = 'phone-2'")
        _ = try TokenAging(batch: 10_000).age(c, now: now)
        try c.query("SELECT herald.prune_token('phone-3', 'UNREGISTERED: the app was removed', NULL)")
        let page = try stack.get("/")
        #expect(page.status == 200)
        #expect(page.body.contains("<h2>Device tokens</h2>"), "\(page.body)")
        #expect(page.body.contains(#"<tr><td class="n">1</td><td class="n">1</td><td class="n">1</td><td class="n">1</td></tr></table>"#),
                "fresh 1 (phone-4), stale 1, pruned unregistered 1, pruned idle 1: \(page.body)")
        let metrics = try stack.get("/metrics").body
        for line in ["herald_device_tokens{state=\"fresh\"} 1", "herald_device_tokens{state=\"stale\"} 1",
                     "herald_pruned_tokens{reason=\"unregistered\"} 1", "herald_pruned_tokens{reason=\"idle\"} 1"] {
            #expect(metrics.contains(line + "\n"), "\(line) in: \(metrics)")
        }
    }

    @Test func tokensIdlePastTheLimitsAreMarkedStaleThenPruned() throws {
        let database = try TestDatabase.fresh()
        defer { database.drop() }
        let c = try database.connect()
        let aging = TokenAging(batch: 10_000)
        for token in ["seen-today", "idle-long", "idle-longest"] {
            try c.query("SELECT herald.touch_token($1, platform => 'android', user_ref => 'u1', time_zone => 'Europe/Istanbul')", [.text(token)])
        }
        let now = Date().timeIntervalSince1970
        let day = 86_400.0
        // The test's clock: 31 days on, nothing was reported since.
        var aged = try aging.age(c, now: now + 31 * day)
        #expect(aged.markedStale == 3 && aged.pruned == 0)
        #expect(try state(c, "idle-long") == "stale")
        // Idempotent: a second pass changes nothing.
        aged = try aging.age(c, now: now + 31 * day)
        #expect(aged.markedStale == 0 && aged.pruned == 0)
        // One app reports its token again: fresh again.
        try c.query("SELECT herald.touch_token('seen-today')")
        #expect(try state(c, "seen-today") == "fresh")
        // 271 days on, the app having reported 265 days on: the idle ones are pruned, with the
        // reason; the one seen 6 days before is neither stale nor pruned.
        try c.query("UPDATE herald.device_tokens SET last_seen_at = last_seen_at + interval '265 days' WHERE token = 'seen-today'")
        aged = try aging.age(c, now: now + 271 * day)
        #expect(aged.pruned == 2 && aged.markedStale == 0)
        #expect(try state(c, "idle-long") == "pruned")
        #expect(try state(c, "idle-longest") == "pruned")
        #expect(try state(c, "seen-today") == "fresh")
        let reason = try c.query("SELECT reason FROM herald.pruned_tokens WHERE token = 'idle-long'")[0, 0]!
        #expect(reason.hasPrefix("IDLE: not seen since") && reason.contains("270 days"), "\(reason)")
        #expect(try TokenCounts.read(c) == TokenCounts(fresh: 1, stale: 0, prunedUnregistered: 0, prunedIdle: 2))
        // A pruned token the app reports again is registered again, with what was known lost.
        try c.query("SELECT herald.touch_token('idle-long')")
        #expect(try state(c, "idle-long") == "fresh")
        // The limits are settings.
        try c.query("SELECT herald.set_token_aging(stale_after => '7 days', prune_after => '60 days')")
        aged = try aging.age(c, now: now + 8 * day)
        #expect(aged.markedStale == 1, "idle-long, reported at the real now, is 8 days idle")
    }

    @Test func touchTokenIsIdempotentAndRefusesBadInputNamingIt() throws {
        let database = try TestDatabase.fresh()
        defer { database.drop() }
        let c = try database.connect()
        try c.query("SELECT herald.touch_token('t1', platform => 'ios', project => 'p1', time_zone => 'America/Sao_Paulo')")
        let first = try c.query("SELECT last_seen_at::text, platform, project, time_zone FROM herald.device_tokens")
        try c.query("SELECT herald.touch_token('t1')")
        let second = try c.query("SELECT last_seen_at::text, platform, project, time_zone FROM herald.device_tokens")
        #expect((0..<4).map { first[0, $0] } == (0..<4).map { second[0, $0] })
        #expect(second[0, 3] == "America/Sao_Paulo")
        for (sql, named) in [("SELECT herald.touch_token('')", "token must not be empty"),
                             ("SELECT herald.touch_token(NULL)", "token must not be empty"),
                             ("SELECT herald.touch_token('t1', time_zone => 'Mars/Olympus')", "Mars/Olympus"),
                             ("SELECT herald.set_token_aging(stale_after => '0')", "stale_after"),
                             ("SELECT herald.set_token_aging(prune_after => '-3 days')", "prune_after"),
                             ("SELECT herald.set_token_aging(stale_after => '200 years')", "200 years"),
                             ("SELECT herald.set_token_aging(stale_after => '300 days')", "must be longer than stale_after")] {
            let error = refusal { () throws(PostgresError) in _ = try c.query(sql) }
            #expect(error?.serverMessage?.contains(named) == true, "\(sql): \(String(describing: error))")
        }
        let after = try c.query("SELECT time_zone, (SELECT stale_after::text || prune_after::text FROM herald.token_aging) FROM herald.device_tokens")
        #expect(after[0, 0] == "America/Sao_Paulo")
        #expect(after[0, 1] == "30 days270 days")
    }

    /// The pool's leader runs the rule within a minute of starting; a campaign then skips the
    /// stale token while a transactional send to it still goes, measured at the emulator.
    @Test func aPoolMarksIdleTokensStaleAndCampaignsSkipThem() throws {
        let stack = try WorkerStack()
        defer { stack.close() }
        let c = stack.connection
        try c.query("SELECT herald.set_token_aging(skip_stale_for_campaigns => true)")
        try c.query("SELECT herald.touch_token('fresh-device')")
        try c.query("SELECT herald.touch_token('idle-device')")
        try c.query("UPDATE herald.device_tokens SET last_seen_at = now() - interval '40 days' WHERE token = 'idle-device'")
        let pool = try HeraldProcess(["work", "--processes", "1", "--poll-interval", "0.2"], environment: stack.environment)
        try pool.start()
        defer { pool.signal(SIGKILL); pool.wait(timeout: 10) }
        let started = Date()
        #expect(waitUntil(timeout: 60) { (try? state(c, "idle-device")) == "stale" }, "\(pool.output)")
        print("token aging: the pool's first pass marked the idle token stale \(String(format: "%.1f", Date().timeIntervalSince(started))) s after its start")
        #expect(try state(c, "fresh-device") == "fresh")

        let campaign = try c.query("SELECT herald.create_campaign('weekly-digest')").int(0, 0)!
        for token in ["fresh-device", "idle-device"] {
            _ = try c.query("SELECT herald.enqueue(jsonb_build_object('token', $1::text, 'notification', jsonb_build_object('title', 'Digest')), campaign_id => $2)",
                            [.text(token), .int(campaign)])
        }
        _ = try c.query("SELECT herald.enqueue('{\"token\": \"idle-device\", \"notification\": {\"title\": \"Your code\"}}'::jsonb)")
        #expect(waitUntil(timeout: 60) {
            (try? stack.count("SELECT count(*) FROM herald.jobs WHERE state IN ('scheduled', 'available', 'running')")) == 0
        }, "\(pool.output)")
        #expect(stack.emulator.deliveredMessages(token: "fresh-device").count == 1)
        let toIdle = stack.emulator.deliveredMessages(token: "idle-device")
        #expect(toIdle.count == 1, "the transactional send still goes")
        let skipped = try c.query("SELECT state, last_error FROM herald.jobs WHERE campaign_id = $1 AND message->>'token' = 'idle-device'", [.int(campaign)])
        #expect(skipped[0, 0] == "discarded")
        #expect(skipped[0, 1]?.hasPrefix("STALE:") == true, "\(skipped[0, 1] ?? "")")
    }
}
