import Emulator
import FCM
import Foundation
import HTTPClient
import Logging
import Postgres
import Queue
import Testing
import TestSupport
@testable import Worker

/// A worker carrying many projects keeps per-project state only for the projects with work: a
/// project idle for 5 minutes is dropped with its keys (the store thread's lane and the key ring
/// the sender reads; the topic carrier's keys of its own), and taken up again, with a new access
/// token, when it has work again. Driven by the clock the components take (`now`), not by waiting.
@Suite(.serialized) struct CarriedProjectIdleTests {
    /// A database with projects p1 and p2 registered, their keys written by the stack's emulator.
    struct Registry {
        let stack: WorkerStack
        let folder: String

        init() throws {
            stack = try WorkerStack()
            folder = NSTemporaryDirectory() + "herald-idle-\(UUID().uuidString)"
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: false)
            let projects = try stack.emulator.writeServiceAccounts(count: 2, folder: folder)
            try stack.connection.query("""
                INSERT INTO herald.projects (name, fcm_project_id, credentials)
                SELECT 'p' || i, f, $1::text || '/' || f || '.json' FROM unnest($2::text[]) WITH ORDINALITY AS t(f, i)
                """, [.text(folder), .textArray(projects)])
        }

        func enqueue(_ n: Int, project: String) throws {
            try stack.connection.query("""
                INSERT INTO herald.jobs (message, project)
                SELECT jsonb_build_object('token', $1::text || '-' || g, 'data', jsonb_build_object('k', 'v')), $1
                FROM generate_series(1, $2::int) AS g
                """, [.text(project), .int(n)])
        }

        /// A carrying worker's store-thread side: its projects, the key ring its sender reads,
        /// and its job store on the stack's connection.
        func storeSide() -> (projects: StoreProjects, ring: ProjectKeyRing, store: JobStore) {
            let ring = ProjectKeyRing()
            let projects = StoreProjects(configuration: configuration, ring: ring, names: nil, unaddressed: nil, log: Logger(level: .error))
            return (projects, ring, JobStore(connection: stack.connection, workerID: "idle-test", fcmProject: nil))
        }

        /// A configuration of a worker carrying the registry, sending to the stack's emulator.
        var configuration: WorkerConfiguration {
            var configuration = WorkerConfiguration(databaseURL: stack.database.url, credentialsPath: "")
            configuration.carries = .registry
            configuration.fcmBaseURL = stack.emulator.baseURL
            configuration.iidBaseURL = stack.emulator.baseURL
            configuration.caFile = stack.caFile
            return configuration
        }

