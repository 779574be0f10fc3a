import FCM
import Foundation
import JSON
import Postgres
import Queue
import Testing
import TestSupport

/// The legacy translators (Swift `LegacyTranslator`, SQL `herald.from_legacy`) against the table
/// of cases in Tests/Fixtures/FCM/legacy-cases.json: each accepted case gives the expected v1
/// messages and notes, each rejected case its Table 9 code (docs/legacy.md 3) and legacy path, and both sides give
/// word-for-word the same answer, on the cases and on a few thousand generated payloads.
@Suite(.serialized) struct LegacyTranslationTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    static func table() throws -> JSONValue {
        try JSONValue.parse(String(contentsOf: root.appendingPathComponent("Tests/Fixtures/FCM/legacy-cases.json"), encoding: .utf8))
    }

    /// One side's answer in a comparable shape.
    enum Answer: Equatable, CustomStringConvertible {
        case accepted(JSONValue)
        case rejected(code: String, path: String, description: String)

        init(_ result: Result<LegacyTranslation, LegacyRejection>) {
            switch result {
            case .success(let translation): self = .accepted(translation.json)
            case .failure(let rejection): self = .rejected(code: rejection.code, path: rejection.path, description: rejection.description)
            }
        }

        /// herald._legacy_translate's jsonb: the translation, or {"error": {code, path, reason}}.
        init(sql: JSONValue) {
            if let error = sql["error"] {
                let code = error["code"]?.stringValue ?? "?", path = error["path"]?.stringValue ?? "?"
                self = .rejected(code: code, path: path, description: "\(code) at \(path): \(error["reason"]?.stringValue ?? "?")")
            } else {
                self = .accepted(sql)
            }
        }

        var description: String {
            switch self {
            case .accepted(let json): return "accepted \(json.serialized.prefix(600))"
            case .rejected(_, _, let description): return "rejected: \(description)"
            }
        }
    }

    /// Swift on the input as written, Swift on the input as jsonb stored it (what the worker
    /// reads back), and PostgreSQL.
    struct Answers {
        var swift: Answer
        var swiftOnStored: Answer
        var sql: Answer
    }

    static func answers(_ c: JSONValue, now: Int, connection: PGConnection) throws -> Answers {
        if let form = c["form"]?.stringValue {
            let result = try connection.query("""
                SELECT CASE WHEN f ? 'error' THEN f ELSE herald._legacy_translate(f, $2) END
                FROM herald._legacy_form_payload($1) AS f
                """, [.text(form), .int(now)])
            let swift = Answer(LegacyTranslator.translate(form: form, now: now))
            return Answers(swift: swift, swiftOnStored: swift, sql: Answer(sql: try JSONValue.parse(result[0, 0]!)))
        }
        let legacy = try #require(c["legacy"])
        let result = try connection.query("SELECT herald._legacy_translate($1::jsonb, $2), $1::jsonb::text",
                                          [.text(legacy.serialized), .int(now)])
        return Answers(swift: Answer(LegacyTranslator.translate(legacy, now: now)),
                       swiftOnStored: Answer(LegacyTranslator.translate(try JSONValue.parse(result[0, 1]!), now: now)),
                       sql: Answer(sql: try JSONValue.parse(result[0, 0]!)))
    }

    @Test func everyCaseGivesItsExpectedAnswerInSwiftAndInSQL() throws {
        let table = try Self.table()
        let now = try #require(table["now"]?.intValue)
        let database = try TestDatabase.fresh()
        defer { database.drop() }
        let connection = try database.connect()

        let accepted = try #require(table["accept"]?.arrayValue)
        #expect(accepted.count >= 20)
        for c in accepted {
            let name = c["name"]!.stringValue!
            let answers = try Self.answers(c, now: now, connection: connection)
            #expect(answers.sql == answers.swiftOnStored, "\(name): SQL \(answers.sql) / Swift \(answers.swiftOnStored)")
            guard case .accepted(let translation) = answers.swift, case .accepted(let stored) = answers.sql else {
                Issue.record("\(name): refused (Swift \(answers.swift), SQL \(answers.sql))")
                continue
            }
            for result in [translation, stored] {
                #expect(result["messages"] == c["messages"], "\(name): \(result["messages"]!.serialized)")
                #expect(result["validate_only"] == c["validate_only"], "\(name)")
            }
            // Notes come in member order, which jsonb may change; the stored form must match exactly.
            #expect(stored["notes"] == c["notes"], "\(name): \(stored["notes"]!.serialized)")
            #expect(Set((translation["notes"]?.arrayValue ?? []).compactMap(\.stringValue))
                    == Set((c["notes"]?.arrayValue ?? []).compactMap(\.stringValue)), "\(name)")
            // Every produced message passes the v1 rules on both sides.
            for message in stored["messages"]!.arrayValue! {
                #expect(MessageValidator.validate(message).isEmpty, "\(name)")
                let issues = try connection.query("SELECT cardinality(herald.validate_message($1::jsonb))", [.text(message.serialized)])
                #expect(issues.int(0, 0) == 0, "\(name)")
            }
        }

        let rejected = try #require(table["reject"]?.arrayValue)
        #expect(rejected.count >= 60)
        var codes: Set<String> = []
        for c in rejected {
            let name = c["name"]!.stringValue!
            let answers = try Self.answers(c, now: now, connection: connection)
            #expect(answers.sql == answers.swiftOnStored, "\(name): SQL \(answers.sql) / Swift \(answers.swiftOnStored)")
            for answer in [answers.swift, answers.sql] {
                guard case .rejected(let code, let path, let description) = answer else {
                    Issue.record("\(name): accepted, expected \(c["code"]!.stringValue!) at \(c["path"]!.stringValue!): \(answer)")
                    continue
                }
                #expect(code == c["code"]?.stringValue && path == c["path"]?.stringValue, "\(name): \(description)")
                if let reason = c["reason"]?.stringValue {
                    #expect(description == "\(code) at \(path): \(reason)", "\(name)")
                }
                codes.insert(code)
            }
        }
        #expect(codes == ["InvalidJson", "InvalidParameters", "MissingRegistration", "InvalidTtl", "InvalidDataKey", "MessageTooBig"])
    }

    @Test func theSQLFunctionsRaiseTheRejectionAsSQLState22023() throws {
        let table = try Self.table()
        let database = try TestDatabase.fresh()
        defer { database.drop() }
        let connection = try database.connect()
        for c in try #require(table["reject"]?.arrayValue) {
            let name = c["name"]!.stringValue!
            let expected: LegacyRejection
            let call: () throws(PostgresError) -> PGResult
            if let form = c["form"]?.stringValue {
                guard case .failure(let rejection) = LegacyTranslator.translate(form: form, now: 0) else {
                    Issue.record("\(name): accepted by Swift"); continue
                }
                expected = rejection
                call = { () throws(PostgresError) in try connection.query("SELECT herald.from_legacy_form($1)", [.text(form)]) }
            } else {
                let legacy = c["legacy"]!
                guard case .failure(let rejection) = LegacyTranslator.translate(legacy, now: 0) else {
                    Issue.record("\(name): accepted by Swift"); continue
                }
                expected = rejection
                call = { () throws(PostgresError) in try connection.query("SELECT herald.from_legacy($1::jsonb)", [.text(legacy.serialized)]) }
            }
            do {
                _ = try call()
                Issue.record("\(name): herald.from_legacy accepted it")
            } catch {
                #expect(error.sqlState == "22023", "\(name)")
                #expect(error.message.contains(expected.description), "\(name): \(error.message)")
            }
        }
        // An accepted payload comes back as {"validate_only", "messages", "notes"}.
        let result = try connection.query(#"SELECT herald.from_legacy('{"registration_ids": ["a", "b"], "dry_run": true, "data": {"k": "v"}}')"#)
        let translation = try JSONValue.parse(result[0, 0]!)
        #expect(translation["validate_only"] == true)
        #expect(translation["messages"] == [["token": "a", "data": ["k": "v"]], ["token": "b", "data": ["k": "v"]]])
    }

    @Test func apnsExpirationFollowsTheClockGiven() throws {
        let legacy: JSONValue = ["to": "t", "time_to_live": 60, "data": ["k": "v"]]
        for now in [1_700_000_000, 1_800_000_000] {
            guard case .success(let translation) = LegacyTranslator.translate(legacy, now: now) else {
                Issue.record("refused"); return
            }
            #expect(translation.messages[0]["apns"]?["headers"]?["apns-expiration"] == .string(String(now + 60)))
            #expect(translation.messages[0]["android"]?["ttl"] == "60s")
        }
        let database = try TestDatabase.fresh()
        defer { database.drop() }
        let connection = try database.connect()
        let sql = try connection.query("SELECT herald.from_legacy($1::jsonb, to_timestamp(1700000000)) #>> '{messages,0,apns,headers,apns-expiration}'",
                                       [.text(legacy.serialized)])
        #expect(sql[0, 0] == "1700000060")
    }

    @Test func theDetectionRuleOfSection4_1() throws {
        let legacy: [JSONValue] = [
            ["to": "t"], ["registration_ids": ["a"]], ["notification_key": "k"], ["condition": "'a' in topics", "priority": "high"],
            ["condition": "'a' in topics", "time_to_live": 60], ["condition": "'a' in topics", "notification": ["title": "T", "sound": "default"]],
            ["condition": "'a' in topics", "dry_run": true],
        ]
        let v1: [JSONValue] = [
            ["token": "t"], ["topic": "news", "notification": ["title": "T"]], ["message": ["token": "t"]],
            ["condition": "'a' in topics", "notification": ["title": "T", "body": "B", "image": "https://x.y/i.png"]],
            ["token": "t", "android": ["priority": "HIGH"]], ["to": "t", "apns": [:]], "text", ["fid": "f"],
        ]
        for value in legacy { #expect(LegacyTranslator.isLegacy(value), "\(value)") }
        for value in v1 { #expect(!LegacyTranslator.isLegacy(value), "\(value)") }
        // herald.is_legacy (the herald.jobs trigger's test) agrees.
        let database = try TestDatabase.fresh()
        defer { database.drop() }
        let connection = try database.connect()
        for (value, expected) in legacy.map({ ($0, true) }) + v1.map({ ($0, false) }) {
            #expect(try connection.query("SELECT herald.is_legacy($1::jsonb)", [.text(value.serialized)]).bool(0, 0) == expected, "\(value)")
        }
    }

    @Test func generatedPayloadsGetTheSameAnswerInSwiftAndSQL() throws {
        let table = try Self.table()
        let now = try #require(table["now"]?.intValue)
        let bases = try #require(table["accept"]?.arrayValue).compactMap { $0["legacy"]?.objectValue }
        var generator = LegacyGenerator(seed: 20_260_101, bases: bases)
        let database = try TestDatabase.fresh()
        defer { database.drop() }
        let connection = try database.connect()
        var disagreements = 0
        var accepted = 0
        var codes: [String: Int] = [:]
        for n in 0..<2000 {
            let payload = generator.next()
            let answers = try Self.answers(["legacy": payload], now: now, connection: connection)
            switch answers.sql {
            case .accepted: accepted += 1
            case .rejected(let code, _, _): codes[code, default: 0] += 1
            }
            if answers.sql != answers.swiftOnStored {
                disagreements += 1
                if disagreements <= 10 {
                    Issue.record("generated #\(n): \(payload.serialized.prefix(400))\n  Swift: \(answers.swiftOnStored)\n  SQL:   \(answers.sql)")
                }
            }
        }
        #expect(disagreements == 0)
        // Both outcomes and every code must be exercised, or agreement proves little.
        #expect(accepted > 300 && accepted < 1700, "\(accepted) accepted")
        for code in ["InvalidJson", "InvalidParameters", "MissingRegistration", "InvalidTtl", "InvalidDataKey"] {
            #expect(codes[code, default: 0] >= 10, "\(codes)")
        }
    }
}

/// Legacy payloads made from the accepted cases by replacing, adding or removing a few members
/// with values that pass or break each rule.
struct LegacyGenerator {
    var random: SplitMix64
    let bases: [JSONObject]

    init(seed: UInt64, bases: [JSONObject]) {
        random = SplitMix64(seed: seed)
        self.bases = bases
    }

    static let strings: [JSONValue] = [
        "", "t", "tok-9", "/topics/news", "/topics/a b", "/topics/", "high", "normal", "HIGH", "#aabbcc", "red",
        "https://x.y/i.png", "http://x.y/i.png", "[\"a\",1,true]", "[1", "[null]", "{\"a\":1}", "007", "5", "-1", "0",
        "'a' IN Topics", "\"a\" in topics && \"b\" in TOPICS", "'a' in topics &&", "ünï \"q\" \\ \n", "gcm.x",
        .string(String(repeating: "k", count: 70)), "true", "1",
    ]
    static let numbers: [JSONValue] = [.number("0"), .number("1"), .number("2"), .number("-1"), .number("3600"), .number("1.5"),
                                       .number("2419200"), .number("2419201"), .number("1e3"), .number("7.0"), .number("1.50")]
    static let others: [JSONValue] = [
        true, false, nil, [], ["a"], ["a", 1], ["", "b"], [nil], [["x"]], [:], ["k": "v"], ["from": "x"], ["k": nil],
        ["title": "T"], ["n": 1, "o": ["z": 1, "a": [true]]],
    ]
    static let topKeys = LegacyTranslator.parameters + ["foo", "token"]
    static let notificationKeys = LegacyTranslator.notificationKeys + ["ticker"]
    static let dataKeys = ["k", "from", "gcm.x", "google", "collapse_key", "n", "message_type", "é"]

    mutating func pick<T>(_ items: [T]) -> T { items[Int(random.next() % UInt64(items.count))] }
    mutating func chance(_ p: Double) -> Bool { random.nextUnit() < p }

    mutating func value() -> JSONValue {
        switch random.next() % 10 {
        case 0...4: return pick(Self.strings)
        case 5, 6: return pick(Self.numbers)
        default: return pick(Self.others)
        }
    }

    mutating func next() -> JSONValue {
        var payload = pick(bases)
        for _ in 0..<(1 + Int(random.next() % 3)) {
            switch random.next() % 5 {
            case 4:
                payload["time_to_live"] = chance(0.8) ? pick(Self.numbers) : value()
            case 0:
                let key = pick(Self.topKeys)
                payload[key] = chance(0.15) ? nil : value()
            case 1:
                var notification = payload["notification"]?.objectValue ?? JSONObject()
                notification[pick(Self.notificationKeys)] = value()
                payload["notification"] = .object(notification)
            case 2:
                var data = payload["data"]?.objectValue ?? JSONObject()
                data[pick(Self.dataKeys)] = chance(0.6) ? pick(Self.strings) : value()
                payload["data"] = .object(data)
            case 3:
                // A target swapped for another, or a second one.
                if chance(0.7) { for key in ["to", "registration_ids", "condition", "notification_key"] { payload[key] = nil } }
                switch random.next() % 4 {
                case 0: payload["to"] = chance(0.8) ? pick(["t", "/topics/news", "/topics/a b", ""]) : value()
                case 1: payload["registration_ids"] = chance(0.8) ? ["a", "b"] : value()
                case 2: payload["condition"] = chance(0.8) ? pick(["'a' IN topics", "\"a\" in topics || 'b' in topics", "'a b' in topics"]) : value()
                default: payload["notification_key"] = chance(0.8) ? "group-key" : value()
                }
            default: break
            }
        }
        return .object(payload)
    }
}
