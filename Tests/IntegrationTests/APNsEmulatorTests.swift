import APNs
import Crypto
import Emulator
import Foundation
import HTTPClient
import JSON
import Testing
import TestSupport

/// The emulator's APNs side reached over real HTTP/2 through Herald's own HTTP client, with
/// provider tokens and requests made by the APNs module.
@Suite struct APNsEmulatorTests {
    static let deviceToken = String(repeating: "0123456789abcdef", count: 4)

    /// An emulator with one APNs key written to a private folder, and that key read back from its file.
    struct Stand {
        let emulator: EmulatorServer
        let folder: String
        let keyID: String
        let teamID: String
        let key: P256PrivateKey
        let client: HTTPClient

        init() throws {
            emulator = try startEmulator()
            folder = NSTemporaryDirectory() + "herald-apns-\(UUID().uuidString)"
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            let written = try emulator.writeAPNsKey(folder: folder)
            keyID = written.keyID
            teamID = written.teamID
            key = try P256PrivateKey(pem: try String(contentsOfFile: written.path, encoding: .utf8))
            client = try HTTPClient()
        }

        func stop() {
            emulator.stop()
            try? FileManager.default.removeItem(atPath: folder)
        }

        /// A provider token of this key with `iat` `age` seconds ago.
        func providerToken(age: Double = 0, keyID: String? = nil, teamID: String? = nil, key: P256PrivateKey? = nil) throws -> String {
            let claims: JSONValue = ["iss": .string(teamID ?? self.teamID), "iat": .number(String(Int64(Date().timeIntervalSince1970 - age)))]
            return try JWT.signES256(claims: claims, keyID: keyID ?? self.keyID, key: key ?? self.key)
        }

        func post(token: String = APNsEmulatorTests.deviceToken, headers: [String], body: [UInt8], providerToken: String?,
                  client: HTTPClient? = nil, method: String = "POST", path: String? = nil) throws -> HTTPResponse {
            var lines = headers
            if let providerToken { lines.insert("authorization: bearer " + providerToken, at: 0) }
            let url = path.map { emulator.baseURL + $0 } ?? emulator.apnsURL(deviceToken: token)
            return try (client ?? self.client).perform(HTTPRequest(method: method, url: url, headers: lines, body: body))
        }

        func send(_ request: APNsRequest, providerToken: String, client: HTTPClient? = nil) throws -> HTTPResponse {
            try (client ?? self.client).perform(HTTPRequest(url: emulator.apnsURL(deviceToken: request.deviceToken),
                                                            headers: request.headerLines(providerToken: providerToken), body: request.body))
        }
    }

    static func reason(_ response: HTTPResponse) -> String? {
        (try? JSONValue.parse(response.body))?["reason"]?.stringValue
    }

    static func message(_ headers: JSONValue, payload: JSONValue = ["aps": ["alert": ["title": "Hi"]]], token: String = deviceToken) -> JSONValue {
        ["apns_token": .string(token), "apns": ["headers": headers, "payload": payload]]
    }

