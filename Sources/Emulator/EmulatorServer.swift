import Crypto
import Glibc
import HTTPServer
import JSON
import Synchronization

/// How an emulator runs; every default is the one written beside it.
public struct EmulatorConfiguration: Sendable {
    /// Address to listen on. Default `127.0.0.1`.
    public var host: String = "127.0.0.1"
    /// TCP port; 0 picks a free one. Default 8085.
    public var port: Int = 8085
    /// Event-loop threads. Default 2.
    public var threads: Int = 2
    /// A fixed delay for every send answer, in milliseconds; overrides the scenario's. Default nil.
    public var latencyMilliseconds: Int? = nil
    /// Scripts, random errors, latency and quota (see `Scenario`). Default: none of them.
    public var scenario: Scenario = Scenario()
    /// Sends served a second at most, past which requests queue (see `Scenario.capacityPerSecond`);
    /// overrides the scenario's. Default nil.
    public var capacityPerSecond: Double? = nil
    /// Serve HTTPS (h2 and HTTP/1.1 by ALPN) with these PEM files. Default nil: cleartext.
    public var tls: HTTPServer.TLSFiles? = nil
    /// `expires_in` of the access tokens `/token` issues, in seconds. Default 3600.
    public var tokenLifetimeSeconds: Int = 3600
    /// Length of issued access tokens in bytes (0: about 50; Google's are about 1,000).
    public var tokenBytes: Int = 0
    /// Delivered messages kept for `/emulator/messages`; later ones are only counted. Default 1,000,000.
    public var maxStoredMessages: Int = 1_000_000
    /// The URL clients reach the emulator at when it is not where it listens (a container name
    /// in docker-compose, say): written into service accounts' token_uri. Nil: `baseURL`.
    public var publicURL: String? = nil
    /// How connections are spread over the threads. Default: one acceptor dealing them out
    /// round-robin (see `HTTPServer.AcceptMode`).
    public var acceptMode: HTTPServer.AcceptMode = .acceptorHandsOff
    /// SETTINGS_MAX_CONCURRENT_STREAMS announced on every HTTP/2 connection; a stream beyond it
    /// is refused (RST_STREAM REFUSED_STREAM). Default 100, what FCM's front end allows.
    public var maxConcurrentStreams: Int = 100
    /// Ends HTTP/2 connections with a GOAWAY every N requests or seconds (see `GoawayEvery`);
    /// overrides the scenario's. Default nil.
    public var goawayEvery: GoawayEvery? = nil
    /// Refuses every Nth stream of a connection with REFUSED_STREAM, unprocessed. Default 0: never.
    public var refuseEveryStream: Int = 0
    /// The team ID of the APNs keys the emulator writes (`writeAPNsKey`) and loads from a folder
    /// (`trustAPNsKeys`). Default `HERALDTEAM`.
    public var apnsTeamID: String = "HERALDTEAM"
    /// The bundle ID (the app's `apns-topic`) of the APNs keys the emulator writes and loads: a
    /// push with another topic is answered 400 TopicDisallowed. Default `com.example.shop`.
    public var apnsTopic: String = "com.example.shop"
    /// Seconds after its `iat` a provider token is answered 403 ExpiredProviderToken (Apple: an
    /// hour); shorter in tests of the renewal.
    public var apnsProviderTokenMaxAge: Int64 = 3600
    /// What FCM's Data API answers besides the counts (see `DeliveryDataBook`): the day messages
    /// count for, the shares reported, the page size, projects refused. Default: today, every
    /// message delivered without delay, pages as asked, every project's own key allowed.
    public var deliveryData = DeliveryDataOptions()

    public init(host: String = "127.0.0.1", port: Int = 8085, threads: Int = 2) {
        self.host = host
        self.port = port
        self.threads = threads
    }
}

