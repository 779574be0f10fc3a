import CommandOptions
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
           help: "Service-account JSON (project_id, client_email, private_key, token_uri). Required, except on the embedded default or with --emulator."),
    Option(name: "fcm-url", env: "HERALD_FCM_URL", value: "URL",
           help: "FCM base URL; http:// (a local emulator) uses HTTP/1.1, https:// HTTP/2.", defaultText: "https://fcm.googleapis.com"),
    Option(name: "ca-file", env: "HERALD_CA_FILE", value: "FILE",
           help: "CA bundle for verifying FCM's TLS certificate (verification is always on)."),
    allowInsecureTransportOption,
    Option(name: "data-dir", env: "HERALD_HOME", value: "DIR",
           help: "Folder of the embedded default's PostgreSQL and emulator credentials.", defaultText: "./.herald"),
    Option(name: "log-level", env: "HERALD_LOG_LEVEL", value: "LEVEL", help: "debug, info, warn or error.", defaultText: "info"),
    Option(name: "log-format", env: "HERALD_LOG_FORMAT", value: "FORMAT",
           help: "text, or json: one object per line with time, level, msg, pid and the job's fields.", defaultText: "text"),
]

/// The command's database setting (DATABASE_URL or `--database-url`), checked before anything
/// connects: a string that is not a well-formed connection string is refused, naming the setting
/// and what a valid one looks like, and is never echoed (nor handed to libpq to echo).
func checkedDatabaseURL(_ parsed: ParsedOptions) throws(UsageError) -> String? {
    guard let (url, source) = parsed.lookup("database-url") else { return nil }
    do { _ = try ConnectionString.parse(url) } catch {
        let text = error.description.replacingOccurrences(of: "DATABASE_URL (--database-url)", with: source)
        throw UsageError("herald \(parsed.command): \(text)")
    }
    return url
}

/// `options` with the help of some reworded for one command, by name: what a shared option does
/// differs between the commands that take it (only `work` and `bench` start a private PostgreSQL).
func withHelp(_ options: [Option], _ helps: [String: String]) -> [Option] {
    options.map { option in
        guard let help = helps[option.name] else { return option }
        var changed = option
        changed.help = help
        return changed
    }
}

/// `--allow-insecure-transport`: with real credentials, plain http to a host that is not loopback
/// is refused (FCM, Instance ID, a key's token_uri) unless this is given (see TransportSecurity).
let allowInsecureTransportOption = Option(name: "allow-insecure-transport", env: TransportSecurity.environmentVariable,
    help: "Let credentials go over plain http:// to a host that is not loopback (FCM URL, Instance ID URL, a key's token_uri); warned about at start. Without it such a URL is refused.")

