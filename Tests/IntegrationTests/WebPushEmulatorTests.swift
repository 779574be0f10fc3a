import Crypto
import Emulator
import Foundation
import HTTPClient
import JSON
import Testing
import TestSupport
import WebPush

/// The emulator's Web Push side reached over HTTP/2 with TLS through Herald's own HTTP client:
/// a subscription issued over HTTP as a browser's, a push made by the WebPush module (endpoint
/// check, aes128gcm, a cached VAPID header), and what the emulator decrypted read back over HTTP.
@Suite struct WebPushEmulatorTests {
    struct Stand {
        let emulator: EmulatorServer
        let files: (certificate: String, key: String, directory: String)
        let client: HTTPClient

        init() throws {
            let made = try makeCertificate()
            files = made
            emulator = try startEmulator { $0.tls = .init(certificateFile: made.certificate, privateKeyFile: made.key) }
            var configuration = HTTPClientConfiguration()
            configuration.caFile = made.certificate
            client = try HTTPClient(configuration: configuration)
        }

        func stop() {
            emulator.stop()
            try? FileManager.default.removeItem(atPath: files.directory)
        }

        /// `POST /webpush/subscriptions` with `options` as its JSON body.
        func subscribe(_ options: JSONValue? = nil) throws -> JSONValue {
            let response = try client.perform(HTTPRequest(url: emulator.baseURL + "/webpush/subscriptions",
                                                          headers: ["content-type: application/json"],
                                                          body: options.map { Array($0.serialized.utf8) } ?? []))
            guard response.status == 201 else { throw TestFailure("subscribe answered \(response.status): \(String(decoding: response.body, as: UTF8.self))") }
            return try JSONValue.parse(response.body)
        }

        /// A push of `payload` to a subscription as `toJSON()` gives it, made by the WebPush module.
        func push(_ subscription: JSONValue, payload: String, cache: inout VAPIDTokenCache, extraHeaders: [String] = []) throws -> HTTPResponse {
            let endpoint = try EndpointPolicy(allowedHosts: ["127.0.0.1"]).endpoint(subscription["endpoint"]?.stringValue ?? "")
            let keys = try WebPushSubscriptionKeys(p256dh: subscription["keys"]?["p256dh"]?.stringValue ?? "",
                                                   auth: subscription["keys"]?["auth"]?.stringValue ?? "")
            let body = try WebPushEncryption.encrypt(Array(payload.utf8), for: keys)
            let authorization = try cache.authorization(origin: endpoint.origin, now: Int64(Date().timeIntervalSince1970))
            return try client.perform(HTTPRequest(url: endpoint.url, headers: [
                "authorization: " + authorization, "ttl: 3600", "content-encoding: aes128gcm", "content-type: application/octet-stream",
            ] + extraHeaders, body: body))
        }

        func messages(subscriptionID: String) throws -> [JSONValue] {
            let response = try client.perform(HTTPRequest(method: "GET", url: emulator.baseURL + "/emulator/webpush/messages?subscription=" + subscriptionID))
            return try JSONValue.parse(response.body)["messages"]?.arrayValue ?? []
        }
    }

    static func id(of subscription: JSONValue) -> String {
        String(subscription["endpoint"]?.stringValue?.split(separator: "/").last ?? "")
    }

