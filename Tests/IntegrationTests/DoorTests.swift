import Emulator
import FCM
import Foundation
import Postgres
import TestSupport
import Testing

/// What is refused at the door: oversized jobs (trigger jobs_size_limits and the worker's own check), and
/// credentials over plain http to another host.
@Suite(.serialized) struct DoorTests {
    static let megabyteToken = String(repeating: "t", count: 1_048_576)
    static let tenMegabytes = String(repeating: "b", count: 10 * 1_048_576)

    /// The error of `sql`, which must be refused with SQLSTATE 54000 naming `limit`.
    static func expectRefused(_ connection: PGConnection, _ sql: String, _ parameters: [PGValue?], limit: String) {
        do {
            try connection.query(sql, parameters)
            Issue.record("accepted: \(sql.prefix(80))")
        } catch {
            #expect(error.sqlState == "54000", "\(error)")
            #expect(error.message.contains(limit), "names the limit \(limit): \(error.message.prefix(300))")
            #expect(error.message.count < 2_000, "does not echo the input")
        }
    }

    @Test func aTenMegabyteMessageAndAMegabyteTokenAreRefusedAtEveryDoor() throws {
        let database = try TestDatabase.fresh()
        defer { database.drop() }
        let connection = try database.connect()
        let big = #"{"token": "t1", "data": {"blob": "\#(Self.tenMegabytes)"}}"#
        let longToken = #"{"token": "\#(Self.megabyteToken)", "notification": {"title": "Hi"}}"#
        for (message, limit) in [(big, "limit of 32768 bytes"), (longToken, "limit of 4,096 bytes")] {
            Self.expectRefused(connection, "SELECT herald.enqueue($1::jsonb)", [.text(message)], limit: limit)
            Self.expectRefused(connection, "INSERT INTO herald.jobs (message) SELECT $1::jsonb FROM generate_series(1, 2)",
                               [.text(message)], limit: limit)
        }
        Self.expectRefused(connection, "SELECT herald.enqueue_multicast('{\"data\": {\"k\": \"v\"}}'::jsonb, ARRAY['ok', $1])",
                           [.text(Self.megabyteToken)], limit: "limit of 4,096 bytes")
        Self.expectRefused(connection, "SELECT herald.enqueue(jsonb_build_object('topic', $1::text, 'data', '{}'::jsonb))",
                           [.text(String(repeating: "x", count: 5_000))], limit: "limit of 4,096 bytes")
        #expect(try connection.query("SELECT count(*) FROM herald.jobs").int(0, 0) == 0, "nothing was enqueued")

        // What FCM would take passes: a whole v1 message of 30 KB, a 4,096-byte token.
        let blocks = String(repeating: "a", count: 8_000)
        let wide = #"{"token": "\#(String(repeating: "k", count: 4_096))", "data": {"d": "\#(String(repeating: "d", count: 3_000))"}, "android": {"data": {"x": "\#(blocks)"}}, "apns": {"payload": {"x": "\#(blocks)"}}, "webpush": {"data": {"x": "\#(blocks)"}}}"#
        try connection.query("SELECT herald.enqueue($1::jsonb)", [.text(wide)])
        try connection.query("INSERT INTO herald.jobs (message) SELECT $1::jsonb", [.text(wide)])
        #expect(try connection.query("SELECT count(*) FROM herald.jobs").int(0, 0) == 2)
    }

