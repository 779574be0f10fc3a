import Emulator
import Foundation
import Postgres

/// `herald work` as a user runs it: the real binary, a real PostgreSQL, and the emulator over
/// TLS (h2 by ALPN, its certificate's authority given as HERALD_CA_FILE), as FCM is reached; or
/// over plain http:// when a test asks for `.cleartext`.
public struct WorkerStack {
    public let database: FreshDatabase
    public let connection: PGConnection
    public let emulator: EmulatorServer
    public let credentials: String

    public init(latencyMilliseconds: Int? = nil, tokenLifetimeSeconds: Int = 3600, scenario: Scenario = Scenario(),
                transport: EmulatorTransport = .tls) throws {
        database = try TestDatabase.fresh()
        connection = try database.connect()
        let configuration = try workerEmulatorConfiguration(transport: transport) {
            $0.scenario = scenario
            $0.latencyMilliseconds = latencyMilliseconds
            $0.tokenLifetimeSeconds = tokenLifetimeSeconds
        }
        emulator = EmulatorServer(configuration: configuration)
        try emulator.start()
        credentials = NSTemporaryDirectory() + "herald-sa-\(UUID().uuidString).json"
        try emulator.writeServiceAccount(to: credentials, projectID: "e2e-project")
    }

    /// What a worker is given: the database, the service account (its token_uri the emulator's),
    /// FCM's and Instance ID's URL (the emulator answers Instance ID's topic calls too: no test's
    /// pool reaches for the real one), and with TLS the authority of its certificate.
    public var environment: [String: String] {
        // The emulator answers Instance ID's topic calls and FCM's Data API too: no test's pool
        // reaches for the real ones.
        var environment = ["DATABASE_URL": database.url, "GOOGLE_APPLICATION_CREDENTIALS": credentials, "HERALD_FCM_URL": emulator.baseURL,
                           "HERALD_IID_URL": emulator.baseURL, "HERALD_FCM_DATA_URL": emulator.baseURL]
        if let caFile { environment["HERALD_CA_FILE"] = caFile }
        return environment
    }

    /// The authority a client of this stack's emulator trusts (nil: cleartext).
    public var caFile: String? { try? TestTLS.caFile(for: emulator) }

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
        configuration.tls = emulator.configuration.tls  // the same certificate: the workers trust its authority
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

