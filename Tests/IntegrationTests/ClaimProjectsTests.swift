import Foundation
import Postgres
import Queue
import Testing
import TestSupport

/// One claim statement over several projects (herald.claim_projects), as a worker carrying many
/// claims: each project its share in the order given, every project's own limits and pauses,
/// and a bucket another claim holds never waited for.
@Suite struct ClaimProjectsTests {
    func withProjects(_ body: (PGConnection, FreshDatabase) throws -> Void) throws {
        let database = try TestDatabase.fresh()
        defer { database.drop() }
        let c = try database.connect()
        try c.query("""
            INSERT INTO herald.projects (name, fcm_project_id, credentials)
            VALUES ('a', 'fcm-a', '/keys/a.json'), ('b', 'fcm-b', '/keys/b.json'), ('c', 'fcm-c', '/keys/c.json')
            """)
        // 20 jobs each for a, b and c, and 20 of no project.
        try c.query("""
            INSERT INTO herald.jobs (message, project)
            SELECT jsonb_build_object('token', coalesce(p, 'none') || '-' || g, 'data', jsonb_build_object('k', 'v')), p
            FROM unnest(ARRAY['a', 'b', 'c', NULL]) AS p, generate_series(1, 20) AS g
            """)
        try body(c, database)
    }

    func targets(_ names: [String?], rate: Double = 1000) -> [Claimer.ClaimTarget] {
        names.map { Claimer.ClaimTarget(project: $0, fcmProject: $0.map { "fcm-" + $0 } ?? "fcm-pool", fcmProjectRate: rate) }
    }

    func count(_ visits: [Claimer.ProjectVisit]) -> [String: Int] {
        visits.reduce(into: [:]) { $0[$1.project ?? "-", default: 0] += $1.jobs.count }
    }

