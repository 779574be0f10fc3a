import Emulator
import FCM
import Foundation
import JSON
import Postgres
import Testing
import TestSupport

/// FCM's own examples end to end: every message of Tests/Fixtures/FCM/seed-messages.json enqueued
/// from SQL reaches the emulator as the same JSON; every invalid case is dead-lettered with its own reason and costs no request; device
/// groups from the CLI and from SQL; `herald send`.
@Suite(.serialized) struct MessageEndToEndTests {
    static let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fixtures/FCM")

    static func fixture(_ name: String) throws -> JSONValue {
        try JSONValue.parse(String(contentsOf: fixtures.appendingPathComponent(name), encoding: .utf8))
    }

    @Test func everySeedMessageReachesTheEmulatorAsTheSameJSON() throws {
        let stack = try WorkerStack()
        defer { stack.close() }
        let seeds = try #require(try Self.fixture("seed-messages.json")["messages"]?.arrayValue)
        #expect(seeds.count >= 10)
        var ids: [(Int, JSONValue, String)] = []
        for seed in seeds {
            let message = try #require(seed["message"])
            let id = try stack.connection.query("SELECT herald.enqueue($1::jsonb)", [.text(message.serialized)]).int(0, 0)!
            // The same rules in SQL agree before anything is sent.
            #expect(try stack.connection.query("SELECT cardinality(herald.validate_message($1::jsonb))", [.text(message.serialized)]).int(0, 0) == 0)
            ids.append((id, message, seed["source"]?.stringValue ?? "?"))
        }
        let run = try stack.work(["--drain", "--processes", "1", "--poll-interval", "0.2"])
        #expect(run.status == 0, "\(run.output)")
        let delivered = Dictionary(stack.emulator.deliveredMessages().map { ($0.name, $0) }, uniquingKeysWith: { a, _ in a })
        for (id, message, source) in ids {
            let row = try stack.connection.query("SELECT state, fcm_message_name FROM herald.jobs WHERE id = $1", [.int(id)])
            #expect(row[0, 0] == "completed", "\(source)")
            let received = try #require(delivered[row[0, 1] ?? ""], "\(source) reached the emulator")
            let body = try JSONValue.parse(received.body)
            #expect(body["message"] == message, "\(source): the emulator received the same message")
        }
    }

    @Test func everyInvalidCaseIsDeadLetteredWithItsOwnReasonAndNoRequest() throws {
        let stack = try WorkerStack()
        defer { stack.close() }
        let cases = try #require(try Self.fixture("validation-cases.json")["invalid"]?.arrayValue)
        var enqueued: [(id: Int, name: String, field: String)] = []
        for item in cases {
            let text = item["text"]?.stringValue ?? item["message"]!.serialized
            let id = try stack.connection.query("SELECT herald.enqueue($1::jsonb)", [.text(text)]).int(0, 0)!
            let field = item["issues"]?.arrayValue?.first?.arrayValue?.first?.stringValue ?? "message"
            enqueued.append((id, item["name"]?.stringValue ?? "?", field))
        }
        #expect(enqueued.count >= 30)
        let run = try stack.work(["--drain", "--processes", "1", "--poll-interval", "0.2"])
        #expect(run.status == 0, "\(run.output)")
        var reasons: [String: [String]] = [:]
        for (id, name, field) in enqueued {
            let row = try stack.connection.query("SELECT reason, message::text FROM herald.dead_letters WHERE job_id = $1", [.int(id)])
            guard row.rowCount == 1, let reason = row[0, 0] else {
                Issue.record("\(name): not dead-lettered")
                continue
            }
            // The reason is the validator's, for the message as PostgreSQL stored it.
            let expected = MessageValidator.validate(try JSONValue.parse(row[0, 1]!)).map(\.description).joined(separator: "; ")
            #expect(reason == expected, "\(name)")
            #expect(reason.contains(field), "\(name): the reason names \(field)")
            reasons[reason, default: []].append(name)
        }
        // Each case has its own reason; only the topic and the condition form of one limit read alike.
        let shared = reasons.values.filter { $0.count > 1 && !$0.allSatisfy { $0.contains("payload over 2048 bytes") } }
        #expect(shared.isEmpty, "cases with the same reason: \(shared)")
        #expect(reasons.count >= enqueued.count - 1)
        #expect(stack.emulator.statistics["requests"]?.intValue == 0, "no request was spent on an invalid message")
        #expect(try stack.count("SELECT count(*) FROM herald.jobs") == 0)
    }