/// `--emulator`: the explicit way to send to the local emulator (`work`, `send`, `groups`).
let emulatorOption = Option(name: "emulator",
    help: "Send to a local FCM emulator started in this process instead of FCM (for local testing: no message reaches a device). Cannot be combined with credentials.")

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
    /// `folder` is the cluster's folder inside the data folder (`herald bench` keeps its own);
    /// `serverSettings` are added to the private cluster's (e.g. `herald bench --profile`'s).
    func resolveDatabase(_ parsed: ParsedOptions, durable: Bool = true, folder: String = "postgres",
                         serverSettings: [String: String] = [:]) throws {
        if let url = (try checkedDatabaseURL(parsed)) {
            databaseURL = url
            return
        }
        let directory = Self.dataDirectory(parsed) + "/" + folder
        try claimDataDirectory(parsed)
        log.info("no DATABASE_URL: starting a private PostgreSQL in \(directory)")
        let started = try LocalCluster.start(directory: directory, durable: durable,
                                             settings: ["shared_buffers": "256MB", "max_wal_size": "2GB"].merging(serverSettings) { $1 })
        if started.directory != directory {
            log.info("the postgres user cannot reach \(directory); the private PostgreSQL lives in \(started.directory) instead")
        }
        cluster = started
        databaseURL = started.url
        let connection = try PGConnection(url: databaseURL)
        for name in try Migrator.migrate(connection) { log.info("applied migration \(name)") }
    }

    /// An emulator key written for this process only, removed when it ends.
    private var temporaryCredentials: String?
    /// The in-process emulator's certificate, removed when it stops.
    private var certificate: EmulatorCertificate?
    deinit {
        if let temporaryCredentials { try? FileManager.default.removeItem(atPath: temporaryCredentials) }
        certificate?.remove()
    }

    /// The claim on the data folder, held until this process exits.
    private var folderLock: FolderLock?

    /// Takes the data folder (the private PostgreSQL, the emulator's key) for this run, or
    /// refuses at once naming the run that has it: a second run in the same folder would stop the
    /// first one's server under it and rewrite the key its workers read.
    private func claimDataDirectory(_ parsed: ParsedOptions) throws {
        guard folderLock == nil else { return }
        let directory = Self.dataDirectory(parsed)
        let command = parsed.command
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        } catch {
            throw UsageError("herald \(command): cannot create the folder \(directory) for the private PostgreSQL: \(error.localizedDescription)")
        }
        let started = ISO8601DateFormatter().string(from: Date())
        do {
            folderLock = try FolderLock(path: directory + "/herald.lock",
                                        holder: "herald \(command) (pid \(getpid()), started \(started))")
        } catch let held as FolderLock.Held {
            throw UsageError("""
                herald \(command): the data folder \(directory) is in use: \(held.holder.isEmpty ? "another herald run" : held.holder) has it.
                Wait for that run to finish (or stop it), or give this one a data folder of its own: --data-dir DIR (or HERALD_HOME=DIR).
                """)
        } catch {
            throw UsageError("herald \(command): \(error)")
        }
    }

    /// When a command may send to the FCM emulator in its own process instead of to FCM.
    enum EmulatorUse {
        /// Only when asked with `--emulator`: a missing credentials setting is an error.
        case onRequest
        /// Also on the embedded default (no `--database-url`): nothing configured at all.
        case onEmbeddedDefault
        /// Whenever no credentials are given (`herald bench`, which sends only its own made-up jobs).
        case unlessCredentials
    }

    /// Resolves FCM: the service account given, or the emulator in this process when `use`
    /// allows it. A missing service account never silently becomes the emulator for real jobs:
    /// that would mark them delivered while nothing reaches a device.
    func resolveFCM(_ parsed: ParsedOptions, use: EmulatorUse, emulatorConfiguration: EmulatorConfiguration? = nil) throws {
        caFile = parsed.string("ca-file")
        let asked = parsed.accepts("emulator") && parsed.has("emulator")
        if let path = parsed.string("credentials") {
            if asked {
                throw UsageError("herald \(parsed.command): --emulator and \(parsed.lookup("credentials")!.source) are both given; give --emulator to send to the local emulator, or the credentials to send to FCM, not both")
            }
            credentialsPath = path
            if let url = try parsed.httpURL("fcm-url") { fcmBaseURL = url }
            // Fail now, naming the file, rather than in every worker.
            let loaded: ServiceAccount
            do { loaded = try ServiceAccount.load(path: path) } catch {
                throw UsageError("herald \(parsed.command): \(parsed.lookup("credentials")!.source): \(error)")
            }
            if let warning = KeyFilePermissions.warning(path: path) { log.warning(warning) }
            // Before any client is made: nothing has been sent when this refuses.
            try Self.checkTransport(parsed, log: log, key: (loaded, "\(parsed.lookup("credentials")!.source) \(path)"))
            account = loaded
            return
        }
        if let url = try parsed.httpURL("fcm-url") {
            throw UsageError("herald \(parsed.command): \(parsed.lookup("fcm-url")!.source) is \(url) but no credentials are given; set GOOGLE_APPLICATION_CREDENTIALS (or --credentials) to a service-account JSON for it")
        }
        let embeddedDefault = parsed.accepts("database-url") && parsed.string("database-url") == nil
        let allowed: Bool
        switch use {
        case .onRequest: allowed = asked
        case .onEmbeddedDefault: allowed = asked || embeddedDefault
        case .unlessCredentials: allowed = true
        }
        guard allowed else { throw Self.missingCredentials(parsed) }
        var configuration = emulatorConfiguration ?? EmulatorConfiguration(host: "127.0.0.1", port: 0, threads: 1)
        configuration.port = 0
        // Over TLS, as FCM is reached: a certificate made for this run, whose authority the
        // workers are given as HERALD_CA_FILE, exactly as a user gives theirs.
        let made = try EmulatorCertificate()
        certificate = made
        configuration.tls = made.files
        caFile = made.caFile
        let server = EmulatorServer(configuration: configuration)
        try server.start()
        emulator = server
        if embeddedDefault {
            // The embedded default's key lives in its data folder, which this run takes.
            try claimDataDirectory(parsed)
            credentialsPath = Self.dataDirectory(parsed) + "/emulator-service-account.json"
        } else {
            // --emulator beside a database of the user's: a key of this process's own, so two such
            // runs never rewrite each other's.
            credentialsPath = NSTemporaryDirectory() + "herald-emulator-account-\(getpid()).json"
            temporaryCredentials = credentialsPath
        }
        try server.writeServiceAccount(to: credentialsPath, projectID: "herald-local")
        account = try ServiceAccount.load(path: credentialsPath)
        fcmBaseURL = server.baseURL
        let why = asked ? "--emulator" : "no GOOGLE_APPLICATION_CREDENTIALS"
        log.warning("\(why): sending to the local emulator at \(server.baseURL) (FCM project herald-local\(parsed.command == "work" ? "; every registry entry's jobs, APNs apps' included, go there too" : "")); no message reaches a device")
    }

    /// Refuses a start whose credentials would cross the network in clear text: an http FCM URL
    /// (`--fcm-url`), Instance ID URL (`--iid-url`, where the command has it) or key `token_uri`
    /// whose host is not loopback, unless `--allow-insecure-transport` is given; then it warns
    /// once, and passes the allowance on to the pool's workers (their registry keys).
    static func checkTransport(_ parsed: ParsedOptions, log: Logger, key: (account: ServiceAccount, source: String)? = nil) throws(UsageError) {
        let allowed = parsed.accepts("allow-insecure-transport") && parsed.has("allow-insecure-transport")
        var problems: [String] = []
        // `apns-url`: the APNs provider tokens go there.
        for name in ["fcm-url", "iid-url", "apns-url", "fcm-data-url"] where parsed.accepts(name) {
            guard let (url, source) = parsed.lookup(name),
                  let problem = TransportSecurity.refusal(url, setting: source, allowed: false) else { continue }
            problems.append(problem)
        }
        if let key, let problem = TransportSecurity.tokenURIRefusal(key.account, source: key.source, allowed: false) {
            problems.append(problem)
        }
        guard !problems.isEmpty else { return }
        guard allowed else {
            throw UsageError("herald \(parsed.command): " + problems.joined(separator: "\nherald \(parsed.command): ") + "; nothing was sent")
        }
        setenv(TransportSecurity.environmentVariable, "1", 1)
        let unwarned = problems.map { $0.components(separatedBy: ": plain http").first ?? $0 }.filter { !warnedTransport.contains($0) }
        guard !unwarned.isEmpty else { return }
        warnedTransport.formUnion(unwarned)
        log.warning("\(TransportSecurity.flag): credentials go over plain http: " + unwarned.joined(separator: "; ")
                    + "; anyone on the network in between can read the access token")
    }

    /// What `checkTransport` has warned about in this process (each once).
    nonisolated(unsafe) static var warnedTransport: Set<String> = []

    /// The refusal of a start without credentials: what is missing, how to set it, and the
    /// explicit way to test locally.
    static func missingCredentials(_ parsed: ParsedOptions) -> UsageError {
        let command = parsed.command
        var why = ""
        if parsed.accepts("database-url"), let database = parsed.lookup("database-url") {
            why = " (\(database.source) is set, so this is not the embedded default; only that default uses the local emulator unasked)"
        }
        let example = command == "work" ? "GOOGLE_APPLICATION_CREDENTIALS=/secrets/service-account.json herald work"
            : "herald \(command) --credentials /secrets/service-account.json ..."
        return UsageError("""
            herald \(command): no FCM credentials\(why); nothing was sent.
              Set GOOGLE_APPLICATION_CREDENTIALS (or --credentials) to your Firebase project's service-account JSON key
              (Firebase console > Project settings > Service accounts > Generate new private key), e.g.
                \(example)
              For local testing without FCM, pass --emulator: messages then go to a local FCM emulator and never reach a device.\(command == "work" ? "\n  A pool of registry entries needs no GOOGLE_APPLICATION_CREDENTIALS: register an FCM project (herald projects add NAME --credentials FILE) or an APNs app (herald apns add APP --key-file FILE ...; docs/apns.md), and it works their jobs." : "")
            """)
    }

    /// One synchronous FCM connection for a command (`herald send`, `herald groups`).
    struct FCMConnection {
        var account: ServiceAccount
        var auth: AccessTokenProvider
        var client: HTTPClient
        var endpoint: FCMEndpoint
    }

    /// Resolves FCM (see `resolveFCM`; the emulator only with `--emulator`) and opens a client for it.
    func connectFCM(_ parsed: ParsedOptions) throws -> FCMConnection {
        try resolveFCM(parsed, use: .onRequest)
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
        // The emulator in this process also answers Instance ID's topic calls.
        if emulator != nil {
            env["HERALD_IID_URL"] = fcmBaseURL
            // And FCM's Data API, from what it received: the leader's daily fetch asks it, not Google.
            env["HERALD_FCM_DATA_URL"] = fcmBaseURL
        }
        return env
    }

    /// Leave the embedded PostgreSQL running at `shutdown` (`herald work --keep`).
    var keepCluster = false

    func shutdown() {
        emulator?.stop()
        emulator = nil
        certificate?.remove()
        certificate = nil
        if let cluster, keepCluster {
            print("""
                The private PostgreSQL keeps running (--keep):
                  psql '\(cluster.url(database: "postgres"))' -c 'SELECT * FROM herald.dead_letters'
                  stop it with: \(cluster.stopCommand)
                """)
        } else if let cluster {
            do { try cluster.stop() } catch { log.warning("could not stop the private PostgreSQL: \(error)") }
        }
        cluster = nil
    }
}
