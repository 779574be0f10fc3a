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

@Suite struct FCMMessageTests {
    static let seeds = (try? FCMFixtures.seeds()) ?? []

    @Test func everySeedExampleIsPresent() {
        // 2 device-group sends, 5 per-platform examples, 3 Live Activity messages.
        #expect(Self.seeds.count == 10)
    }

    @Test(arguments: seeds)
    func seedExampleParsesValidatesAndRoundTrips(_ seed: FCMFixtures.Seed) throws {
        let text = seed.message.serialized
        let message = try Message(text: text)
        #expect(message.validate() == [])
        #expect(message.json == seed.message)
        #expect(message.json.serialized == text)
        #expect(try JSONValue.parse(message.json.serialized) == seed.message)
        #expect(message.target != nil)
    }

    @Test func typedAccessorsReadTheSeedMessages() throws {
        let perPlatform = try #require(Self.seeds.first { $0.source.contains("platform-specific delivery") })
        let message = try Message(json: perPlatform.message)
        #expect(message.target == .token("bk3RNwTe3H0:CI2k_HHwgIpoDKCIZvvDMExUdFQ3P1..."))
        #expect(message.notification?.title == "Match update")
        #expect(message.android?.ttl == "86400s")
        #expect(message.android?.ttlSeconds == 86_400)
        #expect(message.android?.notification?.clickAction == "OPEN_ACTIVITY_1")
        #expect(message.apns?.headers?["apns-priority"] == "5")
        #expect(message.apns?.payload?.aps?.category == "NEW_MESSAGE_CATEGORY")
        #expect(message.webpush?.headers?["TTL"] == "86400")

        let colors = try #require(Self.seeds.first { $0.source.contains("Python") })
        let stock = try Message(json: colors.message)
        #expect(stock.target == .topic("industry-tech"))
        #expect(stock.android?.priority == .normal)
        #expect(stock.android?.notification?.color == "#f45342")
        #expect(stock.apns?.payload?.aps?.badge == 42)

        let start = try #require(Self.seeds.first { $0.source.contains("start a Live Activity") })
        let live = try Message(json: start.message)
        #expect(live.apns?.liveActivityToken == "LIVE_ACTIVITY_PUSH_TO_START_TOKEN")
        let aps = try #require(live.apns?.payload?.aps)
        #expect(aps.event == .start)
        #expect(aps.timestamp == 1_700_000_000)
        #expect(aps.attributesType == "DemoAttributes")
        #expect(aps.contentState?["demo"] == 1)
        #expect(aps.alert?["title"] == "test title")

        let group = try #require(Self.seeds.first)
        let groupMessage = try Message(json: group.message)
        #expect(groupMessage.data?["hello"] == "This is a Firebase Cloud Messaging device group message!")
    }

    @Test func writesGoThroughAndKeepUnknownFields() throws {
        var message = try Message(text: #"""
            {"token":"old","future":{"x":[1,2.50]},"apns":{"payload":{"aps":{"alert":"hi"},"custom":{"k":"v"}},"x-apns":1}}
            """#)
        message.target = .topic("news")
        message.android = AndroidConfig()
        message.android?.ttlSeconds = 3600
        message.android?.priority = .high
        message.android?.notification = AndroidNotification()
        message.android?.notification?.color = "#112233"
        message.apns?.payload?.aps?.mutableContent = 1
        message.apns?.fcmOptions = APNSFCMOptions(image: "https://example.com/a.png")
        message.data = StringMap([("k", "v")])
        message.data?["k2"] = "v2"

        let expected = try JSONValue.parse(#"""
            {"topic":"news","future":{"x":[1,2.50]},
             "apns":{"payload":{"aps":{"alert":"hi","mutable-content":1},"custom":{"k":"v"}},"x-apns":1,
                     "fcm_options":{"image":"https://example.com/a.png"}},
             "android":{"ttl":"3600s","priority":"HIGH","notification":{"color":"#112233"}},
             "data":{"k":"v","k2":"v2"}}
            """#)
        #expect(message.json == expected)
        // Number literals survive untouched.
        #expect(message.json.serialized.contains("2.50"))
        // Kept, and still reported: FCM refuses members it does not know.
        #expect(message.validate().map(\.field) == ["message.future", "message.apns.x-apns"])
        // Removing a member through a typed property.
        message.apns?.payload?.aps?.mutableContent = nil
        #expect(message.apns?.payload?.aps?.object["mutable-content"] == nil)
        #expect(message.apns?.payload?["custom"] == ["k": "v"])
    }

    @Test func settingTheTargetLeavesExactlyOne() throws {
        var message = try Message(text: #"{"token":"a","topic":"b","condition":"'c' in topics"}"#)
        #expect(message.target == .token("a"))
        message.target = .fid("installation-1")
        #expect(message.object.keys == ["fid"])
        #expect(message.target == .fid("installation-1"))
        message.target = nil
        #expect(message.target == nil)
        #expect(Target(field: "condition", value: "x") == .condition("x"))
        #expect(Target(field: "registration_ids", value: "x") == nil)
    }

    @Test func builderForHeraldSend() throws {
        let message = Message(target: .token("tok"), title: "Hello", body: "World", data: [("a", "1"), ("b", "2")])
        #expect(message.json == ["token": "tok", "notification": ["title": "Hello", "body": "World"], "data": ["a": "1", "b": "2"]])
        #expect(message.data.map { Array($0).map(\.key) } == ["a", "b"])
        #expect(message.validate() == [])
        let dataOnly = Message(target: .topic("news"), data: [("k", "v")])
        #expect(dataOnly.notification == nil)
        #expect(dataOnly.json == ["topic": "news", "data": ["k": "v"]])
    }

    @Test func requestBodyWrapsTheMessage() throws {
        let message = Message(target: .token("t"), title: "x")
        let body = try JSONValue.parse(message.requestBody())
        #expect(body == ["message": ["token": "t", "notification": ["title": "x"]]])
        let dry = try JSONValue.parse(message.requestBody(validateOnly: true))
        #expect(dry["validate_only"] == true)
    }

    @Test func refusesWhatIsNotAMessageObject() {
        #expect(throws: MessageError.self) { try Message(text: "[1,2]") }
        #expect(throws: MessageError.self) { try Message(text: "{not json") }
        do {
            _ = try Message(text: "\"token\"")
        } catch {
            #expect(error.description.contains("JSON object"))
        }
    }

    @Test(arguments: [(3600.0, "3600s"), (0.5, "0.5s"), (1.000000001, "1.000000001s"), (0, "0s"), (-3, "0s"), (2.25, "2.25s")])
    func durationStrings(_ seconds: Double, _ text: String) {
        #expect(AndroidConfig.durationString(seconds: seconds) == text)
    }
}