    @Test func deviceGroupsFromTheCommandLine() throws {
        let stack = try WorkerStack()
        defer { stack.close() }
        func groups(_ arguments: [String]) throws -> (status: Int32?, output: String) {
            try HeraldProcess.run(["groups"] + arguments, environment: stack.environment, timeout: 60)
        }
        let created = try groups(["create", "--name", "family", "--token", "phone-1", "--token", "tablet-1"])
        #expect(created.status == 0, "\(created.output)")
        let json = try JSONValue.parse(try #require(created.output.split(separator: "\n").last.map(String.init)))
        let key = try #require(json["notification_key"]?.stringValue)
        #expect(json["members"] == ["phone-1", "tablet-1"])
        let row = try stack.connection.query("SELECT notification_key, array_to_string(members, ',') FROM herald.device_groups WHERE name = 'family'")
        #expect(row[0, 0] == key && row[0, 1] == "phone-1,tablet-1")

        // The 20-member limit is enforced before FCM is called.
        let before = stack.emulator.statistics["device_group_requests"]?.intValue
        let tooMany = try groups(["add", "--name", "family"] + (1...19).flatMap { ["--token", "extra-\($0)"] })
        #expect(tooMany.status == 2)
        #expect(tooMany.output.contains("limit of 20"))
        #expect(stack.emulator.statistics["device_group_requests"]?.intValue == before)

        let got = try groups(["get", "--name", "family"])
        #expect(got.status == 0 && got.output.contains("notification_key"))

        // Sending to the group: its notification_key as the token.
        _ = try stack.connection.query("SELECT herald.enqueue(jsonb_build_object('token', notification_key, 'data', jsonb_build_object('hello', 'group'))) FROM herald.device_groups WHERE name = 'family'")
        let run = try stack.work(["--drain", "--processes", "1", "--poll-interval", "0.2"])
        #expect(run.status == 0, "\(run.output)")
        #expect(stack.emulator.deliveredMessages(token: "phone-1").count == 1)
        #expect(stack.emulator.deliveredMessages(token: "tablet-1").count == 1)

        let removed = try groups(["remove", "--name", "family", "--token", "phone-1", "--token", "tablet-1"])
        #expect(removed.status == 0, "\(removed.output)")
        #expect(try stack.count("SELECT count(*) FROM herald.device_groups WHERE name = 'family'") == 0, "removing every member deletes the group")
        let gone = try groups(["get", "--name", "family"])
        #expect(gone.status == 1 && gone.output.contains("no device group named family"))
    }

    @Test func deviceGroupOperationsFromSQLRunInTheWorker() throws {
        let stack = try WorkerStack()
        defer { stack.close() }
        let c = stack.connection
        let tokens = (1...20).map { "member-\($0)" }
        let create = try c.query("SELECT herald.enqueue_group_op('create', 'team', $1::text[])", [.text("{" + tokens.joined(separator: ",") + "}")]).int(0, 0)!
        var run = try stack.work(["--drain", "--processes", "1", "--poll-interval", "0.2"])
        #expect(run.status == 0, "\(run.output)")
        #expect(try c.query("SELECT state FROM herald.jobs WHERE id = $1", [.int(create)])[0, 0] == "completed")
        #expect(try stack.count("SELECT cardinality(members) FROM herald.device_groups WHERE name = 'team'") == 20)
        let requests = stack.emulator.statistics["device_group_requests"]?.intValue
        let over = try c.query("SELECT herald.enqueue_group_op('add', 'team', ARRAY['member-21'])").int(0, 0)!
        let unknown = try c.query("SELECT herald.enqueue_group_op('remove', 'nobody', ARRAY['x'])").int(0, 0)!
        run = try stack.work(["--drain", "--processes", "1", "--poll-interval", "0.2"])
        #expect(run.status == 0, "\(run.output)")
        #expect(try c.query("SELECT reason FROM herald.dead_letters WHERE job_id = $1", [.int(over)])[0, 0]?.contains("limit of 20") == true)
        #expect(try c.query("SELECT reason FROM herald.dead_letters WHERE job_id = $1", [.int(unknown)])[0, 0]?.contains("create it first") == true)
        #expect(stack.emulator.statistics["device_group_requests"]?.intValue == requests, "refused before FCM was called")
        _ = try c.query("SELECT herald.enqueue_group_op('remove', 'team', $1::text[])", [.text("{" + tokens.joined(separator: ",") + "}")])
        run = try stack.work(["--drain", "--processes", "1", "--poll-interval", "0.2"])
        #expect(run.status == 0, "\(run.output)")
        #expect(try stack.count("SELECT count(*) FROM herald.device_groups") == 0)
    }

    @Test func heraldSendPrintsTheNameOrTheClassifiedError() throws {
        let stack = try WorkerStack()
        defer { stack.close() }
        func send(_ arguments: [String]) throws -> (status: Int32?, output: String) {
            try HeraldProcess.run(["send"] + arguments, environment: stack.environment, timeout: 60)
        }
        let ok = try send(["--token", "my-phone", "--title", "Hello", "--body", "From Herald", "--data", "order=42"])
        #expect(ok.status == 0, "\(ok.output)")
        #expect(ok.output.contains("projects/e2e-project/messages/"))
        let received = try #require(stack.emulator.deliveredMessages(token: "my-phone").first)
        let message = try JSONValue.parse(received.body)["message"]
        #expect(message?["notification"]?["title"]?.stringValue == "Hello")
        #expect(message?["data"]?["order"]?.stringValue == "42")

        let gone = try send(["--token", "fail-unregistered-9", "--title", "x"])
        #expect(gone.status == 1 && gone.output.contains("UNREGISTERED") && gone.output.contains("remove it"))

        let file = NSTemporaryDirectory() + "herald-msg-\(UUID().uuidString).json"
        try #"{"message": {"topic": "news", "android": {"ttl": "abc"}}}"#.write(toFile: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: file) }
        let requests = stack.emulator.statistics["requests"]?.intValue
        let invalid = try send(["--message", file])
        #expect(invalid.status == 1 && invalid.output.contains(#"message.android.ttl: "abc" is not a duration"#))
        #expect(stack.emulator.statistics["requests"]?.intValue == requests, "nothing was sent")

        let both = try send(["--token", "a", "--topic", "b"])
        #expect(both.status == 2 && both.output.contains("--token and --topic"))
    }
}
