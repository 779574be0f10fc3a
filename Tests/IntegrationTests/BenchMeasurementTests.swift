import Benchmark
import HTTPClient
import TestSupport
import Foundation
import LocalPostgres
import Postgres
import Testing

/// What `herald bench` reads of its private PostgreSQL's CPU.
@Suite struct BenchMeasurementTests {
    /// Every worker's connection is a backend that exits with it; a phase's PostgreSQL CPU per
    /// message would be far too low if the time of exited backends were lost.
    @Test func serverCPUCountsBackendsThatExitedDuringThePhase() throws {
        let cluster = try LocalCluster.start(directory: NSTemporaryDirectory() + "herald-cpu-pg-\(getpid())", durable: false)
        defer {
            try? cluster.stop()
            try? FileManager.default.removeItem(atPath: cluster.directory)
        }
        let postmaster = try #require(ServerCPU.postmasterPID(dataDirectory: cluster.directory + "/data"))
        let server = ServerCPU(postmasterPID: postmaster)
        let childrenBefore = Set(server.children())
        let before = try #require(server.seconds())

        var connection: PGConnection? = try PGConnection(url: cluster.url)
        let backend = try #require(try connection!.query("SELECT pg_backend_pid()").int(0, 0).map { Int32($0) })
        #expect(server.children().contains(backend), "a backend is a child of the postmaster")
        try connection!.query("SELECT count(*) FROM generate_series(1, 5000000)")
        let backendSeconds = try #require(ServerCPU.processSeconds(backend))
        connection = nil  // the backend exits; its time moves to the postmaster's reaped total

        server.settle(before: childrenBefore)
        #expect(!server.children().contains(backend), "the backend has exited")
        let after = try #require(server.seconds())
        #expect(backendSeconds >= 0.05, "the query kept its backend busy (\(backendSeconds) s)")
        #expect(after - before >= backendSeconds - 0.02, "the cluster's time grew by \(after - before) s, its exited backend alone spent \(backendSeconds) s")
    }
}

/// `herald bench`'s sends-alone phase: the figure it divides by must be what FCM received.
@Suite struct SenderBenchmarkTests {
    @Test func everyRequestReachesTheEmulatorAndItsCPUIsCounted() throws {
        // Over TLS, as herald bench's own emulator serves it.
        let emulator = try startWorkerEmulator { $0.threads = 2 }
        defer { emulator.stop() }
        let account = try TestAccount(emulator)
        let token = try account.accessToken()
        let bodies = (1...50).map { Array(#"{"message":{"token":"bench-\#($0)","data":{"n":"\#($0)"}}}"#.utf8) }
        var configuration = HTTPClientConfiguration()
        configuration.caFile = try TestTLS.caFile()

        let result = try SenderBenchmark.run(url: emulator.sendURL(projectID: account.projectID),
                                             headers: ["Authorization: Bearer \(token)", "Content-Type: application/json"],
                                             bodies: bodies, requests: 3_001, threads: 2, concurrency: 64,
                                             configuration: configuration)
        #expect(result.requests == 3_001)
        #expect(result.delivered == 3_001, "\(result.firstFailure ?? "")")
        #expect(result.firstFailure == nil)
        // Counted from outside: what the emulator received, each of the 50 bodies in turn.
        let received = emulator.deliveredMessages()
        #expect(received.count == 3_001)
        #expect(Set(received.map(\.target)) == Set((1...50).map { "token:bench-\($0)" }))
        #expect(result.clientCPUSeconds > 0 && result.seconds > 0)
    }

    @Test func refusedRequestsAreReportedNotCounted() throws {
        let emulator = try startEmulator()
        defer { emulator.stop() }
        let body = [Array(#"{"message":{"token":"bench-1"}}"#.utf8)]
        let result = try SenderBenchmark.run(url: emulator.sendURL(projectID: "herald-test"),
                                             headers: ["Authorization: Bearer not-a-token", "Content-Type: application/json"],
                                             bodies: body, requests: 20, threads: 1, concurrency: 8,
                                             configuration: HTTPClientConfiguration())
        #expect(result.delivered == 0)
        #expect(result.firstFailure?.hasPrefix("HTTP 401") == true, "\(result.firstFailure ?? "nil")")
        #expect(emulator.deliveredMessages().isEmpty)
    }
}
