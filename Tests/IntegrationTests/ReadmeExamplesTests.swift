import Foundation
import JSON
import Postgres
import Testing
import TestSupport

/// Every ```sql block of README.md and of the docs pages its SQL section sends readers to runs, in
/// order, against one fresh database; the messages they enqueue are valid and `herald work`
/// delivers them.
@Suite struct ReadmeExamplesTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    static let readme = root.appendingPathComponent("README.md")

    /// The documents whose examples run, in the order they run: the README first (its rows of
    /// herald.device_tokens are the campaigns' audience), campaigns.md before sql-api.md (whose
    /// herald.touch_token registers one more device a campaign would reach), the legacy API last.
    /// With the number of ```sql blocks each holds, so a block lost in a move fails the test.
    static let documents: [(path: String, blocks: Int)] = [
        ("README.md", 4), ("docs/campaigns.md", 6), ("docs/sql-api.md", 14), ("docs/legacy-api.md", 4),
        ("docs/projects.md", 2),
    ]
    /// Pages whose ```sql blocks are sketches with placeholders (`'{"token": "..."}'`), not run.
    static let sketches: Set<String> = ["docs/audience.md"]
    /// A block of a page that runs may be a sketch too: its placeholders are marked with `…` (an
    /// APNs device token of 64 hex digits, an application's own table). It is counted, not run;
    /// APNsRegistryTests runs the same calls with real values.
    static func isSketch(_ block: String) -> Bool { block.contains("…") }

    /// The ```sql blocks of a Markdown text, in order.
    static func sqlBlocks<S: StringProtocol>(inMarkdown text: S) -> [String] {
        var blocks: [String] = []
        var current: [String]? = nil
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if current == nil, line.hasPrefix("```sql") { current = []; continue }
            if current != nil, line.hasPrefix("```") { blocks.append(current!.joined(separator: "\n")); current = nil; continue }
            current?.append(String(line))
        }
        return blocks
    }

    static func sqlBlocks(of path: String) throws -> [String] {
        sqlBlocks(inMarkdown: try String(contentsOf: root.appendingPathComponent(path), encoding: .utf8))
    }

    /// Every block of `documents`, in their order.
    static func sqlBlocks() throws -> [String] {
        try documents.flatMap { try sqlBlocks(of: $0.path) }
    }

    @Test func everyDocumentWithSQLExamplesIsRun() throws {
        for (path, expected) in Self.documents {
            #expect(try Self.sqlBlocks(of: path).count == expected, "\(path)")
        }
        let docs = Self.root.appendingPathComponent("docs")
        let pages = try FileManager.default.contentsOfDirectory(atPath: docs.path).filter { $0.hasSuffix(".md") }
        #expect(pages.count >= 10, "\(pages)")
        let run = Set(Self.documents.map(\.path))
        for page in pages.map({ "docs/\($0)" }) where !run.contains(page) && !Self.sketches.contains(page) {
            #expect(try Self.sqlBlocks(of: page).isEmpty, "\(page) has SQL examples that no test runs: add it to documents")
        }
    }

    @Test func everySQLExampleRunsAndItsMessagesAreDelivered() throws {
        let all = try Self.sqlBlocks()
        #expect(all.count == Self.documents.reduce(0) { $0 + $1.blocks })
        let blocks = all.filter { !Self.isSketch($0) }
        #expect(all.count - blocks.count == 1, "the one sketch is docs/sql-api.md's APNs messages")
        let stack = try WorkerStack()
        defer { stack.close() }
        let c = stack.connection
        for block in blocks {
            do {
                try c.execute(block)
            } catch {
                Issue.record("example failed: \(error)\n\(block)")
            }
        }
        // Each validate_message example prints what its page says it prints, on the line below.
        var shownResults = 0
        for block in blocks {
            let lines = block.split(separator: "\n").map(String.init)
            for (query, comment) in zip(lines, lines.dropFirst())
            where query.hasPrefix("SELECT herald.validate_message(") && comment.hasPrefix("-- ") {
                #expect(try c.query(query)[0, 0] == String(comment.dropFirst(3)), "\(query)")
                shownResults += 1
            }
        }
        #expect(shownResults >= 3)

        #expect(try stack.count("SELECT count(*) FROM herald.jobs WHERE queue = 'marketing' AND run_at = date_trunc('day', now()) + interval '1 day 9 hours'") == 1000,
                "the campaign is scheduled for tomorrow 09:00")
        #expect(try stack.count("SELECT count(*) FROM herald.jobs WHERE message->>'token' = 'device-token-2'") == 1, "the trigger enqueued")
        #expect(try stack.count("""
            SELECT count(*) FROM herald.jobs WHERE kind = 'send' AND CASE WHEN herald.is_legacy(message)
                THEN herald._legacy_translate(message, 0) ? 'error' ELSE cardinality(herald.validate_message(message)) > 0 END
            """) == 0, "every example message is valid (legacy ones once translated)")
        // The campaigns: tomorrow 09:00 on each user's own wall clock, always ahead of now.
        #expect(try stack.count("""
            SELECT count(*) FROM herald.jobs j JOIN herald.campaigns c ON c.id = j.campaign_id
            JOIN herald.device_tokens d ON d.token = j.message->>'token' JOIN public.app_users u ON u.user_ref = d.user_ref
            WHERE c.name = 'spring-sale-local' AND j.state = 'scheduled' AND j.run_at > now()
              AND (j.run_at AT TIME ZONE u.time_zone)::time = '09:00'
              AND (j.run_at AT TIME ZONE u.time_zone)::date = (now() AT TIME ZONE u.time_zone)::date + 1
            """) == 1000, "every device of the time-zone campaign waits for 09:00 tomorrow in its user's zone")
        #expect(try stack.count("SELECT count(DISTINCT run_at) FROM herald.jobs j JOIN herald.campaigns c ON c.id = j.campaign_id WHERE c.name = 'spring-sale-local'") == 4,
                "four zones, four instants")
        #expect(try stack.count("SELECT count(*) FROM herald.campaigns WHERE name = 'app-update-3-2' AND max_per_second = 500 AND state = 'scheduled'") == 1,
                "paused and resumed, it waits for its first claim")
        #expect(try stack.count("""
            SELECT count(*) FROM herald.campaign_progress WHERE name = 'wrong-audience' AND state = 'cancelled' AND cancelled = 1000 AND pending = 0 AND total = 1000
            """) == 1)
        #expect(try stack.count("SELECT count(*) FROM herald.queues WHERE name = 'campaigns' AND NOT paused AND max_per_second = 1000 AND max_in_flight = 100") == 1)
        let cancelled = try stack.count("SELECT count(*) FROM herald.jobs WHERE state = 'cancelled'")
        #expect(cancelled == 1000, "only the cancelled campaign's jobs are cancelled")
        let examples = try stack.count("SELECT count(*) FROM herald.jobs") - cancelled

        // Deliver everything now, the campaign included.
        try c.query("UPDATE herald.jobs SET run_at = now()")
        var run = try stack.work(["--drain", "--processes", "2", "--poll-interval", "0.2"])
        #expect(run.status == 0, "\(run.output)")
        #expect(try stack.count("SELECT count(*) FROM herald.jobs WHERE state = 'completed'") == examples)
        #expect(try stack.count("SELECT count(*) FROM herald.dead_letters") == 0)
        #expect(try stack.count("SELECT count(*) FROM herald.device_groups WHERE name = 'family-7'") == 1)
        // Both delivered campaigns are accounted for in full; the cancelled one sent nothing.
        #expect(try stack.count("""
            SELECT count(*) FROM herald.campaign_progress
            WHERE name IN ('spring-sale-local', 'app-update-3-2') AND state = 'finished' AND completed = 1000 AND total = 1000
              AND pending = 0 AND running = 0 AND dead = 0
            """) == 2)
        #expect(try stack.count("SELECT count(*) FROM herald.campaign_progress WHERE name = 'wrong-audience' AND completed = 0 AND cancelled = 1000") == 1)
        // Each campaign's analytics label reached FCM on its messages.
        let labels = stack.emulator.deliveredMessages(token: "campaign-device-7").compactMap {
            try? JSONValue.parse($0.body)["message"]?["fcm_options"]?["analytics_label"]?.stringValue
        }
        #expect(labels.sorted() == ["app-update-3-2", "spring-sale"], "\(labels)")

        // Now the group exists: the group send of sql-api.md reaches both members.
        let groupBlock = try #require(blocks.first { $0.contains("enqueue_group_op") })
        let send = groupBlock.components(separatedBy: "\n").drop { !$0.hasPrefix("SELECT herald.enqueue(jsonb_build_object('token', notification_key") }.joined(separator: "\n")
        try c.execute(send)
        run = try stack.work(["--drain", "--processes", "1", "--poll-interval", "0.2"])
        #expect(run.status == 0, "\(run.output)")
        #expect(stack.emulator.deliveredMessages(token: "phone-token-7").count == 1)
        #expect(stack.emulator.deliveredMessages(token: "tablet-token-7").count == 1)
        // The Live Activity reached the emulator with its token.
        let live = stack.emulator.deliveredMessages(token: "ios-device-1")
        #expect(live.count == 3)
        #expect(live.compactMap { try? JSONValue.parse($0.body)["message"]?["apns"]?["payload"]?["aps"]?["event"]?.stringValue }.sorted() == ["end", "start", "update"])
    }
}