/// Why the emulator could not do what was asked.
public struct EmulatorError: Error, Sendable, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// A local stand-in for FCM's HTTP v1 API, its OAuth2 token endpoint and device-group
/// management, with fault injection and observation endpoints, for tests, benchmarks and
/// `herald work` without Google.
///
/// ```swift
/// var configuration = EmulatorConfiguration(port: 0)
/// configuration.tokenLifetimeSeconds = 60
/// let emulator = EmulatorServer(configuration: configuration)
/// try emulator.start()
/// let account = try emulator.serviceAccountJSON(projectID: "demo")  // token_uri points here
/// // POST \(emulator.baseURL)/v1/projects/demo/messages:send ...
/// emulator.stop()
/// ```
///
/// Endpoints: `POST /token`, `POST /v1/projects/{p}/messages:send`, `POST|GET /fcm/notification`,
/// `GET /emulator/messages[?token=T|topic=T|condition=C][&limit=N]`, `DELETE /emulator/messages`,
/// `GET /emulator/stats`, `GET /emulator/health`, APNs's `POST /3/device/{token}` (see
/// `APNsStandIn`, `writeAPNsKey(folder:)`), and Web Push's `POST /webpush/subscriptions`,
/// `POST /webpush/push/{id}`, `GET /emulator/webpush/messages` (see `WebPushStandIn`). Fault tokens: see `FaultToken` and `APNsFaultToken`;
/// scenario files: see `Scenario`.
public final class EmulatorServer: Sendable {
    public let configuration: EmulatorConfiguration
    private let backend: Backend
    private let server: HTTPServer

    public init(configuration: EmulatorConfiguration) {
        self.configuration = configuration
        let backend = Backend(configuration: configuration)
        self.backend = backend
        var http = HTTPServer.Configuration(host: configuration.host, port: configuration.port, threads: configuration.threads,
                                            tls: configuration.tls)
        http.maxConcurrentStreams = configuration.maxConcurrentStreams
        switch configuration.goawayEvery ?? configuration.scenario.goawayEvery {
        case .requests(let n)?: http.goawayAfterRequests = n
        case .seconds(let s)?: http.goawayAfterSeconds = s
        case nil: break
        }
        http.refuseEveryStream = configuration.refuseEveryStream
        http.acceptMode = configuration.acceptMode
        server = HTTPServer(configuration: http) { request in backend.handle(request) }
        // Weak: the server's handler holds the backend, so a strong reference back would keep an
        // emulator dropped without stop() (and its threads) alive for good.
        let server = self.server
        backend.serverStatistics.withLock { $0 = { [weak server] in server?.statistics } }
        backend.resetServerStatistics.withLock { $0 = { [weak server] in server?.resetStatistics() } }
    }

    /// Starts listening; afterwards `port`, `baseURL` and `tokenURI` are final.
    public func start() throws(EmulatorError) {
        guard configuration.tokenLifetimeSeconds > 0 else {
            throw EmulatorError("the token lifetime must be at least 1 second, not \(configuration.tokenLifetimeSeconds)")
        }
        if let problem = configuration.scenario.quota?.problem { throw EmulatorError("the emulator's quota: \(problem)") }
        do {
            try server.start()
        } catch {
            throw EmulatorError("the emulator cannot start on \(configuration.host):\(configuration.port): \(error)")
        }
        backend.tokenURI.withLock { $0 = baseURL + "/token" }
        backend.webPush.origin.withLock { $0 = baseURL }
    }

    /// Closes the port and every connection; joins the threads.
    public func stop() { server.stop() }

    /// Changes what FCM's Data API answers (the day messages count for, shares, page size,
    /// projects refused), as `POST /emulator/delivery-data` does.
    public func updateDeliveryData(_ change: (inout DeliveryDataOptions) -> Void) {
        backend.deliveryData.update(change)
    }

    /// What `GET /emulator/delivery-data` answers: the options, the counts per project, day and
    /// label, and the Data API's list requests answered (`list_requests`) and refused (`refusals`).
    public var deliveryData: JSONValue { backend.deliveryData.snapshot() }

    /// CPU seconds its serving threads have spent so far (for `herald bench`'s CPU per message).
    public var cpuSeconds: Double { server.eventLoopCPUSeconds }

    /// The port listened on (the chosen one when configured as 0).
    public var port: Int { server.port }

    /// `http://127.0.0.1:PORT` (https with TLS); a wildcard host is written as loopback.
    public var baseURL: String {
        if var url = configuration.publicURL {
            while url.hasSuffix("/") { url.removeLast() }
            return url
        }
        var host = configuration.host
        if host == "0.0.0.0" || host.isEmpty { host = "127.0.0.1" }
        if host == "::" { host = "::1" }
        if host.contains(":") && !host.hasPrefix("[") { host = "[\(host)]" }
        return "\(configuration.tls == nil ? "http" : "https")://\(host):\(port)"
    }

    /// Where service accounts send their JWT grants.
    public var tokenURI: String { baseURL + "/token" }

    /// The send URL of a project, `{baseURL}/v1/projects/{project}/messages:send`.
    public func sendURL(projectID: String) -> String { "\(baseURL)/v1/projects/\(projectID)/messages:send" }

