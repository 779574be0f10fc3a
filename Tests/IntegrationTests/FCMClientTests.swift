import Crypto
import Emulator
import FCM
import Foundation
import HTTPClient
import JSON
import Synchronization
import Testing
import TestSupport

/// A clock a test moves by hand.
final class TestClock: Sendable {
    private let offset = Mutex<Double>(0)
    func advance(_ seconds: Double) { offset.withLock { $0 += seconds } }
    var now: Date { Date().addingTimeInterval(offset.withLock { $0 }) }
}

func temporaryFile(_ name: String, contents: String?) throws -> String {
    let directory = NSTemporaryDirectory() + "herald-fcm-\(UUID().uuidString)"
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    let path = directory + "/" + name
    if let contents { try contents.write(toFile: path, atomically: true, encoding: .utf8) }
    return path
}

@Suite struct FCMClientServiceAccountTests {
    static let key = try! RSAPrivateKey.generate(bits: 2048)

    static func document(dropping field: String? = nil, replacing: [String: JSONValue] = [:]) -> String {
        var object = JSONObject()
        let fields: [(String, JSONValue)] = [
            ("type", "service_account"), ("project_id", "demo"), ("private_key", .string(key.pemPKCS8)),
            ("client_email", "sa@demo.iam.gserviceaccount.com"), ("token_uri", "http://127.0.0.1:1/token"),
        ]
        for (name, value) in fields where name != field { object[name] = replacing[name] ?? value }
        return JSONValue.object(object).serialized
    }

    static func failure(_ contents: String?, name: String = "sa.json") throws -> (path: String, error: ServiceAccountError) {
        let path = try temporaryFile(name, contents: contents)
        defer { try? FileManager.default.removeItem(atPath: (path as NSString).deletingLastPathComponent) }
        do {
            _ = try ServiceAccount.load(path: path)
        } catch {
            return (path, error)
        }
        throw TestFailure("\(path) was accepted")
    }

    static let keyBody = key.pemPKCS8.split(separator: "\n").dropFirst().first.map(String.init) ?? "unused"

    @Test func goodFileLoads() throws {
        let path = try temporaryFile("sa.json", contents: Self.document())
        let account = try ServiceAccount.load(path: path)
        #expect(account.projectID == "demo")
        #expect(account.clientEmail == "sa@demo.iam.gserviceaccount.com")
        #expect(account.tokenURI == "http://127.0.0.1:1/token")
    }

    @Test func errorsNameTheFileAndNeverTheKey() throws {
        let missing = try Self.failure(nil)
        #expect(missing.error.description.contains(missing.path))
        #expect(missing.error.description.contains("does not exist"))

        let notJSON = try Self.failure("{\"private_key\": \"\(Self.keyBody)")
        #expect(notJSON.error.description.contains(notJSON.path))
        #expect(notJSON.error.description.contains("not JSON"))

        let noEmail = try Self.failure(Self.document(dropping: "client_email"))
        #expect(noEmail.error.description.contains(noEmail.path))
        #expect(noEmail.error.description.contains("\"client_email\""))

        let badKey = try Self.failure(Self.document(replacing: ["private_key": .string("-----BEGIN PRIVATE KEY-----\n\(Self.keyBody)\n-----END PRIVATE KEY-----\n")]))
        #expect(badKey.error.description.contains(badKey.path))
        #expect(badKey.error.description.contains("not a PEM RSA private key"))

        let wrongType = try Self.failure(Self.document(replacing: ["type": "authorized_user"]))
        #expect(wrongType.error.description.contains("service_account"))

        for error in [missing.error, notJSON.error, noEmail.error, badKey.error, wrongType.error] {
            #expect(!error.description.contains(Self.keyBody))
            #expect(!error.description.contains("BEGIN"))
        }
    }
}

