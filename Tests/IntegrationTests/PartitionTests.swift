import Emulator
import Foundation
import Postgres
import Testing
import TestSupport

/// A pool whose path to PostgreSQL goes silent (black-holed, not closed) while another pool works
/// the same database directly.
@Suite(.serialized) struct PartitionTests {
    @Test func aPartitionedLeaderBlocksNoRescueAndSendsNothingPastItsLeases() throws {
        // Pool B: the stack's database directly, and its own fast emulator.
        let stack = try WorkerStack(latencyMilliseconds: 100)
        defer { stack.close() }
        // Pool A: the same database through a relay that can go silent, its own slow emulator
        // (so its sends are told apart, and it always holds a full window of jobs).
        let emulatorA = try startWorkerEmulator { $0.latencyMilliseconds = 1000 }
        defer { emulatorA.stop() }
        let credentialsA = NSTemporaryDirectory() + "herald-sa-a-\(UUID().uuidString).json"
        try emulatorA.writeServiceAccount(to: credentialsA, projectID: "e2e-project")
        defer { try? FileManager.default.removeItem(atPath: credentialsA) }
        var components = try #require(URLComponents(string: stack.database.url))
        let relay = try SilentRelay(targetPort: try #require(components.port))
        defer { relay.stop() }
        components.port = relay.port
        let urlA = try #require(components.string)

        try stack.enqueue(8_000, prefix: "part-")
        let lease = 10.0
        let common = ["work", "--processes", "1", "--concurrency", "64", "--lease", "10", "--poll-interval", "0.2"]
        let poolA = try HeraldProcess(common, environment: ["DATABASE_URL": urlA, "GOOGLE_APPLICATION_CREDENTIALS": credentialsA]
                                                           .merging(try emulatorEnvironment(emulatorA)) { $1 })
        try poolA.start()
        defer { poolA.signal(SIGKILL); poolA.wait(timeout: 10) }
        // A alone: it leads, and it holds jobs.
        var workerA = ""
        #expect(waitUntil(timeout: 60) {
            workerA = (try? stack.connection.query("SELECT leader_id FROM herald.leaders WHERE name = 'maintenance'"))?[0, 0] ?? ""
            return !workerA.isEmpty && emulatorA.deliveredMessages().count >= 128
        }, "\(poolA.output)")
        #expect(try stack.count("SELECT count(*) FROM herald.jobs WHERE state = 'running' AND locked_by = $1", [.text(workerA)]) > 0)

        let poolB = try HeraldProcess(common, environment: stack.environment)
        try poolB.start()
        defer { poolB.signal(SIGKILL); poolB.wait(timeout: 10) }
        #expect(waitUntil(timeout: 60) { stack.emulator.deliveredMessages().count >= 100 }, "\(poolB.output)")

        // The partition: A's connections stay open and hear nothing more.
        relay.cut()
        let cutAt = Date()
        // What the server had received from A before the cut is done within a moment.
        #expect(waitUntil(timeout: 5) { Date().timeIntervalSince(cutAt) >= 1 })
        let held = try stack.connection.query("SELECT id, message->>'token' FROM herald.jobs WHERE state = 'running' AND locked_by = $1",
                                              [.text(workerA)])
        let heldIDs = (0..<held.rowCount).compactMap { held.int($0, 0) }
        let heldTokens = Set((0..<held.rowCount).compactMap { held[$0, 1] })
        #expect(!heldIDs.isEmpty, "A held jobs when its path went silent")
        let idArray = "{" + heldIDs.map(String.init).joined(separator: ",") + "}"

        // B takes A's jobs back once their leases and A's leadership have run out, and sends them.
        let target = lease + 30
        let rescued = waitUntil(timeout: target - Date().timeIntervalSince(cutAt), interval: 0.1) {
            (try? stack.count("SELECT count(*) FROM herald.jobs WHERE id = ANY ($1::bigint[]) AND state = 'completed'", [.text(idArray)])) == heldIDs.count
        }
        let rescueSeconds = Date().timeIntervalSince(cutAt)
        print("partition: \(heldIDs.count) jobs held by the cut-off pool, delivered by the other \(String(format: "%.1f", rescueSeconds)) s after the partition began (target \(Int(target)) s)")
        #expect(rescued, "A's \(heldIDs.count) jobs were delivered by B within lease + 30 s\nB: \(poolB.output)")
        let leader = try stack.connection.query("SELECT leader_id FROM herald.leaders WHERE name = 'maintenance'")[0, 0]
        #expect(leader != workerA, "B leads now")
        let deliveredByB = Set(stack.emulator.deliveredMessages().compactMap(\.token))
        #expect(heldTokens.isSubset(of: deliveredByB), "B sent them")

        // A noticed its silent connection and put nothing on the wire past its leases.
        #expect(waitUntil(timeout: 40 - Date().timeIntervalSince(cutAt)) { poolA.output.contains("the network path is silent") },
                "A gave its connection up within about 30 s: \(poolA.output)")
        let lastLeaseEnd = Int64((cutAt.timeIntervalSince1970 + lease) * 1000)
        let late = emulatorA.deliveredMessages().filter { $0.receivedAtMilliseconds > lastLeaseEnd }
        #expect(late.isEmpty, "A sent \(late.count) messages after its last lease ended")
        let resent = heldTokens.intersection(Set(emulatorA.deliveredMessages().compactMap(\.token))).count
        print("partition: \(resent) of them had reached FCM from the cut-off pool too (in flight at the cut)")

        // The path heals: A reconnects and works again.
        relay.heal()
        let healedAt = Date()
        #expect(waitUntil(timeout: 40) { poolA.output.contains("reconnected to PostgreSQL") }, "\(poolA.output)")
        print("partition: the cut-off pool reconnected \(String(format: "%.1f", Date().timeIntervalSince(healedAt))) s after the path healed")
        poolB.signal(SIGTERM)
        poolA.signal(SIGTERM)
        #expect(poolB.wait(timeout: 60) == 0, "\(poolB.output)")
        #expect(poolA.wait(timeout: 60) == 0, "\(poolA.output)")
    }
}
