import Foundation
import JSON
import Postgres
import Testing
import TestSupport

/// The SQL of docs/legacy-api.md ("Coming from the legacy API") runs, prints what the page says,
/// and its jobs reach the emulator as described (ReadmeExamplesTests runs it among all blocks).
@Suite struct LegacyReadmeTests {
    static func sectionBlocks() throws -> [String] {
        try ReadmeExamplesTests.sqlBlocks(of: "docs/legacy-api.md")
    }

    @Test func theLegacySectionRunsAndDeliversAsItSays() throws {
        let blocks = try Self.sectionBlocks()
        #expect(blocks.count == 4)
        let stack = try WorkerStack()
        defer { stack.close() }
        let c = stack.connection
        // Each SELECT followed by a "-- " line prints that line.
        for block in blocks {
            let lines = block.split(separator: "\n").map(String.init)
            for (index, line) in lines.enumerated() where line.hasPrefix("SELECT herald.from_legacy") {
                let shown = try #require(lines[index + 1].hasPrefix("-- ") ? String(lines[index + 1].dropFirst(3)) : nil)
                #expect(try c.query(line)[0, 0] == shown)
            }
        }
        for block in blocks.dropFirst() {
            do { try c.execute(block) } catch { Issue.record("docs/legacy-api.md example failed: \(error)\n\(block)") }
        }
        // The error text the page quotes.
        do {
            _ = try c.query(#"SELECT herald.from_legacy('{"to": "legacy-token-1", "time_to_live": 2419201}')"#)
            Issue.record("accepted")
        } catch {
            #expect(error.sqlState == "22023")
            #expect(error.message.contains("InvalidTtl at legacy.time_to_live: must be a whole number of seconds from 0 to 2419200 (4 weeks), not 2419201"))
        }
        #expect(try stack.count("SELECT count(*) FROM herald.jobs") == 7, "3 multicast jobs, 2 from the trigger, 2 dry runs")

        let run = try stack.work(["--drain", "--processes", "1", "--poll-interval", "0.2"])
        #expect(run.status == 0, "\(run.output)")
        // The multicast: three deliveries (the duplicate token twice) and the legacy result.
        let resultBlock = try #require(blocks.first { $0.contains("SELECT herald.legacy_result(job_ids)") })
        let lines = resultBlock.split(separator: "\n").map(String.init)
        let query = try #require(lines.first { $0.hasPrefix("SELECT herald.legacy_result") })
        let shown = try JSONValue.parse(String(try #require(lines.last).dropFirst(3)))
        let result = try JSONValue.parse(try #require(try c.query(query)[0, 0]))
        let ids = try JSONValue.parse(try c.query("SELECT array_to_json(job_ids)::text FROM public.flight_notices")[0, 0]!).arrayValue!.compactMap(\.intValue)
        #expect(result["multicast_id"]?.intValue == ids.first)
        for key in ["success", "failure", "canonical_ids"] { #expect(result[key] == shown[key], "\(key)") }
        let names = stack.emulator.deliveredMessages().map { String($0.name.split(separator: "/").last!) }
        for item in try #require(result["results"]?.arrayValue) {
            #expect(names.contains(try #require(item["message_id"]?.stringValue)))
        }
        #expect(stack.emulator.deliveredMessages(token: "legacy-token-1").count == 2)
        let delayed = try JSONValue.parse(try #require(stack.emulator.deliveredMessages(token: "legacy-token-2").first).body)["message"]
        #expect(delayed?["data"] == ["flight": "BA117", "delay_minutes": "35"])
        #expect(delayed?["apns"]?["payload"] == ["aps": ["badge": 1]])
        // The trigger's multicast reached both tokens.
        for token in ["legacy-token-3", "legacy-token-4"] {
            let message = try JSONValue.parse(try #require(stack.emulator.deliveredMessages(token: token).first).body)["message"]
            #expect(message?["android"]?["collapse_key"] == "gate")
        }
        // The dry runs were validated, not delivered.
        #expect(stack.emulator.deliveredMessages(token: "legacy-token-5").isEmpty && stack.emulator.deliveredMessages(token: "legacy-token-6").isEmpty)
        #expect(stack.emulator.statistics["validate_only"]?.intValue == 2)
        #expect(try stack.count("SELECT count(*) FROM herald.jobs WHERE state = 'completed' AND validate_only") == 2)
    }
}
