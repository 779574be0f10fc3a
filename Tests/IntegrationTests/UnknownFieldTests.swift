import Foundation
import Testing
import TestSupport

/// Unknown field names never cost a request: the worker dead-letters them naming the field and
/// the nearest known name, unless the operator allowed the path in herald.message_extra_fields.
@Suite(.serialized) struct UnknownFieldTests {
    @Test func theWorkerRefusesUnknownFieldsAndReadsTheAllowListAtStart() throws {
        let stack = try WorkerStack()
        defer { stack.close() }
        let c = stack.connection
        // The emulator, like FCM, also takes proto JSON's lowerCamelCase names; an operator who
        // sends them allows each path.
        try c.query("INSERT INTO herald.message_extra_fields (path, note) VALUES ('message.android.collapseKey', 'our SDK writes camelCase')")
        func add(_ message: String) throws -> Int {
            try c.query("SELECT herald.enqueue($1::jsonb)", [.text(message)]).int(0, 0)!
        }
        let allowed = try add(#"{"token":"allowed-1","android":{"collapseKey":"scores"}}"#)
        let typo = try add(#"{"token":"typo-1","android":{"tll":"3600s"}}"#)
        let camel = try add(#"{"token":"camel-1","android":{"directBootOk":true}}"#)

        let run = try stack.work(["--drain", "--processes", "1", "--poll-interval", "0.2"])
        #expect(run.status == 0, "\(run.output)")
        #expect(run.output.contains("message.android.collapseKey"), "the worker says which extra fields it accepts")
        func state(_ id: Int) throws -> String? { try c.query("SELECT state FROM herald.jobs WHERE id = $1", [.int(id)])[0, 0] }
        func reason(_ id: Int) throws -> String? { try c.query("SELECT reason FROM herald.dead_letters WHERE job_id = $1", [.int(id)])[0, 0] }
        #expect(try state(allowed) == "completed")
        #expect(stack.emulator.deliveredMessages(token: "allowed-1").count == 1)
        #expect(try reason(typo) == #"message.android.tll: unknown field; did you mean "ttl"?"#)
        #expect(try reason(camel) == #"message.android.directBootOk: unknown field; did you mean "direct_boot_ok"?"#)
        #expect(stack.emulator.statistics["requests"]?.intValue == 1, "only the allowed message cost a request")
        // The SQL validator reads the same table, on every call.
        #expect(try c.query("SELECT cardinality(herald.validate_message($1::jsonb))", [.text(#"{"token":"t","android":{"collapseKey":"k"}}"#)]).int(0, 0) == 0)
        try c.query("DELETE FROM herald.message_extra_fields")
        #expect(try c.query("SELECT array_to_string(herald.validate_message($1::jsonb), '; ')", [.text(#"{"token":"t","android":{"collapseKey":"k"}}"#)])[0, 0]
                == #"message.android.collapseKey: unknown field; did you mean "collapse_key"?"#)
    }

    @Test func theAllowListRefusesWhatIsNotAFieldPath() throws {
        let database = try TestDatabase.fresh()
        defer { database.drop() }
        let c = try database.connect()
        for bad in ["android.new_option", "message", "message.android.", "message..x", "message.a b"] {
            #expect(throws: (any Error).self, "\(bad)") {
                try c.query("INSERT INTO herald.message_extra_fields (path) VALUES ($1)", [.text(bad)])
            }
        }
        try c.query("INSERT INTO herald.message_extra_fields (path) VALUES ('message.webpush.new-thing_2')")
    }

    @Test func heraldSendTakesExtraFieldsOnTheCommandLine() throws {
        let stack = try WorkerStack()
        defer { stack.close() }
        let file = NSTemporaryDirectory() + "herald-msg-\(UUID().uuidString).json"
        try #"{"token": "send-1", "android": {"collapseKey": "scores"}}"#.write(toFile: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: file) }
        let refused = try HeraldProcess.run(["send", "--message", file], environment: stack.environment, timeout: 60)
        #expect(refused.status == 1, "\(refused.output)")
        #expect(refused.output.contains(#"message.android.collapseKey: unknown field; did you mean "collapse_key"?"#))
        #expect(stack.emulator.deliveredMessages(token: "send-1").isEmpty)
        let sent = try HeraldProcess.run(["send", "--message", file, "--extra-field", "message.android.collapseKey"],
                                         environment: stack.environment, timeout: 60)
        #expect(sent.status == 0, "\(sent.output)")
        #expect(stack.emulator.deliveredMessages(token: "send-1").count == 1)
        let malformed = try HeraldProcess.run(["send", "--message", file, "--extra-field", "android.collapseKey"],
                                              environment: stack.environment, timeout: 60)
        #expect(malformed.status == 2 && malformed.output.contains("--extra-field \"android.collapseKey\" is not a field path"), "\(malformed.output)")
        #expect(stack.emulator.deliveredMessages(token: "send-1").count == 1, "nothing more was sent")
    }
}