    /// A new service account for `projectID` (a fresh RSA key pair), in Google's JSON format with
    /// `token_uri` pointing at this emulator; its JWT grants are accepted from now on. Call after
    /// `start()` so the port in `token_uri` is the real one.
    public func serviceAccountJSON(projectID: String) throws(EmulatorError) -> String {
        do {
            return try backend.credentials.createServiceAccount(projectID: projectID, tokenURI: tokenURI)
        } catch {
            throw EmulatorError("cannot create a service account key: \(error)")
        }
    }

    /// Writes `serviceAccountJSON(projectID:)` to `path` with mode 0600 (it holds a private key).
    public func writeServiceAccount(to path: String, projectID: String) throws(EmulatorError) {
        let json = try serviceAccountJSON(projectID: projectID)
        try writePrivateFile(path, contents: json)
    }

    /// Writes `count` service accounts, for projects `prefix-1` ... `prefix-count`, each to
    /// `folder/<project>.json` (mode 0600), sharing one key pair, so tests and benchmarks can
    /// register a thousand projects in moments. Returns the projects, in order.
    @discardableResult
    public func writeServiceAccounts(count: Int, folder: String, prefix: String = "herald-project") throws(EmulatorError) -> [String] {
        let key: RSAPrivateKey
        do { key = try RSAPrivateKey.generate(bits: 2048) } catch {
            throw EmulatorError("cannot create a service account key: \(error)")
        }
        var projects: [String] = []
        for index in 1...max(1, count) {
            let project = "\(prefix)-\(index)"
            let json: String
            do { json = try backend.credentials.createServiceAccount(projectID: project, tokenURI: tokenURI, key: key) } catch {
                throw EmulatorError("cannot create a service account key: \(error)")
            }
            try writePrivateFile(folder + "/" + project + ".json", contents: json)
            projects.append(project)
        }
        return projects
    }

    /// Accepts the JWT grants of an existing service-account JSON (its `private_key`,
    /// `client_email` and `project_id`), so a file written by an earlier run keeps working.
    public func trustServiceAccount(json: String) throws(EmulatorError) {
        var publicKeys: [String: RSAPublicKey] = [:]
        _ = try trust(json: json, publicKeys: &publicKeys)
    }

    /// Accepts the JWT grants of every service account in `folder` (each `*.json` file), such as
    /// the keys `writeServiceAccounts` wrote there for an earlier run: a registry of a thousand
    /// projects keeps its keys across a restart of the emulator. Returns their projects, in the
    /// order of the files' names. An error names the file (never its content) and trusts none.
    @discardableResult
    public func trustServiceAccounts(inFolder folder: String) throws(EmulatorError) -> [String] {
        let names = try fileNames(in: folder).filter { $0.hasSuffix(".json") && !$0.hasPrefix(".") }
        guard !names.isEmpty else { throw EmulatorError("\(folder) holds no service-account file (*.json)") }
        // Read them all before trusting any, so a bad file leaves the emulator as it was.
        // Accounts written together share one key pair: its public half is made once.
        var publicKeys: [String: RSAPublicKey] = [:]
        var accounts: [(email: String, project: String, key: RSAPublicKey)] = []
        for name in names.sorted() {
            let path = folder + "/" + name
            do {
                accounts.append(try account(json: try readTextFile(path), publicKeys: &publicKeys))
            } catch {
                throw EmulatorError("\(path): \(error)")
            }
        }
        for account in accounts { backend.credentials.register(email: account.email, projectID: account.project, publicKey: account.key) }
        return accounts.map(\.project)
    }

    private func trust(json: String, publicKeys: inout [String: RSAPublicKey]) throws(EmulatorError) -> String {
        let account = try account(json: json, publicKeys: &publicKeys)
        backend.credentials.register(email: account.email, projectID: account.project, publicKey: account.key)
        return account.project
    }

    private func account(json: String, publicKeys: inout [String: RSAPublicKey]) throws(EmulatorError)
        -> (email: String, project: String, key: RSAPublicKey) {
        guard let document = try? JSONValue.parse(json), let email = document["client_email"]?.stringValue,
              let project = document["project_id"]?.stringValue, let pem = document["private_key"]?.stringValue
        else {
            throw EmulatorError("the service account JSON needs client_email, project_id and private_key")
        }
        if let known = publicKeys[pem] { return (email, project, known) }
        do {
            let key = try RSAPrivateKey(pem: pem).publicKey
            publicKeys[pem] = key
            return (email, project, key)
        } catch {
            throw EmulatorError("the service account's private_key is not a usable RSA key: \(error)")
        }
    }

    // MARK: APNs