    @Test func acceptsASignedRequestMadeFromAMessageAndRecordsIt() throws {
        let stand = try Stand()
        defer { stand.stop() }
        // The key file is where Apple would put it, private to its owner.
        let file = stand.folder + "/AuthKey_\(stand.keyID).p8"
        let mode = try #require(try FileManager.default.attributesOfItem(atPath: file)[.posixPermissions] as? Int)
        #expect(mode == 0o600)
        #expect(stand.keyID.count == 10)

        let tokens = APNsProviderToken(teamID: stand.teamID, keyID: stand.keyID, key: stand.key, clock: { Date().timeIntervalSince1970 })
        let payload: JSONValue = ["aps": ["alert": ["title": "Hi"]], "order": 42]
        let alert = try APNsRequest(message: Self.message(["apns-push-type": "alert"], payload: payload), bundleID: "com.example.shop",
                                    jobID: 41, ttlSeconds: 3600, now: Int64(Date().timeIntervalSince1970))
        let answer = try stand.send(alert, providerToken: try tokens.current())
        #expect(answer.status == 200, "\(String(decoding: answer.body, as: UTF8.self))")
        #expect(answer.header("apns-id") == alert.apnsID)
        #expect(APNsAnswer.action(answer) == .delivered(apnsID: alert.apnsID))

        // A Live Activity update and a background push, each with its topic and priority.
        let live = try APNsRequest(message: Self.message(["apns-push-type": "liveactivity"],
                                                         payload: ["aps": ["event": "update", "timestamp": 1_800_000_000, "content-state": ["eta": 5]]]),
                                   bundleID: "com.example.shop", jobID: 42, ttlSeconds: nil, now: 0)
        let background = try APNsRequest(message: Self.message(["apns-push-type": "background"], payload: ["aps": ["content-available": 1]]),
                                         bundleID: "com.example.shop", jobID: 43, ttlSeconds: nil, now: 0)
        for request in [live, background] {
            let answer = try stand.send(request, providerToken: try tokens.current())
            #expect(answer.status == 200, "\(request.pushType): \(String(decoding: answer.body, as: UTF8.self))")
        }

        let deliveries = stand.emulator.apnsDeliveries(deviceToken: Self.deviceToken)
        #expect(deliveries.map(\.pushType) == ["alert", "liveactivity", "background"])
        #expect(deliveries.map(\.topic) == ["com.example.shop", "com.example.shop.push-type.liveactivity", "com.example.shop"])
        #expect(deliveries.map(\.priority) == [10, 10, 5])
        #expect(deliveries.map(\.apnsID) == [alert.apnsID, live.apnsID, background.apnsID])
        #expect(deliveries.allSatisfy { $0.keyID == stand.keyID && $0.teamID == stand.teamID && $0.apnsIDGiven })
        #expect(deliveries[0].payload == payload)
        #expect(deliveries[0].expiration == alert.expiration)
        #expect(!deliveries[0].headers.contains { $0.name == "authorization" })
        // One provider token served all three.
        #expect(stand.emulator.apnsStatistics.providerTokensByKey == [stand.keyID: 1])
        #expect(tokens.tokensMade == 1)
        // The stats document carries the APNs side too.
        #expect(stand.emulator.statistics["apns"]?["delivered"]?.intValue == 3)
    }