@Suite struct FCMClientTokenTests {
    @Test func tokenIsCachedAndRenewedNearExpiry() throws {
        let emulator = try startEmulator { $0.tokenLifetimeSeconds = 2 }
        defer { emulator.stop() }
        let path = try temporaryFile("sa.json", contents: nil)
        try emulator.writeServiceAccount(to: path, projectID: "herald-test")
        let account = try ServiceAccount.load(path: path)
        let clock = TestClock()
        let provider = AccessTokenProvider(account: account, now: { clock.now })

        let first = try provider.authorizationHeader()
        #expect(first.hasPrefix("Bearer "))
        #expect(try provider.authorizationHeader() == first)
        #expect(provider.renewals == 1)
        #expect(emulator.tokensIssued == 1)

        clock.advance(1.9)  // 0.1 s of a 2 s token left: under 10 % of its lifetime
        let second = try provider.authorizationHeader()
        #expect(second != first)
        #expect(provider.renewals == 2)
        #expect(emulator.tokensIssued == 2)

        provider.invalidate(ifHeader: first)  // a stale 401: keeps the current token
        #expect(try provider.authorizationHeader() == second)
        provider.invalidate(ifHeader: second)
        #expect(try provider.authorizationHeader() != second)
        #expect(provider.renewals == 3)
    }

    /// A thousand projects' first tokens fetched in one second must not all be renewed in one
    /// second: each provider starts its renewal a random share of the window earlier.
    @Test func renewalsOfProvidersFetchedTogetherAreSpreadOverTheirWindow() throws {
        // A 200 s token: renewal in the background from 20 s before it ends (up to 38 s with a
        // spread of 0.9), waiting for it only in the last 15 s. (A short token, so the grant's
        // `iat`, taken from the moved clock, stays within what the token endpoint accepts.)
        let emulator = try startEmulator { $0.tokenLifetimeSeconds = 200 }
        defer { emulator.stop() }
        let path = try temporaryFile("sa.json", contents: nil)
        try emulator.writeServiceAccount(to: path, projectID: "herald-test")
        let account = try ServiceAccount.load(path: path)
        let clock = TestClock()
        let early = AccessTokenProvider(account: account, now: { clock.now }, renewalSpread: 0.9)
        let late = AccessTokenProvider(account: account, now: { clock.now }, renewalSpread: 0)
        _ = try early.authorizationHeader()
        _ = try late.authorizationHeader()
        clock.advance(170)  // 30 s left: inside the early one's window (38 s), not the late one's (20 s)
        _ = try early.authorizationHeader()
        _ = try late.authorizationHeader()
        #expect(waitUntil(timeout: 10) { early.renewals == 2 }, "renewed in the background")
        #expect(late.renewals == 1)
        clock.advance(12)  // 18 s left: now the late one's turn
        _ = try late.authorizationHeader()
        #expect(waitUntil(timeout: 10) { late.renewals == 2 })
        let spreads = (0..<200).map { _ in AccessTokenProvider(account: account).renewalSpread }
        #expect(spreads.allSatisfy { (0..<1).contains($0) } && Set(spreads).count > 150, "drawn for each provider")
    }

    @Test func refusedGrantIsAnAuthErrorWithoutTheAssertion() throws {
        let emulator = try startEmulator()
        defer { emulator.stop() }
        // A key the emulator does not know.
        let account = ServiceAccount(projectID: "p", clientEmail: "nobody@p.iam.gserviceaccount.com", tokenURI: emulator.tokenURI,
                                     privateKey: try RSAPrivateKey.generate(bits: 2048))
        let provider = AccessTokenProvider(account: account)
        do {
            _ = try provider.authorizationHeader()
            Issue.record("an unknown account got a token")
        } catch {
            #expect(error.description.contains("answered 400"), "\(error)")
            #expect(error.description.contains("invalid_grant"))
            #expect(!error.description.contains("eyJ"))  // no JWT
        }
        #expect(provider.renewals == 0)
    }