    /// A new APNs signing key (P-256) for the team `apnsTeamID`, written as Apple hands keys out:
    /// `folder/AuthKey_<KEYID>.p8` (PKCS#8 PEM, mode 0600). Its provider tokens are accepted from
    /// now on. Returns the key ID (10 characters, as Apple's), the team ID and the file's path.
    /// The key is for the app `apnsTopic`: a line above the PEM block (text a PEM reader skips,
    /// as RFC 7468 allows) says the key ID, team ID and topic it was issued for, so an emulator
    /// that loads the file later (`trustAPNsKeys`, `herald work --emulator`) knows them without
    /// taking them from whoever registered the key.
    public func writeAPNsKey(folder: String) throws(EmulatorError) -> (keyID: String, teamID: String, path: String) {
        let key: P256PrivateKey
        do { key = try P256PrivateKey.generate() } catch { throw EmulatorError("cannot create an APNs key: \(error)") }
        let alphabet = Array("ABCDEFGHJKLMNPQRSTUVWXYZ23456789".utf8)
        let keyID = String(decoding: Random.bytes(10).map { alphabet[Int($0) % alphabet.count] }, as: UTF8.self)
        let path = folder + "/AuthKey_" + keyID + ".p8"
        var pem = key.pemPKCS8
        while pem.hasSuffix("\n") { pem.removeLast() }
        let issue = APNsKeyIssue(keyID: keyID, teamID: configuration.apnsTeamID, topic: configuration.apnsTopic)
        try writePrivateFile(path, contents: issue.line + "\n" + pem)
        backend.apns.trust(keyID: keyID, teamID: issue.teamID, publicKey: key.publicKey, topics: [issue.topic])
        return (keyID, issue.teamID, path)
    }

    /// Accepts the provider tokens of an APNs key (`.p8` PEM) as key `keyID` of `teamID`, for
    /// pushes to `topics` (bundle IDs; nil: `apnsTopic`).
    public func trustAPNsKey(pem: String, keyID: String, teamID: String, topics: [String]? = nil) throws(EmulatorError) {
        do {
            let key = try P256PrivateKey(pem: pem)
            backend.apns.trust(keyID: keyID, teamID: teamID, publicKey: key.publicKey, topics: Set(topics ?? [configuration.apnsTopic]))
        } catch {
            throw EmulatorError("APNs key \(keyID): \(error)")
        }
    }

    /// Accepts every `AuthKey_<KEYID>.p8` in `folder` (a key written by an earlier run, say) for
    /// `teamID` (default `apnsTeamID`). Returns the key IDs, sorted.
    @discardableResult
    public func trustAPNsKeys(folder: String, teamID: String? = nil) throws(EmulatorError) -> [String] {
        let names = try fileNames(in: folder).filter { $0.hasPrefix("AuthKey_") && $0.hasSuffix(".p8") && $0.utf8.count > 11 }
        guard !names.isEmpty else { throw EmulatorError("no AuthKey_<KEYID>.p8 file in \(folder)") }
        // Read them all before trusting any, so a bad file leaves the emulator as it was.
        var keys: [(keyID: String, key: P256PublicKey, issue: APNsKeyIssue?)] = []
        for name in names.sorted() {
            let keyID = String(name.dropFirst(8).dropLast(3))
            do {
                let pem = try readTextFile(folder + "/" + name)
                keys.append((keyID, try P256PrivateKey(pem: pem).publicKey, APNsKeyIssue(pem: pem)))
            } catch {
                throw EmulatorError("\(folder)/\(name): \(error)")
            }
        }
        for (keyID, key, issue) in keys {
            // A key this emulator issued says its team and topic; another takes the configured ones.
            backend.apns.trust(keyID: keyID, teamID: teamID ?? issue?.teamID ?? configuration.apnsTeamID, publicKey: key,
                               topics: [issue?.topic ?? configuration.apnsTopic])
        }
        return keys.map(\.keyID)
    }

    /// `\(baseURL)/3/device/<token>`, where APNs requests go.
    public func apnsURL(deviceToken: String) -> String { baseURL + "/3/device/" + deviceToken }

    /// The pushes the APNs side accepted (for `deviceToken`, or all), oldest first.
    public func apnsDeliveries(deviceToken: String? = nil) -> [APNsDelivery] { backend.apns.deliveries(deviceToken: deviceToken) }

    /// The APNs side's counters.
    public var apnsStatistics: APNsStatistics { backend.apns.statistics }

    // MARK: Web Push

