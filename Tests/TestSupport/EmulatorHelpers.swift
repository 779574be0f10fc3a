import Crypto
import Emulator
import Foundation
import JSON

/// How a curl subprocess talks to the server.
public enum CurlProtocol {
    /// HTTP/2 over cleartext with prior knowledge (the connection preface first).
    case h2c
    case http1
    /// HTTPS; ALPN offers h2 and http/1.1 (curl picks h2 when offered).
    case tlsH2(caFile: String)
    /// HTTPS restricted to HTTP/1.1 (ALPN offers only http/1.1).
    case tlsHTTP1(caFile: String)
    /// HTTPS without ALPN at all (the server must fall back to HTTP/1.1).
    case tlsNoALPN(caFile: String)
}

/// One answer as curl saw it.
public struct CurlResult {
    public var status: Int
    /// `2` or `1.1`, as curl's %{http_version} names it.
    public var version: String
    /// Lowercased header names.
    public var headers: [String: String]
    public var body: String
    public var seconds: Double
    /// Interim (1xx) statuses that came before the answer, e.g. 100 Continue.
    public var interim: [Int] = []

    public init(status: Int, version: String, headers: [String: String], body: String, seconds: Double, interim: [Int] = []) {
        self.status = status; self.version = version; self.headers = headers; self.body = body
        self.seconds = seconds; self.interim = interim
    }

    public var json: JSONValue? { try? JSONValue.parse(body) }
    /// The FcmError code of a v1 error body.
    public var fcmErrorCode: String? {
        json?["error"]?["details"]?.arrayValue?.first { $0["@type"]?.stringValue == "type.googleapis.com/google.firebase.fcm.v1.FcmError" }?["errorCode"]?.stringValue
    }
}

