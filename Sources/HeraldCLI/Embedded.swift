import Emulator
import FCM
import Foundation
import HTTPClient
import LocalPostgres
import Logging
import Postgres
import Queue
import Worker

/// Options every command that talks to PostgreSQL or FCM shares.
let connectionOptions: [Option] = [
    Option(name: "database-url", env: "DATABASE_URL", value: "URL",
           help: "PostgreSQL to use. Unset: a private PostgreSQL under the data folder (the embedded default)."),
    Option(name: "credentials", env: "GOOGLE_APPLICATION_CREDENTIALS", value: "FILE",
           help: "Service-account JSON (project_id, client_email, private_key, token_uri). Unset (and no --fcm-url): the local FCM emulator."),
    Option(name: "fcm-url", env: "HERALD_FCM_URL", value: "URL",
           help: "FCM base URL; http:// uses HTTP/2 with prior knowledge.", defaultText: "https://fcm.googleapis.com"),
    Option(name: "ca-file", env: "HERALD_CA_FILE", value: "FILE",
           help: "CA bundle for verifying FCM's TLS certificate (verification is always on)."),
    Option(name: "data-dir", env: "HERALD_HOME", value: "DIR",
           help: "Folder of the embedded default's PostgreSQL and emulator credentials.", defaultText: "./.herald"),
    Option(name: "log-level", env: "HERALD_LOG_LEVEL", value: "LEVEL", help: "debug, info, warn or error.", defaultText: "info"),
    Option(name: "log-format", env: "HERALD_LOG_FORMAT", value: "FORMAT",
           help: "text, or json: one object per line with time, level, msg, pid and the job's fields.", defaultText: "text"),
]

/// Where this run's PostgreSQL and FCM are: given by the user, or the embedded default (a
/// private PostgreSQL under the data folder, the FCM emulator in this process).
final class RunEnvironment {
    var databaseURL = ""
    var credentialsPath = ""
    var fcmBaseURL = "https://fcm.googleapis.com"
    var caFile: String?
    /// The service account of `credentialsPath`, once `resolveFCM` has read it.
    var account: ServiceAccount?
    var cluster: LocalCluster?
    var emulator: EmulatorServer?
    let log: Logger

    init(log: Logger) { self.log = log }

    static func logger(_ parsed: ParsedOptions, prefix: String) throws(UsageError) -> Logger {
        var level = Logger.Level.info
        var format = Logger.Format.text
        if let text = parsed.string("log-level") {
            guard let named = Logger.Level(name: text) else {
                throw UsageError("herald \(parsed.command): \(parsed.lookup("log-level")!.source) \"\(text)\" is not a log level; give debug, info, warn or error")
            }
            level = named
        }
        if let text = parsed.string("log-format") {
            guard let named = Logger.Format(name: text) else {
                throw UsageError("herald \(parsed.command): \(parsed.lookup("log-format")!.source) \"\(text)\" is not a log format; give text or json")
            }
            format = named
        }
        return Logger(level: level, format: format, prefix: prefix)
    }

    static func dataDirectory(_ parsed: ParsedOptions) -> String {
        let path = parsed.string("data-dir") ?? ".herald"
        return URL(fileURLWithPath: path).standardizedFileURL.path
    }

    /// Resolves the database (starting and migrating the embedded one when none is given).
    /// `folder` is the cluster's folder inside the data folder (`herald bench` keeps its own).
    func resolveDatabase(_ parsed: ParsedOptions, durable: Bool = true, folder: String = "postgres") throws {
        if let url = parsed.string("database-url") {
            databaseURL = url
            return
        }
        let directory = Self.dataDirectory(parsed) + "/" + folder
        log.info("no DATABASE_URL: starting a private PostgreSQL in \(directory)")
        let started = try LocalCluster.start(directory: directory, durable: durable,
                                             settings: ["shared_buffers": "256MB", "max_wal_size": "2GB"])
        if started.directory != directory {
            log.info("the postgres user cannot reach \(directory); the private PostgreSQL lives in \(started.directory) instead")
        }
        cluster = started
        databaseURL = started.url
        let connection = try PGConnection(url: databaseURL)
        for name in try Migrator.migrate(connection) { log.info("applied migration \(name)") }
    }

    /// Resolves FCM (starting the emulator when neither credentials nor an FCM URL are given).
    func resolveFCM(_ parsed: ParsedOptions, emulatorConfiguration: EmulatorConfiguration? = nil) throws {
        caFile = parsed.string("ca-file")
        if let path = parsed.string("credentials") {
            credentialsPath = path
            if let url = parsed.string("fcm-url") { fcmBaseURL = url }
            // Fail now, naming the file, rather than in every worker.
            do { account = try ServiceAccount.load(path: path) } catch {
                throw UsageError("herald \(parsed.command): \(parsed.lookup("credentials")!.source): \(error)")
            }
            return
        }
        if let url = parsed.string("fcm-url") {
            throw UsageError("herald \(parsed.command): \(parsed.lookup("fcm-url")!.source) is \(url) but no credentials are given; set GOOGLE_APPLICATION_CREDENTIALS (or --credentials) to a service-account JSON for it")
        }
        var configuration = emulatorConfiguration ?? EmulatorConfiguration(host: "127.0.0.1", port: 0, threads: 1)
        configuration.port = 0
        let server = EmulatorServer(configuration: configuration)
        try server.start()
        emulator = server
        let directory = Self.dataDirectory(parsed)
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        credentialsPath = directory + "/emulator-service-account.json"
        try server.writeServiceAccount(to: credentialsPath, projectID: "herald-local")
        account = try ServiceAccount.load(path: credentialsPath)
        fcmBaseURL = server.baseURL
        log.info("no GOOGLE_APPLICATION_CREDENTIALS: using the local FCM emulator at \(server.baseURL) (project herald-local)")
    }

    /// One synchronous FCM connection for a command (`herald send`, `herald groups`).
    struct FCMConnection {
        var account: ServiceAccount
        var auth: AccessTokenProvider
        var client: HTTPClient
        var endpoint: FCMEndpoint
    }

    /// Resolves FCM (see `resolveFCM`) and opens a client for it.
    func connectFCM(_ parsed: ParsedOptions) throws -> FCMConnection {
        try resolveFCM(parsed)
        guard let account else { throw UsageError("herald \(parsed.command): no service account was read") }
        var configuration = HTTPClientConfiguration()
        configuration.caFile = caFile
        return FCMConnection(account: account, auth: AccessTokenProvider(account: account, caFile: caFile),
                             client: try HTTPClient(configuration: configuration),
                             endpoint: FCMEndpoint(baseURL: fcmBaseURL, projectID: account.projectID))
    }

    /// Variables a worker process needs to find the same database and FCM.
    var childEnvironment: [String: String] {
        var env = ["DATABASE_URL": databaseURL, "GOOGLE_APPLICATION_CREDENTIALS": credentialsPath, "HERALD_FCM_URL": fcmBaseURL]
        if let caFile { env["HERALD_CA_FILE"] = caFile }
        return env
    }

    func shutdown() {
        emulator?.stop()
        emulator = nil
        if let cluster {
            do { try cluster.stop() } catch { log.warning("could not stop the private PostgreSQL: \(error)") }
        }
        cluster = nil
    }
}
