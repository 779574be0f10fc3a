import Benchmark
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
