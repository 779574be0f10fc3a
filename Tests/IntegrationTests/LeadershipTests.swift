import Foundation
import Postgres
import Queue
@testable import Worker
@testable import Worker
import Testing
import TestSupport

/// The maintenance role of a pool that dies: its PostgreSQL sessions end with it, so nothing it
/// held waits out a timer of the role's (a silent partition, where the session is still listed,
/// is PartitionTests').
@Suite(.serialized) struct LeadershipTests {
    @Test func aKilledLeadersJobsAreTakenBackWithinTheirLeaseNotTheRolesToo() throws {
        // A slow FCM: the pool always holds a window of claimed jobs waiting for answers.
        let stack = try WorkerStack(latencyMilliseconds: 2000)
        defer { stack.close() }
        try stack.enqueue(600, prefix: "lead-")
        let common = ["work", "--processes", "1", "--concurrency", "64", "--lease", "5", "--poll-interval", "0.2"]
        let poolA = try HeraldProcess(common, environment: stack.environment)
        try poolA.start()
        defer { poolA.signal(SIGKILL); poolA.wait(timeout: 10) }

        // A alone: it leads, and its worker holds jobs.
        var leaderID = ""
        #expect(waitUntil(timeout: 60) {
            leaderID = (try? stack.connection.query("SELECT leader_id FROM herald.leaders WHERE name = 'maintenance'"))?[0, 0] ?? ""
            guard !leaderID.isEmpty else { return false }
            return ((try? stack.count("SELECT count(*) FROM herald.jobs WHERE state = 'running' AND locked_by = $1", [.text(leaderID)])) ?? 0) > 0
        }, "\(poolA.output)")
        let workerPID = try #require(leaderID.split(separator: ":").dropLast().last.flatMap { Int32($0) })
        #expect(workerPID != poolA.pid, "the role is held by the worker process, not the supervisor")

        // The whole pool dies at once, then a fresh pool starts.
        kill(poolA.pid, SIGKILL)
        kill(workerPID, SIGKILL)
        let killedAt = Date()
        let held = try stack.count("SELECT count(*) FROM herald.jobs WHERE state = 'running' AND locked_by = $1", [.text(leaderID)])
        #expect(held > 0)
        let poolB = try HeraldProcess(common, environment: stack.environment)
        try poolB.start()
        defer { poolB.signal(SIGKILL); poolB.wait(timeout: 10) }

        // The dead pool's jobs come back after their own lease (5 s) and the new leader's grace
        // (one lease), not after the dead holder's role lease (15 s) on top.
        let takenBack = waitUntil(timeout: 40, interval: 0.1) {
            (try? stack.count("SELECT count(*) FROM herald.jobs WHERE state = 'running' AND locked_by = $1", [.text(leaderID)])) == 0
        }
        let seconds = Date().timeIntervalSince(killedAt)
        print("leadership: \(held) jobs held by the killed leader taken back \(String(format: "%.1f", seconds)) s after the kill (target 15 s)")
        #expect(takenBack, "\(poolB.output)")
        #expect(seconds <= 15, "taken back \(seconds) s after the kill\n\(poolB.output)")
        let leader = try stack.connection.query("SELECT leader_id FROM herald.leaders WHERE name = 'maintenance'")[0, 0]
        #expect(leader != leaderID, "the fresh pool leads")

        // And it delivers them.
        #expect(waitUntil(timeout: 120) {
            (try? stack.count("SELECT count(*) FROM herald.jobs WHERE state <> 'completed'")) == 0
        }, "\(poolB.output)")
        poolB.signal(SIGTERM)
        #expect(poolB.wait(timeout: 60) == 0, "\(poolB.output)")
    }

    @Test func aListedHoldersRoleIsKeptUntilItsLeaseRunsOut() throws {
        // The holder's session still listed (a stalled or partitioned process): the lease rule.
        let database = try TestDatabase.fresh()
        defer { database.drop() }
        var holder: PGConnection? = try database.connect()
        let candidate = try database.connect()
        let candidateLease = LeaderLease(role: .maintenance, workerID: "host:2:b")
        #expect(try holder.map { try LeaderLease(role: .maintenance, workerID: "host:1:a").take(on: $0, seconds: 30) } == true)
        #expect(try !candidateLease.take(on: candidate, seconds: 30), "the holder's session is alive and its lease runs")
        // Its session ends (the process died): the role is free at once.
        holder = nil
        #expect(waitUntil(timeout: 10) { (try? candidateLease.take(on: candidate, seconds: 30)) == true })
        let row = try candidate.query("SELECT leader_id, backend_pid = pg_backend_pid() FROM herald.leaders WHERE name = 'maintenance'")
        #expect(row[0, 0] == "host:2:b")
        #expect(row[0, 1] == "t", "the new holder's session is recorded")
        // A row of an earlier release (no session recorded) keeps the lease rule.
        try candidate.query("UPDATE herald.leaders SET backend_pid = NULL, backend_start = NULL")
        #expect(try !LeaderLease(role: .maintenance, workerID: "host:3:c").take(on: try database.connect(), seconds: 30))
    }

    /// A duty that does nothing: the leader's answer says which ran, in what order.
    final class Duty: MaintenanceTask {
        let name: String
        let interval: Double
        let waitsForGrace: Bool
        init(_ name: String, interval: Double, waitsForGrace: Bool) {
            self.name = name
            self.interval = interval
            self.waitsForGrace = waitsForGrace
        }
        func runOnce(_ run: MaintenanceRun) throws(PostgresError) -> MaintenanceResult {
            MaintenanceResult(counts: ["runs": 1])
        }
    }

    @Test func theLeaderRunsItsListInOrderEachAtItsIntervalTheGracedOnesAfterOneLease() throws {
        let database = try TestDatabase.fresh()
        defer { database.drop() }
        let c = try database.connect()
        var now = 1_000.0
        let tasks = [Duty("rescue", interval: 0, waitsForGrace: true), Duty("upkeep", interval: 5, waitsForGrace: false)]
        let leader = MaintenanceLeader(lease: LeaderLease(role: .maintenance, workerID: "host:1:a"), grace: 10, tasks: tasks,
                                       clock: { now })
        func pass() throws -> [String] { try leader.run(on: c, now: now).map(\.task) }
        #expect(try pass() == ["upkeep"], "a new leader waits its grace before what takes jobs back")
        now += 2
        #expect(try pass() == [], "the upkeep's interval has not passed")
        now += 8
        #expect(try pass() == ["rescue", "upkeep"], "after one lease: the list in its order")
        now += 1
        #expect(try pass() == ["rescue"])
        // Another process's leader runs nothing while the lease is held.
        let other = MaintenanceLeader(lease: LeaderLease(role: .maintenance, workerID: "host:2:b"), grace: 0,
                                      tasks: [Duty("rescue", interval: 0, waitsForGrace: false)], clock: { now })
        #expect(try other.run(on: try database.connect(), now: now).isEmpty)
        // A clean stop hands the lease over at once.
        leader.resign(on: c)
        #expect(try other.run(on: try database.connect(), now: now).map(\.task) == ["rescue"])
    }
}