    /// Rows inserted before the constraint existed (it is NOT VALID): the worker dead-letters them
    /// with the limit as the reason, and the emulator never sees them.
    @Test func oversizedRowsFromBeforeTheCheckAreDeadLetteredUnsent() throws {
        let stack = try WorkerStack()
        defer { stack.close() }
        try stack.connection.query("ALTER TABLE herald.jobs DISABLE TRIGGER jobs_size_limits")
        try stack.connection.query("INSERT INTO herald.jobs (message) SELECT jsonb_build_object('token', $1::text, 'notification', jsonb_build_object('title', 'Hi'))",
                                   [.text(Self.megabyteToken)])
        try stack.connection.query("INSERT INTO herald.jobs (message) SELECT jsonb_build_object('token', 'big-body', 'data', jsonb_build_object('blob', $1::text))",
                                   [.text(String(repeating: "b", count: 40_000))])
        try stack.connection.query("INSERT INTO herald.jobs (message) SELECT jsonb_build_object('token', $1::text, 'notification', jsonb_build_object('title', 'Hi'))",
                                   [.text(String(repeating: "f", count: 5_000))])
        try stack.connection.query("ALTER TABLE herald.jobs ENABLE TRIGGER jobs_size_limits")
        try stack.enqueue(3, prefix: "fine-")
        let run = try stack.work(["--processes", "1", "--drain"], timeout: 120)
        #expect(run.status == 0, "\(run.output)")
        let delivered = stack.emulator.deliveredMessages()
        #expect(delivered.count == 3, "only the three ordinary jobs reached the emulator")
        #expect(stack.emulator.deliveredMessages(token: Self.megabyteToken).isEmpty)
        #expect(stack.emulator.deliveredMessages(token: "big-body").isEmpty)
        #expect(stack.emulator.deliveredMessages(token: String(repeating: "f", count: 5_000)).isEmpty)
        let reasons = try stack.connection.query("SELECT reason FROM herald.dead_letters ORDER BY job_id")
        #expect(reasons.rowCount == 3)
        // A message over the size limit is refused before it is parsed; a long target after.
        #expect(reasons[0, 0]?.hasPrefix("message: 1048") == true && reasons[0, 0]?.contains("over Herald's limit of 32768 bytes") == true, "\(reasons[0, 0] ?? "")")
        #expect(reasons[1, 0]?.contains("over Herald's limit of 32768 bytes") == true, "\(reasons[1, 0] ?? "")")
        #expect(reasons[2, 0]?.contains("message.token: 5000 bytes, over Herald's limit of 4096 bytes for a target") == true, "\(reasons[2, 0] ?? "")")
    }

    /// Real credentials with plain http to a host that is not loopback: every command that uses
    /// them stops at start (status 2), naming the setting, before any client is made: the key's
    /// token endpoint (the emulator, on loopback) issues no access token, and no job moves.
    @Test func credentialsAreNeverSentOverPlainHTTPToAnotherHost() throws {
        let stack = try WorkerStack()
        defer { stack.close() }
        try stack.enqueue(2, prefix: "tls-")
        let commands: [[String]] = [
            ["work", "--processes", "1", "--drain"], ["send", "--token", "t1", "--title", "Hi"],
            ["groups", "get", "--name", "g"],
        ]
        for (variable, value) in [("HERALD_FCM_URL", "http://fcm.example.invalid"), ("HERALD_FCM_URL", "http://192.0.2.1:8080"),
                                  ("HERALD_IID_URL", "http://iid.example.invalid")] {
            for command in commands where variable == "HERALD_FCM_URL" || command[0] == "work" {
                var environment = stack.environment
                environment[variable] = value
                let run = try HeraldProcess.run(command, environment: environment, timeout: 60)
                #expect(run.status == 2, "\(command) \(variable)=\(value): \(run.output)")
                #expect(run.output.contains("\(variable) is \(value): plain http"), "\(run.output)")
                #expect(run.output.contains("--allow-insecure-transport"), "says what to do: \(run.output)")
            }
        }
        // A key whose token_uri is plain http to another host: refused, naming the file.
        let key = NSTemporaryDirectory() + "herald-http-token-\(UUID().uuidString).json"
        defer { try? FileManager.default.removeItem(atPath: key) }
        let json = try String(contentsOfFile: stack.credentials, encoding: .utf8)
            .replacingOccurrences(of: stack.emulator.tokenURI.replacingOccurrences(of: "/", with: "\\/"), with: "http://192.0.2.1/token")
            .replacingOccurrences(of: stack.emulator.tokenURI, with: "http://192.0.2.1/token")
        #expect(json.contains("192.0.2.1"))
        try json.write(toFile: key, atomically: true, encoding: .utf8)
        chmod(key, 0o644)
        for command in commands {
            var environment = stack.environment
            environment["GOOGLE_APPLICATION_CREDENTIALS"] = key
            let run = try HeraldProcess.run(command, environment: environment, timeout: 60)
            #expect(run.status == 2, "\(command): \(run.output)")
            #expect(run.output.contains("the key GOOGLE_APPLICATION_CREDENTIALS \(key) has token_uri http://192.0.2.1/token"), "\(run.output)")
            #expect(run.output.contains("may be read by any user (mode 644)"), "warns about the key's mode: \(run.output)")
        }
        #expect(stack.emulator.tokensIssued == 0, "no access token was asked for")
        #expect(stack.emulator.deliveredMessages().isEmpty)
        #expect(try stack.count("SELECT count(*) FROM herald.jobs WHERE state = 'available' AND attempts = 0") == 2)
        // The emulator on loopback is fine as it is (every other test uses it): https is not required there.
        let loopback = try stack.work(["--processes", "1", "--drain"], timeout: 120)
        #expect(loopback.status == 0, "\(loopback.output)")
        #expect(!loopback.output.contains("allow-insecure-transport"))
    }
}