    @Test func aPushMadeByTheWebPushModuleIsDecryptedByTheEmulatorOverHTTP2() throws {
        let stand = try Stand()
        defer { stand.stop() }
        let subscription = try stand.subscribe()
        // The shape of PushSubscription.toJSON().
        #expect(subscription["expirationTime"] == .null)
        let endpointText = try #require(subscription["endpoint"]?.stringValue)
        #expect(endpointText.hasPrefix(stand.emulator.baseURL + "/webpush/push/"))
        // The emulator's endpoint is on loopback: refused unless the host is allowed.
        let refused = #expect(throws: WebPushError.self) { try EndpointPolicy().endpoint(endpointText) }
        #expect(refused?.message.contains("loopback") == true)

        let key = try VAPIDKey.generate()
        var cache = try VAPIDTokenCache(key: key, subject: "mailto:ops@example.com")
        let payload = #"{"notification":{"title":"Order 42 shipped","body":"Ünïcode ✓"}}"#
        let response = try stand.push(subscription, payload: payload, cache: &cache, extraHeaders: ["urgency: high", "topic: order-42"])
        #expect(response.status == 201, "\(String(decoding: response.body, as: UTF8.self))")
        let location = try #require(response.headers.first { $0.name == "location" }?.value)
        #expect(location.hasPrefix(stand.emulator.baseURL + "/webpush/messages/"))
        // A second push to the same service reuses the token.
        #expect(try stand.push(subscription, payload: "second", cache: &cache).status == 201)
        #expect(cache.tokensMade == 1)

        let messages = try stand.messages(subscriptionID: Self.id(of: subscription))
        #expect(messages.count == 2)
        #expect(messages.first?["payload"]?.stringValue == payload)
        #expect(messages.first?["urgency"]?.stringValue == "high")
        #expect(messages.first?["topic"]?.stringValue == "order-42")
        #expect(messages.first?["vapid"]?["k"]?.stringValue == key.publicKeyBase64URL)
        #expect(messages.first?["vapid"]?["aud"]?.stringValue == stand.emulator.baseURL)
        #expect(messages.last?["payload"]?.stringValue == "second")
        #expect(location.hasSuffix(messages.first?["message_id"]?.stringValue ?? "-"))
        // Over HTTP/2 on TLS.
        let server = stand.emulator.serverStatistics
        #expect(server.http2Requests >= 4 && server.tlsConnections >= 1)
        let stats = try JSONValue.parse(try stand.client.perform(HTTPRequest(method: "GET", url: stand.emulator.baseURL + "/emulator/stats")).body)
        #expect(stats["webpush"]?["delivered"] == 2)
        #expect(stats["webpush"]?["subscriptions_issued"] == 1)
    }

    @Test func appleModeAndFaultSubscriptionsAnswerAsTheServicesDo() throws {
        let stand = try Stand()
        defer { stand.stop() }
        let key = try VAPIDKey.generate()
        var cache = try VAPIDTokenCache(key: key, subject: "https://example.com/contact")

        // Apple mode: a push with a subject Apple refuses is 403 BadJwtToken; Herald's cache would
        // not have signed it, so sign one by hand.
        let apple = try stand.subscribe(["mode": "apple", "application_server_key": .string(key.publicKeyBase64URL)])
        let endpoint = try PushEndpoint(apple["endpoint"]?.stringValue ?? "")
        let bad = try VAPID.authorization(audience: endpoint.origin, subject: "mailto:ops@localhost",
                                          expiresAt: Int64(Date().timeIntervalSince1970) + 3600, key: key)
        let refused = try stand.client.perform(HTTPRequest(url: endpoint.url, headers: ["authorization: " + bad, "ttl: 60"]))
        #expect(refused.status == 403)
        #expect(try JSONValue.parse(refused.body) == ["reason": "BadJwtToken"])
        #expect(try stand.push(apple, payload: "to Safari", cache: &cache).status == 201)
        // Bound to its key: another key's push is refused.
        var otherCache = try VAPIDTokenCache(key: try VAPIDKey.generate(), subject: "https://example.com/contact")
        #expect(try stand.push(apple, payload: "wrong key", cache: &otherCache).status == 403)

        let gone = try stand.subscribe(["fault": "410"])
        #expect(try stand.push(gone, payload: "x", cache: &cache).status == 410)
        let busy = try stand.subscribe(["fault": "429", "retry_after": 2, "failures": 1])
        let first = try stand.push(busy, payload: "later", cache: &cache)
        #expect(first.status == 429)
        #expect(first.headers.first { $0.name == "retry-after" }?.value == "2")
        #expect(try stand.push(busy, payload: "later", cache: &cache).status == 201)
        let small = try stand.subscribe(["mode": "constrained"])
        #expect(try stand.push(small, payload: String(repeating: "x", count: 3000), cache: &cache).status == 413)
        #expect(try stand.push(small, payload: String(repeating: "x", count: 2900), cache: &cache).status == 201)

        #expect(try stand.messages(subscriptionID: Self.id(of: apple)).map { $0["payload"]?.stringValue } == ["to Safari"])
        #expect(try stand.messages(subscriptionID: Self.id(of: busy)).count == 1)
        #expect(try stand.messages(subscriptionID: Self.id(of: gone)).isEmpty)
        // A bad option is refused naming it.
        let badOption = try stand.client.perform(HTTPRequest(url: stand.emulator.baseURL + "/webpush/subscriptions", body: Array(#"{"mode":"edge"}"#.utf8)))
        #expect(badOption.status == 400)
        #expect(String(decoding: badOption.body, as: UTF8.self).contains("mode must be"))
    }
}
