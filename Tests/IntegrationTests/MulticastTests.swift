import Emulator
import FCM
import Foundation
import JSON
import Postgres
import Testing
import TestSupport

/// v1 multicast (herald.enqueue_multicast / herald.multicast_result) and the android_v2 / fid
/// surface, end to end through the real worker and the emulator.
@Suite(.serialized) struct MulticastTests {
    /// 500 tokens, some of them emulator fault tokens: the result, index by index, is what the
    /// emulator answered for that token (read from the emulator's store of delivered messages and
    /// its fault-token rules, not from Herald's counters).
    @Test func aFiveHundredTokenMulticastAnswersPerTokenInOrder() throws {
        let stack = try WorkerStack()
        defer { stack.close() }
        let c = stack.connection
        var tokens: [String] = []
        for i in 0..<500 {
            switch i % 50 {
            case 7: tokens.append("fail-unregistered-mc\(i)")
            case 19: tokens.append("fail-invalid-mc\(i)")
            case 31: tokens.append("fail-mismatch-mc\(i)")
            case 43: tokens.append("fail-internal-1-mc\(i)")  // fails once, then delivered
            default: tokens.append("mc-token-\(i)")
            }
        }
        let message = #"{"notification": {"title": "Flash sale"}, "android_v2": {"ttl": "600s", "collapse_key": "sale"}}"#
        let id = try c.query("SELECT herald.enqueue_multicast($1::jsonb, $2::text[], queue => 'multicast')",
                             [.text(message), .text(PGArray.text(tokens))]).int(0, 0)!
        #expect(try stack.count("SELECT count(*) FROM herald.jobs WHERE queue = 'multicast'") == 500)
        let before = try result(c, id)
        #expect(before["success_count"]?.intValue == 0 && before["failure_count"]?.intValue == 0)
        #expect(before["responses"]?.arrayValue?.allSatisfy { $0["pending"]?.boolValue == true } == true)

        let run = try stack.work(["--drain", "--processes", "1", "--poll-interval", "0.2"])
        #expect(run.status == 0, "\(run.output)")

        let answer = try result(c, id)
        let responses = try #require(answer["responses"]?.arrayValue)
        try #require(responses.count == 500)
        var delivered = 0
        for (index, token) in tokens.enumerated() {
            let response = responses[index]
            let deliveries = stack.emulator.deliveredMessages(token: token)
            if deliveries.count == 1 {
                delivered += 1
                #expect(response["success"]?.boolValue == true, "[\(index)] \(token): \(response.serialized)")
                #expect(response["message_id"]?.stringValue == deliveries[0].name, "[\(index)] \(token): \(response.serialized)")
                #expect(deliveries[0].message["android_v2"]?["collapse_key"]?.stringValue == "sale")
            } else {
                #expect(deliveries.isEmpty, "[\(index)] \(token) delivered \(deliveries.count) times")
                // What the emulator answers this token, every attempt.
                let code = FaultToken.parse(token)?.answer(attempt: 99)?.code.rawValue
                #expect(code != nil, "[\(index)] \(token) was neither delivered nor a failing fault token")
                #expect(response["success"]?.boolValue == false, "[\(index)] \(token): \(response.serialized)")
                #expect(response["error"]?["code"]?.stringValue == code, "[\(index)] \(token): \(response.serialized)")
                #expect(response["error"]?["message"]?.stringValue?.isEmpty == false)
            }
        }
        #expect(delivered == 470)
        // Each failing code as often in the result as the emulator answered it (each of these
        // tokens was asked once: none of their errors is retried).
        let answered = stack.emulator.statistics["by_error"]
        for code in ["UNREGISTERED", "INVALID_ARGUMENT", "SENDER_ID_MISMATCH"] {
            let inResult = responses.filter { $0["error"]?["code"]?.stringValue == code }.count
            #expect(inResult == 10 && answered?[code]?.intValue == inResult, "\(code): \(inResult) in the result, emulator \(answered?.serialized ?? "-")")
        }
        #expect(answered?["INTERNAL"]?.intValue == 10, "each fail-internal-1 token failed once at the emulator, then was delivered")
        #expect(answer["success_count"]?.intValue == delivered)
        #expect(answer["failure_count"]?.intValue == 500 - delivered)
    }