    @Test func sendWithTheHeaderIsDelivered() throws {
        let emulator = try startEmulator()
        defer { emulator.stop() }
        let account = try ServiceAccount.parse(json: Array(try emulator.serviceAccountJSON(projectID: "herald-test").utf8), path: "(emulator)")
        let provider = AccessTokenProvider(account: account)
        let endpoint = FCMEndpoint(baseURL: emulator.baseURL + "/", projectID: account.projectID)
        #expect(endpoint.sendURL == emulator.sendURL(projectID: "herald-test"))
        let client = try HTTPClient()
        let message = Array(#"{"token":"device-1","data":{"k":"v"}}"#.utf8)
        client.submit(HTTPRequest(url: endpoint.sendURL,
                                  headers: ["Content-Type: application/json", "Authorization: \(try provider.authorizationHeader())"],
                                  body: FCMEndpoint.sendBody(messageJSON: message)), tag: 42)
        let completions = collect(client, count: 1, within: 20)
        try #require(completions.count == 1)
        let response = try completions[0].result.get()
        #expect(response.status == 200)
        let name = try JSONValue.parse(response.body)["name"]?.stringValue
        #expect(name?.hasPrefix("projects/herald-test/messages/") == true)
        #expect(emulator.deliveredMessages(token: "device-1").count == 1)
    }
}

extension FCMClientTokenTests {
    /// Google's service-account access tokens are about 1,000 bytes and ride on every request;
    /// `herald emulator --token-bytes` (and `herald bench --token-bytes`) issue such tokens so
    /// their cost is measured. One must be issued at that length and be accepted on a send.
    @Test func aGoogleSizedAccessTokenIsIssuedAndAccepted() throws {
        let emulator = try startEmulator { $0.tokenBytes = 1024 }
        defer { emulator.stop() }
        let account = try ServiceAccount.parse(json: Array(try emulator.serviceAccountJSON(projectID: "herald-test").utf8), path: "(emulator)")
        let provider = AccessTokenProvider(account: account)
        let header = try provider.authorizationHeader()
        #expect(header.utf8.count == "Bearer ".utf8.count + 1024)
        #expect(header.utf8.dropFirst(7).allSatisfy { $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: "_")
                                                        || (0x30...0x39).contains($0) || (0x41...0x5A).contains($0) || (0x61...0x7A).contains($0) })
        let client = try HTTPClient()
        let endpoint = FCMEndpoint(baseURL: emulator.baseURL + "/", projectID: account.projectID)
        client.submit(HTTPRequest(url: endpoint.sendURL, headers: ["Content-Type: application/json", "Authorization: \(header)"],
                                  body: FCMEndpoint.sendBody(messageJSON: Array(#"{"token":"device-long","data":{"k":"v"}}"#.utf8))), tag: 1)
        let completions = collect(client, count: 1, within: 20)
        try #require(completions.count == 1)
        #expect(try completions[0].result.get().status == 200)
        #expect(emulator.deliveredMessages(token: "device-long").count == 1)
    }
}

@Suite struct FCMClientDeviceGroupTests {
    @Test func createAddGetRemove() throws {
        let emulator = try startEmulator()
        defer { emulator.stop() }
        let account = try ServiceAccount.parse(json: Array(try emulator.serviceAccountJSON(projectID: "herald-test").utf8), path: "(emulator)")
        let groups = DeviceGroupClient(endpoint: FCMEndpoint(baseURL: emulator.baseURL, projectID: account.projectID),
                                       auth: AccessTokenProvider(account: account), client: try HTTPClient())

        #expect(try groups.get(name: "user-1") == nil)
        let key = try groups.create(name: "user-1", tokens: ["a", "b"])
        #expect(key.hasPrefix("APA91b"))
        #expect(try groups.add(name: "user-1", key: key, tokens: ["c"]) == key)
        let looked = try #require(try groups.get(name: "user-1"))
        #expect(!looked.isEmpty)

        // 3 members + 18 more is over the limit of 20; nothing changes.
        do {
            _ = try groups.add(name: "user-1", key: key, tokens: (0..<18).map { "extra-\($0)" })
            Issue.record("a 21st member was accepted")
        } catch {
            #expect(error.httpStatus == 400)
            #expect(error.message.contains("at most 20"), "\(error)")
            if case .deadLetter = error.classification {} else { Issue.record("not dead-lettered: \(String(describing: error.classification))") }
        }
        do {
            _ = try groups.create(name: "user-1", tokens: ["x"])
            Issue.record("a second group of the same name was created")
        } catch {
            #expect(error.message.contains("already exists"), "\(error)")
        }

        #expect(try groups.remove(name: "user-1", key: key, tokens: ["a", "b"]) == key)
        #expect(try groups.get(name: "user-1") != nil)
        _ = try groups.remove(name: "user-1", key: key, tokens: ["c"])
        #expect(try groups.get(name: "user-1") == nil)  // no members left: the group is gone

        let request = try groups.request(.change(.add), name: "n", key: "k", tokens: ["t"])
        #expect(request.method == "POST")
        #expect(request.headers.contains("access_token_auth: true"))
        #expect(request.headers.contains("project_id: herald-test"))
        #expect(throws: DeviceGroupError.self, "add needs the group's notification_key") {
            try groups.request(.change(.add), name: "n", key: nil, tokens: ["t"])
        }
    }
}
