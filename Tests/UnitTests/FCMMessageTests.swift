import Foundation
import Testing
@testable import FCM
import JSON

/// The FCM fixtures in Tests/Fixtures/FCM, read from the source tree.
enum FCMFixtures {
    static let directory = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fixtures/FCM")

    static func load(_ name: String) throws -> JSONValue {
        try JSONValue.parse(String(contentsOf: directory.appendingPathComponent(name), encoding: .utf8))
    }

    struct Seed: CustomTestStringConvertible, Sendable {
        var source: String
        var message: JSONValue
        var testDescription: String { source }
    }

    static func seeds() throws -> [Seed] {
        try load("seed-messages.json")["messages"]!.arrayValue!.map {
            Seed(source: $0["source"]!.stringValue!, message: $0["message"]!)
        }
    }
}

/// The seed examples of FCM's documents, as Herald reads them.
@Suite struct FCMMessageTests {
    static let seeds = (try? FCMFixtures.seeds()) ?? []

    @Test func everySeedExampleIsPresent() {
        // 2 device-group sends, 5 per-platform examples, 3 Live Activity messages.
        #expect(Self.seeds.count == 10)
    }

    @Test(arguments: seeds)
    func seedExampleValidatesAndRoundTrips(_ seed: FCMFixtures.Seed) throws {
        let text = seed.message.serialized
        #expect(MessageValidator.validate(seed.message) == [])
        #expect(try JSONValue.parse(text) == seed.message)
        // The request body carries the message unchanged.
        let body = try JSONValue.parse(FCMEndpoint.sendBody(messageJSON: Array(text.utf8), validateOnly: false))
        #expect(body["message"] == seed.message)
    }

    @Test func requestBodyWrapsTheMessage() throws {
        let message = Array(#"{"token":"t","notification":{"title":"x"}}"#.utf8)
        let body = try JSONValue.parse(FCMEndpoint.sendBody(messageJSON: message, validateOnly: false))
        #expect(body == ["message": ["token": "t", "notification": ["title": "x"]]])
        let dry = try JSONValue.parse(FCMEndpoint.sendBody(messageJSON: message, validateOnly: true))
        #expect(dry["validate_only"] == true)
    }
}