    @Test func enqueueMulticastRefusesWhatTheSDKsRefuseNamingIt() throws {
        let database = try TestDatabase.fresh()
        defer { database.drop() }
        let c = try database.connect()
        func refusal(_ message: String, _ tokens: [String]) -> String {
            do {
                _ = try c.query("SELECT herald.enqueue_multicast($1::jsonb, $2::text[])", [.text(message), .text(PGArray.text(tokens))])
                return "accepted"
            } catch {
                return "\(error)"
            }
        }
        let many = (0...500).map { "t\($0)" }
        #expect(refusal(#"{"data": {"a": "b"}}"#, many).contains("501 tokens; a multicast takes at most 500 tokens"))
        #expect(refusal(#"{"data": {"a": "b"}}"#, []).contains("tokens is empty"))
        #expect(refusal(#"{"data": {"a": "b"}}"#, ["a", ""]).contains("tokens[2] is empty"))
        #expect(refusal(#"{"token": "x", "data": {"a": "b"}}"#, ["a"]).contains("message.token is set"))
        #expect(refusal(#"{"android": {}, "android_v2": {}}"#, ["a"])
                .contains("message.android_v2: cannot be set together with message.android"))
        #expect(refusal(#"{"android_v2": {"tll": "1s"}}"#, ["a"]).contains(#"message.android_v2.tll: unknown field; did you mean "ttl"?"#))
        #expect(try c.query("SELECT count(*) FROM herald.jobs").int(0, 0) == 0, "nothing was enqueued")
        // 500 is the limit, not beyond it; a dedupe key returns the pending multicast.
        let first = try c.query("SELECT herald.enqueue_multicast($1::jsonb, $2::text[], dedupe_key => 'sale-1')",
                                [.text(#"{"data": {"a": "b"}}"#), .text(PGArray.text(Array(many.prefix(500))))]).int(0, 0)
        let again = try c.query("SELECT herald.enqueue_multicast($1::jsonb, $2::text[], dedupe_key => 'sale-1')",
                                [.text(#"{"data": {"a": "b"}}"#), .text(PGArray.text(["z"]))]).int(0, 0)
        #expect(first != nil && first == again)
        #expect(try c.query("SELECT count(*) FROM herald.jobs").int(0, 0) == 500)
    }

    /// android_v2 and fid go everywhere a message goes: the worker sends them, `herald send`
    /// sends them, and both refuse android with android_v2 before any request.
    @Test func androidV2AndFidReachTheEmulatorThroughTheWorkerAndHeraldSend() throws {
        let stack = try WorkerStack()
        defer { stack.close() }
        let c = stack.connection
        let v2 = #""android_v2": {"ttl": "60s", "remote_notification": {"mutable_content": true, "notification": {"title": "Hi", "id": 4}}}"#
        _ = try c.query("SELECT herald.enqueue($1::jsonb)", [.text(#"{"fid": "fid-worker-1", "# + v2 + "}")])
        let both = try c.query("SELECT herald.enqueue($1::jsonb)", [.text(#"{"token": "both-1", "android": {}, "# + v2 + "}")]).int(0, 0)!
        let run = try stack.work(["--drain", "--processes", "1", "--poll-interval", "0.2"])
        #expect(run.status == 0, "\(run.output)")
        let viaWorker = stack.emulator.deliveredMessages().filter { $0.target == "fid:fid-worker-1" }
        #expect(viaWorker.count == 1)
        #expect(viaWorker.first?.message["android_v2"]?["remote_notification"]?["notification"]?["id"]?.intValue == 4)
        #expect(try c.query("SELECT reason FROM herald.dead_letters WHERE job_id = $1", [.int(both)])[0, 0]
                == "message.android_v2: cannot be set together with message.android; android and android_v2 are mutually exclusive, keep one")
        #expect(stack.emulator.deliveredMessages(token: "both-1").isEmpty)

        let file = NSTemporaryDirectory() + "herald-v2-\(UUID().uuidString).json"
        defer { try? FileManager.default.removeItem(atPath: file) }
        try (#"{"fid": "fid-send-1", "# + v2 + "}").write(toFile: file, atomically: true, encoding: .utf8)
        let sent = try HeraldProcess.run(["send", "--message", file], environment: stack.environment, timeout: 60)
        #expect(sent.status == 0, "\(sent.output)")
        #expect(stack.emulator.deliveredMessages().filter { $0.target == "fid:fid-send-1" }.count == 1)
        try (#"{"fid": "fid-send-2", "android": {}, "# + v2 + "}").write(toFile: file, atomically: true, encoding: .utf8)
        let refused = try HeraldProcess.run(["send", "--message", file], environment: stack.environment, timeout: 60)
        #expect(refused.status == 1, "\(refused.output)")
        #expect(refused.output.contains("message.android_v2: cannot be set together with message.android"), "\(refused.output)")
        #expect(stack.emulator.deliveredMessages().filter { $0.target == "fid:fid-send-2" }.isEmpty)
        let flag = try HeraldProcess.run(["send", "--fid", "fid-flag-1", "--title", "Hi"], environment: stack.environment, timeout: 60)
        #expect(flag.status == 0, "\(flag.output)")
        #expect(stack.emulator.deliveredMessages().filter { $0.target == "fid:fid-flag-1" }.count == 1)
    }

    func result(_ c: PGConnection, _ id: Int) throws -> JSONValue {
        try JSONValue.parse(try c.query("SELECT herald.multicast_result($1)::text", [.int(id)])[0, 0]!)
    }
}

/// A PostgreSQL array literal for text[], passed as a parameter (never pasted into SQL).
enum PGArray {
    static func text(_ items: [String]) -> String {
        "{" + items.map { "\"" + $0.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") + "\"" }
            .joined(separator: ",") + "}"
    }
}
