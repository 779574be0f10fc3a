import Emulator
import Foundation
import Postgres

/// `herald work` as a user runs it: the real binary, a real PostgreSQL, the emulator over h2c.
public struct WorkerStack {
    public let database: FreshDatabase
    public let connection: PGConnection
    public let emulator: EmulatorServer
    public let credentials: String

    public init(latencyMilliseconds: Int? = nil, tokenLifetimeSeconds: Int = 3600, scenario: Scenario = Scenario()) throws {
        database = try TestDatabase.fresh()
        connection = try database.connect()
        var configuration = EmulatorConfiguration(host: "127.0.0.1", port: 0, threads: 1)
        configuration.scenario = scenario
        configuration.latencyMilliseconds = latencyMilliseconds
        configuration.tokenLifetimeSeconds = tokenLifetimeSeconds
        emulator = EmulatorServer(configuration: configuration)
        try emulator.start()
        credentials = NSTemporaryDirectory() + "herald-sa-\(UUID().uuidString).json"
        try emulator.writeServiceAccount(to: credentials, projectID: "e2e-project")
    }

    public var environment: [String: String] {
        // The emulator answers Instance ID's topic calls and FCM's Data API too: no test's pool
        // reaches for the real ones.
        ["DATABASE_URL": database.url, "GOOGLE_APPLICATION_CREDENTIALS": credentials, "HERALD_FCM_URL": emulator.baseURL,
         "HERALD_IID_URL": emulator.baseURL, "HERALD_FCM_DATA_URL": emulator.baseURL]
    }

    public func close() {
        emulator.stop()
        database.drop()
        try? FileManager.default.removeItem(atPath: credentials)
    }

    /// FCM back on the stack's address after `emulator.stop()`: a new emulator that knows the
    /// stack's service account but none of the access tokens the first one issued (a worker gets
    /// a 401 and renews its token). Stop it when done.
    public func revivedEmulator() throws -> EmulatorServer {
        var configuration = EmulatorConfiguration(host: "127.0.0.1", port: emulator.port, threads: 1)
        configuration.tokenLifetimeSeconds = 3600
        let revived = EmulatorServer(configuration: configuration)
        try revived.trustServiceAccount(json: String(contentsOfFile: credentials, encoding: .utf8))
        try revived.start()
        return revived
    }

    public func count(_ sql: String, _ parameters: [PGValue?] = []) throws -> Int {
        try connection.query(sql, parameters).int(0, 0) ?? -1
    }

    /// Enqueues `n` messages to tokens `prefix1...prefixN` with one INSERT ... SELECT.
    public func enqueue(_ n: Int, prefix: String) throws {
        try connection.query("""
            INSERT INTO herald.jobs (message)
            SELECT jsonb_build_object('token', $1::text || g, 'notification', jsonb_build_object('title', 'Hi', 'body', 'n' || g))
            FROM generate_series(1, $2::int) AS g
            """, [.text(prefix), .int(n)])
    }

    public func work(_ arguments: [String], timeout: Double = 180) throws -> (status: Int32?, output: String) {
        try HeraldProcess.run(["work"] + arguments, environment: environment, timeout: timeout)
    }
}