        func close() {
            stack.close()
            try? FileManager.default.removeItem(atPath: folder)
        }
    }

    @Test func anIdleProjectIsDroppedAfterFiveMinutesAndServedAgainWhenBusy() throws {
        let r = try Registry()
        defer { r.close() }
        let c = r.stack.connection
        let (projects, ring, store) = r.storeSide()
        func claim(at now: Double) throws -> [ClaimedJob] {
            try projects.claim(store, connection: c, queues: [], limit: 64, leaseSeconds: 60, now: now).jobs
        }
        let start = Date().timeIntervalSince1970

        // p1 has work: taken up (its key, its first token), its jobs claimed.
        try r.enqueue(3, project: "p1")
        let tokensBefore = r.stack.emulator.tokensIssued
        #expect(try claim(at: start).count == 3)
        let first = try #require(ring.keys(for: "p1"))
        #expect(projects.lanes["p1"] != nil)
        #expect(r.stack.emulator.tokensIssued == tokensBefore + 1)
        try c.query("UPDATE herald.jobs SET state = 'completed' WHERE project = 'p1'")

        // Idle, but not for 5 minutes yet: everything is kept (no second token for the next job).
        #expect(try claim(at: start + 120).isEmpty)
        #expect(try claim(at: start + 299).isEmpty)
        #expect(projects.lanes["p1"] != nil && ring.keys(for: "p1") === first)

        // Idle for 5 minutes: the lane and the keys the sender reads are gone (idle projects are
        // looked for with the key files, every 5 s, so within 5 s after the 5 minutes).
        #expect(try claim(at: start + 304.5).isEmpty)
        #expect(projects.lanes["p1"] == nil, "the idle project's lane is kept")
        #expect(ring.keys(for: "p1") == nil, "the idle project's keys are kept")
        #expect(ring.count == 0)

        // Busy again: taken up afresh, with a new token, and its jobs are claimed.
        try r.enqueue(2, project: "p1")
        let again = try claim(at: start + 305)
        #expect(again.count == 2 && again.allSatisfy { $0.project == "p1" })
        let second = try #require(ring.keys(for: "p1"))
        #expect(second !== first)
        #expect(r.stack.emulator.tokensIssued == tokensBefore + 2)
        #expect(try second.auth.authorizationHeader() != first.auth.authorizationHeader())
    }

    /// A project busy all along is never dropped, however long the worker runs; another one idle
    /// beside it is.
    @Test func aBusyProjectIsKeptBesideAnIdleOneThatIsDropped() throws {
        let r = try Registry()
        defer { r.close() }
        let c = r.stack.connection
        let (projects, ring, store) = r.storeSide()
        let start = Date().timeIntervalSince1970
        try r.enqueue(1, project: "p1")
        try r.enqueue(1, project: "p2")
        #expect(try projects.claim(store, connection: c, queues: [], limit: 64, leaseSeconds: 60, now: start).jobs.count == 2)
        // p1 gets a job every minute for ten minutes; p2 none.
        for minute in 1...10 {
            try r.enqueue(1, project: "p1")
            let jobs = try projects.claim(store, connection: c, queues: [], limit: 64, leaseSeconds: 60, now: start + Double(minute) * 60).jobs
            #expect(jobs.count == 1 && jobs.first?.project == "p1", "minute \(minute)")
        }
        #expect(projects.lanes["p1"] != nil && ring.keys(for: "p1") != nil)
        #expect(projects.lanes["p2"] == nil && ring.keys(for: "p2") == nil)
    }

    /// The sender thread's part of a project (its `SenderMachine`: quota holds, pause, outage
    /// circuit, and its send headers) is dropped after 5 minutes unused too, and made again from
    /// the project's keys at its next job.
    @Test func theSendersLaneOfAnIdleProjectIsDropped() throws {
        let r = try Registry()
        defer { r.close() }
        let ring = ProjectKeyRing()
        let account = try Project.loadKey(r.folder + "/herald-project-1.json", environment: [:])
        ring.put(ProjectKeys(project: "p1", account: account, auth: AccessTokenProvider(account: account, caFile: r.stack.caFile), fcmBaseURL: r.stack.emulator.baseURL,
                             keyPath: nil, keyBytes: nil))
        let configuration = r.configuration
        var clientConfiguration = HTTPClientConfiguration()
        clientConfiguration.caFile = r.stack.caFile
        let sender = Sender(configuration: configuration, client: try HTTPClient(configuration: clientConfiguration), ring: ring,
                            shared: true, inbox: Mailbox(), outbox: Mailbox(), stop: Flag(), log: Logger(level: .error),
                            metrics: WorkerMetrics(slot: nil), leases: LeaseBook(leaseSeconds: 60))
        let start = Date().timeIntervalSince1970
        #expect(sender.lane("p1", now: start))
        #expect(sender.lanes["p1"] != nil)
        sender.pruneLanes(now: start + 299)
        #expect(sender.lanes["p1"] != nil)
        #expect(sender.lane("p1", now: start + 299.5) && sender.lanes["p1"]?.lastUsed == start + 299.5, "a job uses the lane")
        sender.pruneLanes(now: start + 599)
        #expect(sender.lanes["p1"] != nil, "dropped less than 300 s after its last use")
        sender.pruneLanes(now: start + 600)
        #expect(sender.lanes["p1"] == nil, "the idle project's lane is kept")
        // Its next job makes the lane again, from the keys the store thread holds; without them
        // (the store thread dropped the project too) the job is not sent.
        #expect(sender.lane("p1", now: start + 601) && sender.lanes["p1"] != nil)
        ring.remove("p1")
        sender.pruneLanes(now: start + 901)
        #expect(!sender.lane("p1", now: start + 902) && sender.lanes["p1"] == nil)
    }

    /// The topic carrier of a worker carrying many projects loads a project's keys itself when
    /// the store thread holds none (a project with subscriptions to make and no jobs), and drops
    /// them after 5 minutes unused.
    @Test func theTopicCarriersKeysOfAnIdleProjectAreDropped() throws {
        let r = try Registry()
        defer { r.close() }
        let c = r.stack.connection
        let ring = ProjectKeyRing()
        let carrier = TopicSubscriptionCarrier(configuration: r.configuration, own: nil,
                                               carried: .init(names: nil, skip: [], ring: ring), stop: Flag(), log: Logger(level: .error))
        let row = TopicSubscriptionCarrier.Row(keysOf: "p1", project: "herald-project-1", topic: "news", token: "t", removing: false,
                                               generation: 1, attempts: 1)
        let start = Date().timeIntervalSince1970
        guard case .success(let (auth, fcmProject)) = carrier.authority(for: row, c, now: start) else {
            Issue.record("no key for p1's row")
            return
        }
        #expect(fcmProject == "herald-project-1" && auth.account.projectID == "herald-project-1")
        #expect(carrier.held.keys.sorted() == ["p1"])
        // Another project's row: refused when the registry names another FCM project for it.
        let wrong = TopicSubscriptionCarrier.Row(keysOf: "p2", project: "herald-project-1", topic: "news", token: "t", removing: false,
                                                 generation: 1, attempts: 1)
        guard case .failure = carrier.authority(for: wrong, c, now: start) else {
            Issue.record("p2's key was given for FCM project herald-project-1")
            return
        }
        carrier.dropIdle(now: start + 299)
        #expect(carrier.held.keys.sorted() == ["p1"])
        carrier.dropIdle(now: start + 301)
        #expect(carrier.held.isEmpty, "the idle project's keys are kept")
        guard case .success(let (again, _)) = carrier.authority(for: row, c, now: start + 302) else {
            Issue.record("no key for p1's row after the drop")
            return
        }
        #expect(again !== auth)
        #expect(carrier.held.keys.sorted() == ["p1"])
    }
}