    /// A subscription issued as a browser would, its endpoint on this emulator (call after
    /// `start()`): `json` is what `PushSubscription.toJSON()` gives a page. Pushes to it are
    /// decrypted with the keys it keeps (see `WebPushStandIn`).
    public func webPushSubscribe(_ options: WebPushSubscriptionOptions = WebPushSubscriptionOptions()) throws(EmulatorError) -> WebPushSubscription {
        do { return try backend.webPush.subscribe(options) } catch { throw EmulatorError("cannot make a subscription's key pair: \(error)") }
    }

    /// The pushes the Web Push side accepted (to `subscriptionID`, or all), oldest first.
    public func webPushDeliveries(subscriptionID: String? = nil) -> [WebPushDelivery] {
        backend.webPush.deliveries(subscriptionID: subscriptionID)
    }

    /// The Web Push side's counters.
    public var webPushStatistics: WebPushStatistics { backend.webPush.statistics }

    /// Every QUOTA_EXCEEDED answer given (up to the last 200,000), oldest first: the emulator's
    /// own record of when a target was refused and which limit was named.
    public func quotaRefusals() -> [QuotaRefusal] { backend.refusals.withLock { $0.items } }

    /// The messages delivered to `token` (through a device group too), oldest first.
    public func deliveredMessages(token: String) -> [DeliveredMessage] {
        backend.store.messages(target: "token:" + token, limit: nil)
    }

    /// Every delivered message, oldest first.
    /// The topic registry (subscribers and the batchAdd / batchRemove requests), as it is now.
    public var topics: TopicRegistry { backend.topics.withLock { $0 } }

    public func deliveredMessages() -> [DeliveredMessage] { backend.store.messages(target: nil, limit: nil) }

    /// The `/emulator/stats` document.
    public var statistics: JSONValue { backend.statisticsJSON() }

    /// Access tokens issued by `/token` so far.
    public var tokensIssued: Int { backend.credentials.tokensIssued }

    /// Requests that came before a Retry-After given for them had passed.
    public var retryAfterViolations: Int { backend.stats.violationCount }

    /// Requests that came before a Retry-After had passed and more than `milliseconds` after the
    /// answer that gave it left: not requests already on their way when it was answered.
    public func retryAfterViolations(laterThan milliseconds: Int) -> Int { backend.stats.violations(laterThan: milliseconds) }

    /// What `DELETE /emulator/messages` does: forget messages, counters and fault attempts.
    public func reset() { backend.reset() }

    /// The HTTP server's own counters (h2/h1 requests, streams, connections).
    public var serverStatistics: HTTPServerStatistics { server.statistics }
}

/// Writes a file only its owner can read, replacing what was there.
func writePrivateFile(_ path: String, contents: String) throws(EmulatorError) {
    let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
    guard fd >= 0 else { throw EmulatorError("cannot write \(path): \(String(cString: strerror(errno)))") }
    defer { close(fd) }
    // An existing file keeps its mode through O_CREAT; tighten it.
    guard fchmod(fd, 0o600) == 0 else { throw EmulatorError("cannot make \(path) private (chmod 600): \(String(cString: strerror(errno)))") }
    var bytes = Array(contents.utf8)
    bytes.append(0x0A)
    var offset = 0
    while offset < bytes.count {
        let n = bytes.withUnsafeBytes { write(fd, $0.baseAddress! + offset, $0.count - offset) }
        if n < 0 {
            if errno == EINTR { continue }
            throw EmulatorError("cannot write \(path): \(String(cString: strerror(errno)))")
        }
        offset += n
    }
}

/// The names in a folder (`.` and `..` included, as readdir gives them).
func fileNames(in folder: String) throws(EmulatorError) -> [String] {
    guard let directory = opendir(folder) else {
        throw EmulatorError("cannot read the folder \(folder): \(String(cString: strerror(errno)))")
    }
    defer { closedir(directory) }
    var names: [String] = []
    while let entry = readdir(directory) {
        names.append(withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) })
    }
    return names
}

/// The whole content of a file as text.
func readTextFile(_ path: String) throws(EmulatorError) -> String {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { throw EmulatorError("cannot read \(path): \(String(cString: strerror(errno)))") }
    defer { close(fd) }
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 65536)
    while true {
        let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress!, $0.count) }
        if n < 0 {
            if errno == EINTR { continue }
            throw EmulatorError("cannot read \(path): \(String(cString: strerror(errno)))")
        }
        if n == 0 { break }
        bytes.append(contentsOf: chunk[0..<n])
    }
    return String(decoding: bytes, as: UTF8.self)
}