    @Test func refusesProviderTokensAsAppleDoes() throws {
        let stand = try Stand()
        defer { stand.stop() }
        let body = Array(#"{"aps":{"alert":"Hi"}}"#.utf8)
        let headers = ["apns-push-type: alert", "apns-topic: com.example.shop"]
        let stranger = try P256PrivateKey.generate()
        let cases: [(String, String?, Int, String)] = [
            ("no token", nil, 403, "MissingProviderToken"),
            ("signed by another key", try stand.providerToken(key: stranger), 403, "InvalidProviderToken"),
            ("unknown key ID", try stand.providerToken(keyID: "NOSUCHKEY1"), 403, "InvalidProviderToken"),
            ("another team", try stand.providerToken(teamID: "OTHERTEAM1"), 403, "InvalidProviderToken"),
            ("not a JWT", "abc.def", 403, "InvalidProviderToken"),
            ("made in the future", try stand.providerToken(age: -600), 403, "InvalidProviderToken"),
            ("older than an hour", try stand.providerToken(age: 3601), 403, "ExpiredProviderToken"),
        ]
        for (name, token, status, reason) in cases {
            let answer = try stand.post(headers: headers, body: body, providerToken: token, client: try HTTPClient())
            #expect(answer.status == status, "\(name)")
            #expect(Self.reason(answer) == reason, "\(name)")
        }
        #expect(APNsAnswer.action(try stand.post(headers: headers, body: body, providerToken: try stand.providerToken(age: 3700))) == .renewProviderToken)
        #expect(stand.emulator.apnsDeliveries().isEmpty)

        // Renewal rate, on one connection: a token made 19 minutes 50 seconds ago is taken; a new
        // one made now is too soon after it; one made 20 minutes after the first (10 seconds
        // ahead of this clock, within the skew allowed) is taken.
        let connection = try HTTPClient()
        let first = try stand.providerToken(age: 1190)
        // One client keeps one connection for these calls (checked at the end).
        #expect(try stand.post(headers: headers, body: body, providerToken: first, client: connection).status == 200)
        let tooSoon = try stand.post(headers: headers, body: body, providerToken: try stand.providerToken(age: 0), client: connection)
        #expect(tooSoon.status == 429)
        #expect(Self.reason(tooSoon) == "TooManyProviderTokenUpdates")
        #expect(APNsAnswer.action(tooSoon) == .holdTokenRenewals(reason: "TooManyProviderTokenUpdates"))
        #expect(try stand.post(headers: headers, body: body, providerToken: first, client: connection).status == 200)
        #expect(try stand.post(headers: headers, body: body, providerToken: try stand.providerToken(age: -10), client: connection).status == 200)
        let connections = stand.emulator.apnsDeliveries().map(\.connection)
        #expect(connections.count == 3 && Set(connections).count == 1, "\(connections)")
        // Another connection starts with whatever token it has.
        #expect(try stand.post(headers: headers, body: body, providerToken: try stand.providerToken(age: 0), client: try HTTPClient()).status == 200)
    }

    static func alertBody(bytes: Int) -> [UInt8] {
        let shell = #"{"aps":{"alert":""}}"#.utf8.count
        return Array(#"{"aps":{"alert":""#.utf8) + [UInt8](repeating: UInt8(ascii: "x"), count: bytes - shell) + Array(#""}}"#.utf8)
    }

    @Test func refusesHeadersPayloadsAndPathsAsAppleDoes() throws {
        let stand = try Stand()
        defer { stand.stop() }
        let token = try stand.providerToken()
        let alert = ["apns-push-type: alert", "apns-topic: com.example.shop"]
        let voip = ["apns-push-type: voip", "apns-topic: com.example.shop.voip"]
        let body = Array(#"{"aps":{"alert":"Hi"}}"#.utf8)
        let cases: [(String, [String], [UInt8], String?, Int, String)] = [
            ("unknown push type", ["apns-push-type: mdm", "apns-topic: com.example.shop"], body, nil, 400, "InvalidPushType"),
            ("no topic", ["apns-push-type: alert"], body, nil, 400, "MissingTopic"),
            ("voip without .voip", ["apns-push-type: voip", "apns-topic: com.example.shop"], body, nil, 400, "BadTopic"),
            ("alert on the voip topic", ["apns-push-type: alert", "apns-topic: com.example.shop.voip"], body, nil, 400, "BadTopic"),
            ("live activity on the bundle ID", ["apns-push-type: liveactivity", "apns-topic: com.example.shop"],
             Array(#"{"aps":{"event":"update","timestamp":1}}"#.utf8), nil, 400, "BadTopic"),
            ("background at 10", ["apns-push-type: background", "apns-topic: com.example.shop", "apns-priority: 10"],
             Array(#"{"aps":{"content-available":1}}"#.utf8), nil, 400, "BadPriority"),
            ("priority 7", alert + ["apns-priority: 7"], body, nil, 400, "BadPriority"),
            ("apns-id not a UUID", alert + ["apns-id: job-7"], body, nil, 400, "BadMessageId"),
            ("expiration not a number", alert + ["apns-expiration: soon"], body, nil, 400, "BadExpirationDate"),
            ("collapse ID over 64 bytes", alert + ["apns-collapse-id: " + String(repeating: "c", count: 65)], body, nil, 400, "BadCollapseId"),
            ("short device token", alert, body, "abcd", 400, "BadDeviceToken"),
            ("device token not hex", alert, body, String(repeating: "zz", count: 32), 400, "BadDeviceToken"),
            ("empty payload", alert, [], nil, 400, "PayloadEmpty"),
            ("alert over 4,096 bytes", alert, Self.alertBody(bytes: 4097), nil, 413, "PayloadTooLarge"),
            ("voip over 5,120 bytes", voip, Self.alertBody(bytes: 5121), nil, 413, "PayloadTooLarge"),
            ("payload without aps", alert, Array(#"{"order":1}"#.utf8), nil, 400, "BadPayload"),
            ("payload not JSON", alert, Array("hello".utf8), nil, 400, "BadPayload"),
            ("live activity without event", ["apns-push-type: liveactivity", "apns-topic: com.example.shop.push-type.liveactivity"],
             Array(#"{"aps":{"timestamp":1800000000}}"#.utf8), nil, 400, "BadPayload"),
            ("live activity without timestamp", ["apns-push-type: liveactivity", "apns-topic: com.example.shop.push-type.liveactivity"],
             Array(#"{"aps":{"event":"update"}}"#.utf8), nil, 400, "BadPayload"),
        ]
        for (name, headers, payload, device, status, reason) in cases {
            let answer = try stand.post(token: device ?? Self.deviceToken, headers: headers, body: payload, providerToken: token)
            #expect(answer.status == status, "\(name): \(String(decoding: answer.body, as: UTF8.self))")
            #expect(Self.reason(answer) == reason, "\(name)")
        }
        #expect(stand.emulator.apnsDeliveries().isEmpty)

        // The limits are limits: exactly at them is delivered.
        #expect(try stand.post(headers: alert, body: Self.alertBody(bytes: 4096), providerToken: token).status == 200)
        #expect(try stand.post(headers: voip, body: Self.alertBody(bytes: 5120), providerToken: token).status == 200)
        #expect(try stand.post(headers: ["apns-push-type: liveactivity", "apns-topic: com.example.shop.push-type.liveactivity"],
                               body: Array(#"{"aps":{"event":"end","timestamp":1800000000}}"#.utf8), providerToken: token).status == 200)
        #expect(stand.emulator.apnsDeliveries().count == 3)

        // Paths and methods.
        let get = try stand.post(headers: alert, body: [], providerToken: token, method: "GET")
        #expect(get.status == 405 && Self.reason(get) == "MethodNotAllowed")
        let badPath = try stand.post(headers: alert, body: body, providerToken: token, path: "/3/devices/" + Self.deviceToken)
        #expect(badPath.status == 404 && Self.reason(badPath) == "BadPath")
        let noToken = try stand.post(headers: alert, body: body, providerToken: token, path: "/3/device/")
        #expect(noToken.status == 400 && Self.reason(noToken) == "MissingDeviceToken")
    }

    @Test func faultTokensAnswerAsAppleWouldAndHeraldReadsThem() throws {
        let stand = try Stand()
        defer { stand.stop() }
        let token = try stand.providerToken()
        let headers = ["apns-push-type: alert", "apns-topic: com.example.shop"]
        let body = Array(#"{"aps":{"alert":"Hi"}}"#.utf8)
        func post(_ prefix: String) throws -> HTTPResponse {
            let device = prefix + String(repeating: "0", count: 64 - prefix.count)
            return try stand.post(token: device, headers: headers, body: body, providerToken: token)
        }
        let before = Int64(Date().timeIntervalSince1970 * 1000)
        let unregistered = try post("fa110410")
        #expect(unregistered.status == 410 && Self.reason(unregistered) == "Unregistered")
        guard case .pruneToken(let reason, let since?) = APNsAnswer.action(unregistered) else {
            Issue.record("410 not read as a prune with a time")
            return
        }
        #expect(reason == "Unregistered")
        #expect(since >= before && since <= Int64(Date().timeIntervalSince1970 * 1000))
        #expect(Self.reason(try post("fa11e410")) == "ExpiredToken")
        let bad = try post("fa110400")
        #expect(bad.status == 400 && Self.reason(bad) == "BadDeviceToken")
        guard case .deadLetter = APNsAnswer.action(bad) else { Issue.record("BadDeviceToken not dead-lettered"); return }

        // K failures, then delivered; 0: never.
        #expect(try [post("fa1104292"), post("fa1104292"), post("fa1104292")].map(\.status) == [429, 429, 200])
        #expect(APNsAnswer.action(try post("fa1104290")) == .deviceBackoff(reason: "TooManyRequests"))
        #expect(try [post("fa1105030"), post("fa1105030"), post("fa1105030")].map(\.status) == [503, 503, 503])
        #expect(try [post("fa1105001"), post("fa1105001")].map(\.status) == [500, 200])
        #expect(stand.emulator.apnsDeliveries().count == 2)
        #expect(stand.emulator.apnsStatistics.byReason["TooManyRequests"] == 3)
    }

    @Test func keysWrittenByOneRunAreTrustedByTheNext() throws {
        let stand = try Stand()
        defer { stand.stop() }
        let later = try startEmulator()
        defer { later.stop() }
        let headers = ["apns-push-type: alert", "apns-topic: com.example.shop"]
        let body = Array(#"{"aps":{"alert":"Hi"}}"#.utf8)
        let url = later.apnsURL(deviceToken: Self.deviceToken)
        let request = HTTPRequest(url: url, headers: ["authorization: bearer " + (try stand.providerToken())] + headers, body: body)
        #expect(try stand.client.perform(request).status == 403)
        #expect(try later.trustAPNsKeys(folder: stand.folder) == [stand.keyID])
        #expect(try stand.client.perform(request).status == 200)
        // The same key ID trusted with another key: a token verified before is checked anew.
        try later.trustAPNsKey(pem: try P256PrivateKey.generate().pemPKCS8, keyID: stand.keyID, teamID: stand.teamID)
        let replaced = try stand.client.perform(request)
        #expect(replaced.status == 403 && Self.reason(replaced) == "InvalidProviderToken")

        let empty = NSTemporaryDirectory() + "herald-apns-empty-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: empty, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: empty) }
        #expect(throws: EmulatorError.self) { try later.trustAPNsKeys(folder: empty) }
    }

    @Test func commandLineTakesTheAPNsFlags() throws {
        let options = try #require(try EmulatorCommand.Options.parse(["--write-apns-key", "/tmp/keys", "--apns-keys", "/tmp/old", "--apns-team-id", "ABCDE12345"]))
        #expect(options.writeAPNsKeyFolder == "/tmp/keys")
        #expect(options.apnsKeyFolder == "/tmp/old")
        #expect(options.configuration.apnsTeamID == "ABCDE12345")
        do {
            _ = try EmulatorCommand.Options.parse(["--apns-team-id", "team one"])
            Issue.record("a team ID with a space was taken")
        } catch {
            #expect(error.description.contains("--apns-team-id"))
        }
    }

    /// The stand-in knows each key's app: a topic of another bundle ID is answered 400
    /// TopicDisallowed (which pauses an app: every job of it would meet it), and fault tokens
    /// give the two topic errors on demand. A key the emulator wrote says its key ID, team ID and
    /// topic above the PEM block, so a later emulator (another --apns-topic, even) checks against
    /// what the key was issued for. What it accepted is readable over HTTP.
    @Test func aTopicOfAnotherAppIsRefusedAndTheTopicErrorsHaveFaultTokens() throws {
        let stand = try Stand()
        defer { stand.stop() }
        let token = try stand.providerToken()
        let body = Array(#"{"aps":{"alert":"Hi"}}"#.utf8)
        let other = try stand.post(headers: ["apns-push-type: alert", "apns-topic: com.example.news"], body: body, providerToken: token)
        #expect(other.status == 400 && Self.reason(other) == "TopicDisallowed")
        let action = APNsAnswer.action(other)
        #expect(action == .pauseApp(reason: "TopicDisallowed: APNs does not allow this app's key to push to its topic"))
        if case .pauseApp(let reason) = action { #expect(APNsAnswer.pauseCause(reason: reason) == "apns_topic") }
        let activity = Array(#"{"aps":{"event":"update","timestamp":1700000000,"content-state":{}}}"#.utf8)
        let otherActivity = try stand.post(headers: ["apns-push-type: liveactivity", "apns-topic: com.example.news.push-type.liveactivity"],
                                           body: activity, providerToken: token)
        #expect(otherActivity.status == 400 && Self.reason(otherActivity) == "TopicDisallowed")
        let ownActivity = try stand.post(headers: ["apns-push-type: liveactivity", "apns-topic: com.example.shop.push-type.liveactivity"],
                                         body: activity, providerToken: token)
        #expect(ownActivity.status == 200, "the key's own app, with its push type's suffix")

        let notForTopic = try stand.post(token: "fa11d400" + String(repeating: "0", count: 56), headers: ["apns-push-type: alert", "apns-topic: com.example.shop"],
                                         body: body, providerToken: token)
        #expect(notForTopic.status == 400 && Self.reason(notForTopic) == "DeviceTokenNotForTopic")
        if case .deadLetter(let reason) = APNsAnswer.action(notForTopic) { #expect(reason.hasPrefix("DeviceTokenNotForTopic")) } else { Issue.record("not a dead letter") }
        let disallowed = try stand.post(token: "fa11b400" + String(repeating: "0", count: 56), headers: ["apns-push-type: alert", "apns-topic: com.example.shop"],
                                        body: body, providerToken: token)
        #expect(disallowed.status == 400 && Self.reason(disallowed) == "TopicDisallowed")

        // The key file says what it was issued for, and a PEM reader still reads the key.
        let pem = try String(contentsOfFile: stand.folder + "/AuthKey_\(stand.keyID).p8", encoding: .utf8)
        #expect(APNsKeyIssue(pem: pem) == APNsKeyIssue(keyID: stand.keyID, teamID: stand.teamID, topic: "com.example.shop"))
        #expect(APNsKeyCheck.problem(pem: Array(pem.utf8)) == nil)
        var configuration = EmulatorConfiguration(host: "127.0.0.1", port: 0, threads: 1)
        configuration.apnsTopic = "com.example.news"
        let later = EmulatorServer(configuration: configuration)
        try later.start()
        defer { later.stop() }
        _ = try later.trustAPNsKeys(folder: stand.folder)
        let request = HTTPRequest(url: later.apnsURL(deviceToken: Self.deviceToken),
                                  headers: ["authorization: bearer " + token, "apns-push-type: alert", "apns-topic: com.example.shop"], body: body)
        #expect(try stand.client.perform(request).status == 200, "the file's topic, not the later emulator's")

        // Over HTTP, as FCM's messages are: the APNs route alone, and /emulator/messages by token.
        let listed = try stand.client.perform(HTTPRequest(method: "GET", url: stand.emulator.baseURL + "/emulator/apns/messages?token=" + Self.deviceToken.uppercased()))
        let document = try JSONValue.parse(listed.body)
        #expect(listed.status == 200 && document["count"]?.intValue == 1, "\(String(decoding: listed.body, as: UTF8.self))")
        #expect(document["messages"]?.arrayValue?.first?["topic"]?.stringValue == "com.example.shop.push-type.liveactivity")
        let mixed = try JSONValue.parse(try stand.client.perform(HTTPRequest(method: "GET", url: stand.emulator.baseURL + "/emulator/messages?token=" + Self.deviceToken)).body)
        #expect(mixed["count"]?.intValue == 1 && mixed["messages"]?.arrayValue?.first?["provider"]?.stringValue == "apns")
    }

    @Test func theEmulatorPrintsTheLineThatRegistersItsKey() throws {
        let options = try #require(try EmulatorCommand.Options.parse(["--write-apns-key", "/tmp/keys", "--apns-topic", "com.example.news"]))
        #expect(options.configuration.apnsTopic == "com.example.news")
        do {
            _ = try EmulatorCommand.Options.parse(["--apns-topic", "com example"])
            Issue.record("a topic with a space was taken")
        } catch {
            #expect(error.description.contains("--apns-topic"))
        }
        let lines = EmulatorCommand.apnsSettings(baseURL: "http://127.0.0.1:8085", keyID: "ABCDE23456", teamID: "HERALDTEAM",
                                                 keyPath: "/tmp/keys/AuthKey_ABCDE23456.p8", topic: "com.example.news")
        #expect(lines.contains("\nherald apns add news-ios --key-file /tmp/keys/AuthKey_ABCDE23456.p8 --key-id ABCDE23456 --team-id HERALDTEAM --topic com.example.news\n"), "\(lines)")
        #expect(lines.contains("export HERALD_APNS_URL=http://127.0.0.1:8085"))
        // Over HTTPS, the curl hint trusts the emulator's authority as the worker does.
        let overTLS = EmulatorCommand.apnsSettings(baseURL: "https://127.0.0.1:8085", keyID: "ABCDE23456", teamID: "HERALDTEAM",
                                                   keyPath: "/tmp/keys/AuthKey_ABCDE23456.p8", topic: "com.example.news", caFile: "/tmp/ca dir/ca.pem")
        #expect(overTLS.contains("curl --cacert '/tmp/ca dir/ca.pem' 'https://127.0.0.1:8085/emulator/apns/messages?token="), "\(overTLS)")
    }
}