    @Test func eachProjectGetsItsShareInTheOrderGivenAndItsJobsCarryItsName() throws {
        try withProjects { c, _ in
            let claimer = JobStore(connection: c, workerID: "w", fcmProject: nil).claimer
            let visits = try claimer.claimProjects(targets(["b", nil, "a"]), queues: [], limit: 10, leaseSeconds: 60, minimumShare: 2)
            // 10 over three: 4, then 3 of the 6 left, then 3.
            #expect(visits.map(\.project) == ["b", nil, "a"])
            #expect(visits.map(\.jobs.count) == [4, 3, 3])
            #expect(visits.allSatisfy { $0.wholeShare })
            for visit in visits {
                let prefix = (visit.project ?? "none") + "-"
                #expect(visit.jobs.allSatisfy { $0.project == visit.project && String(decoding: $0.message, as: UTF8.self).contains(prefix) },
                        "a job claimed for \(visit.project ?? "no project") is of it")
            }
            let running = try c.query("SELECT coalesce(project, '-'), count(*) FROM herald.jobs WHERE state = 'running' AND locked_by = 'w' GROUP BY 1 ORDER BY 1")
            #expect((0..<running.rowCount).map { "\(running[$0, 0]!)=\(running[$0, 1]!)" } == ["-=3", "a=3", "b=4"])
            // c was not given: none of its jobs moved.
            #expect(try c.query("SELECT count(*) FROM herald.jobs WHERE project = 'c' AND state = 'available'").int(0, 0) == 20)
        }
    }

    @Test func whatAProjectLeavesGoesToThoseThatTookTheirWholeShare() throws {
        try withProjects { c, _ in
            try c.query("DELETE FROM herald.jobs WHERE project = 'a' AND message->>'token' NOT IN ('a-1', 'a-2')")
            let claimer = JobStore(connection: c, workerID: "w", fcmProject: nil).claimer
            let visits = try claimer.claimProjects(targets(["b", "c", "a"]), queues: [], limit: 40, leaseSeconds: 60, minimumShare: 1)
            // Shares 14, 13 and 13; a has 2 of its 13, so b and c, which took theirs, are visited
            // again for the 11 left: b its last 6, c 5 more.
            #expect(visits.map(\.project) == ["b", "c", "a", "b", "c"])
            #expect(visits.map(\.jobs.count) == [14, 13, 2, 6, 5])
            #expect(count(visits) == ["a": 2, "b": 20, "c": 18])
            #expect(visits[2].wholeShare == false)
        }
    }

    @Test func aPausedProjectTakesNothingAndTheOthersTheirShares() throws {
        try withProjects { c, _ in
            try c.query("UPDATE herald.projects SET paused_reason = 'operator: checking', paused_at = now() WHERE name = 'b'")
            let claimer = JobStore(connection: c, workerID: "w", fcmProject: nil).claimer
            let visits = try claimer.claimProjects(targets(["a", "b", "c"]), queues: [], limit: 12, leaseSeconds: 60, minimumShare: 1)
            #expect(count(visits)["b", default: 0] == 0)
            #expect(count(visits).values.reduce(0, +) == 12, "what b could not take went to a and c")
        }
    }

    @Test func aBucketAnotherClaimHoldsIsNotWaitedFor() throws {
        try withProjects { c, database in
            let claimer = JobStore(connection: c, workerID: "w", fcmProject: nil).claimer
            // A first claim makes the buckets' rows.
            _ = try claimer.claimProjects(targets(["a", "b"]), queues: [], limit: 2, leaseSeconds: 60, minimumShare: 1)
            // Another worker's claim holds b's bucket (its transaction still open).
            let other = try database.connect()
            try other.execute("BEGIN")
            try other.query("SELECT 1 FROM herald.project_rates WHERE project_id = 'fcm-b' FOR UPDATE")
            defer { _ = try? other.execute("ROLLBACK") }
            try c.query("SET lock_timeout = '2s'")
            let started = Date()
            let visits = try claimer.claimProjects(targets(["b", "a", "c"]), queues: [], limit: 9, leaseSeconds: 60, minimumShare: 3)
            #expect(Date().timeIntervalSince(started) < 1.5, "no wait for the held row (a wait would end at the 2 s lock timeout with an error)")
            let b = visits.first { $0.project == "b" }
            #expect(b?.jobs.isEmpty == true)
            #expect(b?.heldBackFor == 0.02, "b is tried again shortly")
            // What b could not take went to a and c: 5 (half the 9 left) and 4.
            #expect(count(visits)["a"] == 5 && count(visits)["c"] == 4)
        }
    }

    @Test func eachVisitBringsItsFCMProjectsAdaptedRate() throws {
        try withProjects { c, _ in
            let store = JobStore(connection: c, workerID: "w", fcmProject: nil)
            _ = try store.claimer.claimProjects(targets(["a"]), queues: [], limit: 1, leaseSeconds: 60, minimumShare: 1)
            try c.query("UPDATE herald.project_rates SET adapted_per_second = 42, adapted_at = now() WHERE project_id = 'fcm-a'")
            let visits = try store.claimer.claimProjects(targets(["a", "b"]), queues: [], limit: 2, leaseSeconds: 60, minimumShare: 1)
            #expect(visits.first { $0.project == "a" }?.rate?.adapted == 42)
            let stored = try store.fcmProjectRates.state("fcm-a").rate
            #expect(visits.first { $0.project == "a" }?.rate == stored, "what a statement of its own reads")
            #expect(visits.first { $0.project == "b" }?.rate?.adapted == nil, "nothing adapted for b")
        }
    }

    /// A spent quota window one worker found is every pool's: each reads it (a statement of its
    /// own, or a claim over several projects), and sends at the probes' rate until the hold's
    /// end or an accepted probe; an answer to a send made earlier than the one that last changed
    /// it changes nothing.
    @Test func aSpentQuotaWindowIsHeldForEveryPoolUntilAProbeIsAccepted() throws {
        try withProjects { c, _ in
            let store = JobStore(connection: c, workerID: "w", fcmProject: nil)
            let rates = store.fcmProjectRates
            let adaptive = AdaptiveRate(ceiling: 10_000)
            let now = try #require(try c.query("SELECT extract(epoch FROM now())::float8").double(0, 0))
            // Every pool paces at 95/s: 100/s stated.
            _ = try rates.stateQuota("fcm-a", to: AdaptiveRate.State(adapted: 95, at: now, stated: 100, statedAt: now), ceiling: 10_000)
            // A worker found fcm-a's window spent by the refusal of a send made a second ago.
            let held = try #require(try rates.holdWindow("fcm-a", until: now + 60, seenAt: now - 1, ceiling: 10_000))
            #expect(abs((held.windowHeldUntil ?? 0) - (now + 60)) < 0.01)
            #expect(held.stated == 100, "the stated limit stays, for after the hold")
            #expect(adaptive.rate(held, now: now + 1) == 1, "every pool: about one message a second")
            #expect(adaptive.rate(held, now: now + 61) == 95, "after the hold's end: the stated limit's share again")
            // Every pool reads it: with a statement of its own, or in a claim over several projects.
            #expect(try rates.state("fcm-a").rate.windowHeldUntil == held.windowHeldUntil)
            let visits = try store.claimer.claimProjects(targets(["a", "b"], rate: 1), queues: [], limit: 10, leaseSeconds: 60, minimumShare: 1)
            #expect(visits.first { $0.project == "a" }?.rate?.windowHeldUntil == held.windowHeldUntil)
            #expect(visits.first { $0.project == "b" }?.rate?.windowHeldUntil == nil, "fcm-b's window is its own")
            #expect((visits.first { $0.project == "a" }?.jobs.count ?? 99) <= 1, "at the probes' rate a claim takes one job at most")
            // Another worker finds it spent a moment later: the hold keeps the earlier end.
            let again = try #require(try rates.holdWindow("fcm-a", until: now + 70, seenAt: now - 0.5, ceiling: 10_000))
            #expect(again.windowHeldUntil == held.windowHeldUntil)
            // A probe sent 30 s on is accepted: the hold ends for every pool.
            let renewed = try #require(try rates.endWindowHold("fcm-a", seenAt: now + 30))
            #expect(renewed.windowHeldUntil == nil)
            #expect(adaptive.rate(renewed, now: now + 31) == 95)
            // A refusal answered late, of a send made before that probe, holds nothing again...
            #expect(try rates.holdWindow("fcm-a", until: now + 90, seenAt: now + 29, ceiling: 10_000) == nil)
            #expect(try rates.state("fcm-a").rate.windowHeldUntil == nil)
            // ...and the acceptance of a send made before a later refusal ends no hold.
            #expect(try rates.holdWindow("fcm-a", until: now + 90, seenAt: now + 31, ceiling: 10_000)?.windowHeldUntil != nil)
            #expect(try rates.endWindowHold("fcm-a", seenAt: now + 30.5) == nil)
            #expect(try rates.state("fcm-a").rate.windowHeld(at: now + 32))
            // An FCM project without a row yet gets one, with the bucket at the ceiling.
            #expect(try rates.holdWindow("fcm-c", until: now + 60, seenAt: now, ceiling: 500)?.windowHeldUntil != nil)
        }
    }

    @Test func mismatchedArraysAreRefusedNamingThem() throws {
        try withProjects { c, _ in
            #expect {
                try c.query("SELECT * FROM herald.claim_projects(ARRAY['a', 'b'], ARRAY['fcm-a'], ARRAY[1.0, 1.0]::float8[], NULL, 10, 60, 'w', 1)")
            } throws: { error in
                "\(error)".contains("p_projects (2), p_fcm_projects (1) and p_fcm_rates (2) must be as long as each other")
            }
        }
    }
}