/// Runs the curl binary: an HTTP client independent of Herald's own, to test the emulator with.
public func curl(_ url: String, method: String = "GET", headers: [String: String] = [:], body: String? = nil,
          over protocolChoice: CurlProtocol = .h2c) throws -> CurlResult {
    var arguments = ["-s", "-S", "-i", "--max-time", "30", "-X", method]
    switch protocolChoice {
    case .h2c: arguments.append("--http2-prior-knowledge")
    case .http1: arguments.append("--http1.1")
    case .tlsH2(let ca): arguments += ["--http2", "--cacert", ca]
    case .tlsHTTP1(let ca): arguments += ["--http1.1", "--cacert", ca]
    case .tlsNoALPN(let ca): arguments += ["--http1.1", "--no-alpn", "--cacert", ca]
    }
    for (name, value) in headers { arguments += ["-H", "\(name): \(value)"] }
    if body != nil { arguments += ["--data-binary", "@-"] }
    let marker = "\n__curl__"
    arguments += ["-w", "\(marker)%{http_code} %{http_version} %{time_total}", url]

    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/curl")
    process.arguments = arguments
    let output = Pipe()
    let errors = Pipe()
    let input = Pipe()
    process.standardOutput = output
    process.standardError = errors
    process.standardInput = input
    try process.run()
    if let body { input.fileHandleForWriting.write(Data(body.utf8)) }
    try input.fileHandleForWriting.close()
    let data = output.fileHandleForReading.readDataToEndOfFile()
    let errorText = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    process.waitUntilExit()
    guard process.terminationStatus == 0 else {
        throw TestFailure("curl \(method) \(url) failed (exit \(process.terminationStatus)): \(errorText)")
    }
    let text = String(decoding: data, as: UTF8.self)
    guard let markerRange = text.range(of: marker, options: .backwards) else { throw TestFailure("curl printed no status: \(text)") }
    let meta = text[markerRange.upperBound...].split(separator: " ")
    var rest = String(text[..<markerRange.lowerBound])
    // Skip interim 1xx blocks (100 Continue), then split the final head from the body.
    var head = ""
    var interim: [Int] = []

    while true {
        guard let end = rest.range(of: "\r\n\r\n") else {
            head = rest
            rest = ""
            break
        }
        head = String(rest[..<end.lowerBound])
        rest = String(rest[end.upperBound...])
        let statusLine = head.split(separator: "\r\n").first ?? ""
        let code = statusLine.split(separator: " ").dropFirst().first.flatMap { Int($0) } ?? 0
        if code >= 200 || code == 0 { break }
        interim.append(code)
    }
    var parsedHeaders: [String: String] = [:]
    for line in head.split(separator: "\r\n").dropFirst() {
        guard let colon = line.firstIndex(of: ":") else { continue }
        parsedHeaders[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
    }
    return CurlResult(status: Int(meta[0]) ?? 0, version: String(meta[1]), headers: parsedHeaders, body: rest,
                      seconds: Double(meta[2]) ?? 0, interim: interim)
}

/// An emulator on a free port, stopped by the caller.
public func startEmulator(_ configure: (inout EmulatorConfiguration) -> Void = { _ in }) throws -> EmulatorServer {
    var configuration = EmulatorConfiguration(port: 0, threads: 2)
    configure(&configuration)
    let emulator = EmulatorServer(configuration: configuration)
    try emulator.start()
    return emulator
}

/// A service account the emulator issued, with its private key for signing test JWTs.
public struct TestAccount {
    public var projectID: String
    public var email: String
    public var key: RSAPrivateKey
    public var tokenURI: String
    /// The authority `exchange` trusts for an https token_uri (TestTLS's, for an emulator that
    /// serves TLS with it).
    public var caFile: String?

    public init(_ emulator: EmulatorServer, projectID: String = "herald-test") throws {
        try self.init(json: try emulator.serviceAccountJSON(projectID: projectID))
        caFile = try TestTLS.caFile(for: emulator)
    }

    /// The account of a service-account JSON the emulator wrote (a file of
    /// `--write-service-accounts`, say).
    public init(json: String) throws {
        let document = try JSONValue.parse(json)
        guard let projectID = document["project_id"]?.stringValue, let email = document["client_email"]?.stringValue,
              let pem = document["private_key"]?.stringValue, let tokenURI = document["token_uri"]?.stringValue else {
            throw TestFailure("the emulator's service account lacks project_id, client_email, private_key or token_uri")
        }
        self.projectID = projectID
        self.email = email
        key = try RSAPrivateKey(pem: pem)
        self.tokenURI = tokenURI
    }

    /// A signed grant assertion; every claim can be bent to test a rejection.
    public func assertion(scope: String = "https://www.googleapis.com/auth/firebase.messaging",
                   audience: String? = nil, issuedAt: Double? = nil, lifetime: Double = 3600,
                   issuer: String? = nil, signingKey: RSAPrivateKey? = nil) throws -> String {
        let now = issuedAt ?? Date().timeIntervalSince1970
        let claims: JSONValue = [
            "iss": .string(issuer ?? email),
            "scope": .string(scope),
            "aud": .string(audience ?? tokenURI),
            "iat": JSONValue(Int(now)),
            "exp": JSONValue(Int(now + lifetime)),
        ]
        return try JWT.signRS256(claims: claims, key: signingKey ?? key)
    }

    /// Exchanges an assertion at the emulator's /token (over HTTP/1.1, with TLS when the
    /// token_uri is https and `caFile` is known, unless `protocolChoice` says otherwise).
    public func exchange(_ assertion: String, over protocolChoice: CurlProtocol? = nil) throws -> CurlResult {
        try curl(tokenURI, method: "POST", headers: ["content-type": "application/x-www-form-urlencoded"],
                 body: "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=\(assertion)",
                 over: protocolChoice ?? caFile.map { .tlsHTTP1(caFile: $0) } ?? .http1)
    }

    /// A fresh access token.
    public func accessToken() throws -> String {
        let answer = try exchange(try assertion())
        guard answer.status == 200, let token = answer.json?["access_token"]?.stringValue else {
            throw TestFailure("the token exchange failed: \(answer.status) \(answer.body)")
        }
        return token
    }
}

/// Sends one message body through the v1 endpoint.
public func sendMessage(_ emulator: EmulatorServer, project: String, accessToken: String?, body: String,
                 over protocolChoice: CurlProtocol = .h2c) throws -> CurlResult {
    var headers = ["content-type": "application/json"]
    if let accessToken { headers["authorization"] = "Bearer \(accessToken)" }
    return try curl(emulator.sendURL(projectID: project), method: "POST", headers: headers, body: body, over: protocolChoice)
}

/// `{"message":{"token":T,"data":{...}}}`.
public func tokenMessage(_ token: String, data: [String: String] = ["k": "v"]) -> String {
    var object = JSONObject()
    for (key, value) in data.sorted(by: { $0.key < $1.key }) { object[key] = .string(value) }
    return JSONValue.object(JSONObject(["message": .object(JSONObject(["token": .string(token), "data": .object(object)]))])).serialized
}

/// Blocks until the wall clock has passed `instant` (for token expiry, which is a matter of time).
public func waitForClock(toPass instant: Date) {
    while Date() <= instant { Thread.sleep(forTimeInterval: 0.05) }
}

/// A self-signed certificate for 127.0.0.1, made with the openssl CLI.
public func makeCertificate() throws -> (certificate: String, key: String, directory: String) {
    let directory = NSTemporaryDirectory() + "herald-tls-\(UUID().uuidString)"
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    let certificate = directory + "/cert.pem"
    let key = directory + "/key.pem"
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
    process.arguments = ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", certificate,
                         "-subj", "/CN=localhost", "-days", "1", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"]
    process.standardOutput = FileHandle.nullDevice
    process.standardError = FileHandle.nullDevice
    try process.run()
    process.waitUntilExit()
    guard process.terminationStatus == 0 else { throw TestFailure("openssl req failed with \(process.terminationStatus)") }
    return (certificate, key, directory)
}

/// Runs h2load (nghttp2-client) with a bounded request count; returns its output.
public func h2load(_ arguments: [String]) throws -> String {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/h2load")
    process.arguments = arguments
    let output = Pipe()
    process.standardOutput = output
    process.standardError = output
    try process.run()
    let data = output.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    let text = String(decoding: data, as: UTF8.self)
    guard process.terminationStatus == 0 else { throw TestFailure("h2load failed: \(text)") }
    return text
}

/// The "requests: N total, N started, N done, N succeeded, F failed" numbers of h2load.
public func h2loadCounts(_ output: String) -> (succeeded: Int, failed: Int)? {
    guard let line = output.split(separator: "\n").first(where: { $0.hasPrefix("requests:") }) else { return nil }
    let words = line.split(separator: " ")
    func number(before label: String) -> Int? {
        guard let index = words.firstIndex(where: { $0.hasPrefix(label) }), index > 0 else { return nil }
        return Int(words[index - 1])
    }
    guard let succeeded = number(before: "succeeded"), let failed = number(before: "failed") else { return nil }
    return (succeeded, failed)
}
