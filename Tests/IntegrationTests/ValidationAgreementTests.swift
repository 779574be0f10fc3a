import Foundation
import Testing
import FCM
import JSON
import Queue
import TestSupport

/// The Swift MessageValidator and herald.validate_message in PostgreSQL give the same answers:
/// same descriptions, same order, for every case of the validation table, every seed example and
/// a few thousand generated messages.
///
/// This test talks to the database through `psql`, as an application's own tooling would (migrations applied with `-f`, JSON fed through `\set` from files, so
/// no value is ever pasted into SQL text).
@Suite(.enabled(if: AgreementDatabase.url != nil, "no PostgreSQL to test against (set HERALD_TEST_DATABASE_URL, see .ci/pg)"))
struct ValidationAgreementTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    @Test func swiftAndSQLAgreeOnEveryCase() throws {
        var cases: [(name: String, text: String)] = []
        // Every case's allow-listed paths, in herald.message_extra_fields and in the Swift rules
        // alike (each case's paths are its own, so the others are judged as without them).
        var extraFields: Set<String> = []
        let table = try JSONValue.parse(String(contentsOf: Self.root.appendingPathComponent("Tests/Fixtures/FCM/validation-cases.json"), encoding: .utf8))
        for group in ["invalid", "valid"] {
            for item in table[group]!.arrayValue! {
                cases.append((item["name"]!.stringValue!, item["text"]?.stringValue ?? item["message"]!.serialized))
                extraFields.formUnion((item["extra_fields"]?.arrayValue ?? []).compactMap(\.stringValue))
            }
        }
        try #require(!extraFields.isEmpty)
        let seeds = try JSONValue.parse(String(contentsOf: Self.root.appendingPathComponent("Tests/Fixtures/FCM/seed-messages.json"), encoding: .utf8))
        for item in seeds["messages"]!.arrayValue! {
            cases.append((item["source"]!.stringValue!, item["message"]!.serialized))
        }
        var generator = MessageGenerator(seed: 20_240_601)
        for n in 0..<2500 {
            cases.append(("generated #\(n)", generator.next().serialized))
        }

        let database = try AgreementDatabase()
        defer { database.drop() }
        try database.allow(extraFields: extraFields)
        let rules = MessageValidator.rules.allowing(extraFields: extraFields)
        let answers = try database.validate(cases.map(\.text))
        try #require(answers.count == cases.count)

        var disagreements = 0
        var invalidCount = 0
        var generatedRules: [String: Int] = [:]
        for (index, c) in cases.enumerated() {
            let swiftIssues = rules.validate(try JSONValue.parse(c.text))
            let swift = swiftIssues.map(\.description)
            if c.name.hasPrefix("generated") { for issue in swiftIssues { generatedRules[issue.rule, default: 0] += 1 } }
            // The worker reads messages back from jsonb, whose text differs (key order, numbers).
            let swiftOnStored = rules.validate(try JSONValue.parse(answers[index].stored)).map(\.description)
            if !swift.isEmpty { invalidCount += 1 }
            if swift != answers[index].issues || swiftOnStored != swift {
                disagreements += 1
                if disagreements <= 10 {
                    Issue.record("""
                        \(c.name): \(c.text.prefix(300))
                          Swift:          \(swift)
                          Swift (jsonb):  \(swiftOnStored)
                          PostgreSQL:     \(answers[index].issues)
                        """)
                }
            }
        }
        #expect(disagreements == 0)
        // The generated messages must exercise both outcomes, or agreement proves little.
        #expect(invalidCount > cases.count / 4)
        #expect(invalidCount < cases.count * 3 / 4)
        let kinds = ["type", "one_target", "nonempty", "topic", "charset", "length", "condition", "duration", "enum",
                     "color", "https_url", "max_bytes", "reserved_key", "payload_size", "required", "forbidden", "unknown_field"]
        for kind in kinds {
            #expect(generatedRules[kind, default: 0] >= 5, "generated messages rarely break rule \(kind): \(generatedRules)")
        }
    }

    @Test func validateMessageRefusesToGuessWithoutRules() throws {
        let database = try AgreementDatabase(loadRules: false)
        defer { database.drop() }
        let output = try database.psql(script: "SELECT herald.validate_message('{}'::jsonb);\n", allowFailure: true)
        #expect(output.contains("no message rules are loaded"))
    }

    @Test func loadingRefusesUnknownChecks() throws {
        let database = try AgreementDatabase()
        defer { database.drop() }
        var rules = try JSONValue.parse(MessageRules.json).objectValue!
        var list = rules["rules"]!.arrayValue!
        list.append(["path": "token", "check": "palindrome"])
        rules["rules"] = .array(list)
        let file = database.directory.appendingPathComponent("bad-rules.json")
        try JSONValue.object(rules).serialized.write(to: file, atomically: true, encoding: .utf8)
        let output = try database.psql(script: """
            \\set rules `cat \(file.path)`
            SELECT herald.load_message_rules(:'rules'::jsonb);

            """, allowFailure: true)
        #expect(output.contains("unknown rule check \"palindrome\""))
    }
}

/// A throwaway database holding every migration, function and view, and the embedded rules.
struct AgreementDatabase {
    /// HERALD_TEST_DATABASE_URL, or the private cluster the tests start when it is not set.
    static var url: String? { try? TestDatabase.adminURL() }

    let adminURL: String
    let url: String
    let name: String
    let directory: URL

    init(loadRules: Bool = true) throws {
        guard let base = Self.url, var components = URLComponents(string: base) else {
            throw AgreementError("HERALD_TEST_DATABASE_URL is not set")
        }
        adminURL = base
        name = "herald_validation_\(getpid())_\(UInt32.random(in: 0...UInt32.max))"
        components.path = "/" + name
        url = components.string!
        directory = FileManager.default.temporaryDirectory.appendingPathComponent(name)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        _ = try Self.run(["psql", adminURL, "-X", "-q", "-v", "ON_ERROR_STOP=1", "-c", "CREATE DATABASE \(name)"])
        // The numbered migrations (those of the last release as released, then the newer ones,
        // when the run starts from it), then every function and view file, as docs/sql-layout.md
        // says a tool of one's own applies them.
        let root = ValidationAgreementTests.root
        func sql(_ folder: URL) throws -> [URL] {
            try FileManager.default.contentsOfDirectory(atPath: folder.path).filter { $0.hasSuffix(".sql") }.sorted()
                .map { folder.appendingPathComponent($0) }
        }
        func files(_ folder: URL) throws -> [String] { try sql(folder).flatMap { ["-f", $0.path] } }
        var migrations = try sql(root.appendingPathComponent("migrations"))
        if TestDatabase.startsFromRelease {
            let released = try sql(root.appendingPathComponent("Tests/Fixtures/ReleaseMigrations"))
            let names = Set(released.map(\.lastPathComponent))
            migrations = released + migrations.filter { !names.contains($0.lastPathComponent) }
        }
        _ = try Self.run(["psql", url, "-X", "-q", "-v", "ON_ERROR_STOP=1"] + migrations.flatMap { ["-f", $0.path] }
                         + ["-c", "SET check_function_bodies = off"]
                         + (try files(root.appendingPathComponent("Sources/Queue/SQL/functions")))
                         + (try files(root.appendingPathComponent("Sources/Queue/SQL/views"))))
        if loadRules {
            // What `herald migrate` does after the migrations: MessageRules.loadStatement with $1.
            let rules = directory.appendingPathComponent("rules.json")
            try MessageRules.json.write(to: rules, atomically: true, encoding: .utf8)
            _ = try psql(script: """
                \\set rules `cat \(rules.path)`
                SELECT herald.load_message_rules(:'rules'::jsonb);

                """)
        }
    }

    func drop() {
        _ = try? Self.run(["psql", adminURL, "-X", "-q", "-c", "DROP DATABASE IF EXISTS \(name) WITH (FORCE)"])
        try? FileManager.default.removeItem(at: directory)
    }

    /// Adds `paths` to herald.message_extra_fields (as a JSON array through psql, never pasted in).
    func allow(extraFields paths: Set<String>) throws {
        let file = directory.appendingPathComponent("extra-fields.json")
        try JSONValue.array(paths.sorted().map { .string($0) }).serialized.write(to: file, atomically: true, encoding: .utf8)
        _ = try psql(script: """
            \\set paths `cat \(file.path)`
            INSERT INTO herald.message_extra_fields (path) SELECT jsonb_array_elements_text(:'paths'::jsonb);

            """)
    }

    /// herald.validate_message of each message, and the message as jsonb prints it.
    func validate(_ messages: [String]) throws -> [(issues: [String], stored: String)] {
        let file = directory.appendingPathComponent("cases.json")
        try ("[" + messages.joined(separator: ",\n") + "]").write(to: file, atomically: true, encoding: .utf8)
        let output = try psql(script: """
            \\set cases `cat \(file.path)`
            SELECT coalesce(jsonb_agg(jsonb_build_object('issues', to_jsonb(herald.validate_message(c)), 'stored', c::text) ORDER BY o), '[]')
            FROM jsonb_array_elements(:'cases'::jsonb) WITH ORDINALITY AS x(c, o);

            """)
        let lines = output.split(separator: "\n").filter { !$0.isEmpty }
        guard let last = lines.last else { throw AgreementError("psql printed nothing") }
        return try JSONValue.parse(String(last)).arrayValue!.map { item in
            (item["issues"]!.arrayValue!.map { $0.stringValue! }, item["stored"]!.stringValue!)
        }
    }

    func psql(script: String, allowFailure: Bool = false) throws -> String {
        try Self.run(["psql", url, "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1"], input: script, allowFailure: allowFailure)
    }

    /// Runs a command, feeding `input`; stdout (and stderr when `allowFailure`) as text.
    static func run(_ arguments: [String], input: String = "", allowFailure: Bool = false) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = arguments
        // stderr goes to a file, so only one pipe needs draining while the child runs.
        let errorFile = FileManager.default.temporaryDirectory.appendingPathComponent("herald-psql-\(UUID().uuidString).err")
        _ = FileManager.default.createFile(atPath: errorFile.path, contents: nil)
        defer { try? FileManager.default.removeItem(at: errorFile) }
        let errorHandle = try FileHandle(forWritingTo: errorFile)
        let stdin = Pipe(), stdout = Pipe()
        process.standardInput = stdin
        process.standardOutput = stdout
        process.standardError = errorHandle
        try process.run()
        stdin.fileHandleForWriting.write(Data(input.utf8))
        try stdin.fileHandleForWriting.close()
        let out = stdout.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        try errorHandle.close()
        let outText = String(decoding: out, as: UTF8.self)
        let errorText = (try? String(contentsOf: errorFile, encoding: .utf8)) ?? ""
        if process.terminationStatus != 0 && !allowFailure {
            throw AgreementError("\(arguments.prefix(3).joined(separator: " ")) failed (\(process.terminationStatus)): \(errorText)")
        }
        return allowFailure ? outText + errorText : outText
    }
}

struct AgreementError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// Random messages shaped by the rule list: members at the paths the rules name, with values
/// that pass or break each kind of check, sometimes of the wrong type, sometimes missing, plus
/// members no rule knows.
struct MessageGenerator {
    var random: SplitMix64
    /// Every path the rules name, with a value that passes its rules and some that break them.
    let paths: [(path: [String], good: JSONValue, bad: [JSONValue])]

    init(seed: UInt64) {
        random = SplitMix64(seed: seed)
        let rules = try! JSONValue.parse(MessageRules.json)
        var seen: [(path: [String], good: JSONValue, bad: [JSONValue])] = []
        for rule in rules["rules"]!.arrayValue! {
            let path = rule["path"]!.stringValue!
            guard !path.isEmpty, rule["presence"] == nil else { continue }
            let segments = path.split(separator: ".").map(String.init)
            guard !seen.contains(where: { $0.path == segments }) else { continue }
            seen.append((segments, Self.goodValue(rule), Self.badValues(rule)))
        }
        paths = seen
    }

    static func badValues(_ rule: JSONValue) -> [JSONValue] {
        switch rule["check"]?.stringValue {
        case "enum"?: return ["bogus", "high"]
        case "duration"?: return ["1h", "2419201s", "1.0123456789s", "3600"]
        case "color"?: return ["#fff", "red"]
        case "https_url"?: return ["http://x.y/z.png", "https://a b", "breakingnews.html"]
        case "charset"?: return rule["charset"]?.stringValue == "digits" ? ["12a", ""] : ["a/b", "", .string(String(repeating: "l", count: 51))]
        case "topic"?: return ["/topics/news", "a b", ""]
        case "nonempty"?: return [""]
        case "max_bytes"?: return [.string(String(repeating: "x", count: 65)), .string(String(repeating: "é", count: 33))]
        case "condition"?: return ["'a' in topics &&", "('a' in topics", "'a b' in topics", "'a' intopics", "  ",
                                   "'a' in topics || 'b' in topics || 'c' in topics || 'd' in topics || 'e' in topics || 'f' in topics"]
        case "data_map"?: return [["from": "x"], ["gcm.x": "1", "k": 2], ["a b": true]]
        case "string_map"?: return [["apns-priority": 10], ["k": ["x"]]]
        case "string_array"?: return [["a", 1], [nil]]
        default: return [1.5, "text", [:], [], false]
        }
    }

    static func goodValue(_ rule: JSONValue) -> JSONValue {
        switch rule["check"]?.stringValue {
        case "enum"?: return rule["values"]!.arrayValue!.first!
        case "duration"?: return "3600s"
        case "color"?: return "#a0b1c2"
        case "https_url"?: return "https://foo.bar/x.png"
        case "charset"?, "topic"?: return rule["charset"]?.stringValue == "digits" ? "1700000000" : "news"
        case "condition"?: return "'a' in topics && !('b' in topics)"
        case "data_map"?, "string_map"?: return ["k": "v"]
        case "string_array"?: return ["a", "b"]
        default: break
        }
        let type = rule["type"]?.stringValue ?? rule["type"]?.arrayValue?.first?.stringValue
        switch type {
        case "object"?: return [:]
        case "integer"?, "number"?: return 7
        case "boolean"?: return true
        case "array"?: return []
        default: return "abc"
        }
    }

    mutating func pick<T>(_ items: [T]) -> T { items[Int(random.next() % UInt64(items.count))] }
    mutating func chance(_ p: Double) -> Bool { random.nextUnit() < p }

    static let strings: [String] = [
        "", "a", "abc", "news", "breaking news", "/topics/news", "3600s", "0s", "2419200s", "2419201s", "1.5s", "-1s",
        "1.0123456789s", "99999999999999999999s", "#a0b1c2", "#FFF", "#12345g", "https://foo.bar/pizza-monster.png",
        "HTTPS://X", "http://x.y", "https://", "https:///x", "https://a b", "NORMAL", "HIGH", "high", "1", "5", "10", "7",
        "start", "update", "end", "stop", "alert", "liveactivity", "voip", "0123", "tomorrow", String(repeating: "x", count: 65),
        String(repeating: "é", count: 70), "a\nb\u{1}\"c\\", "tab\there", "ünïcödé", "google.c.a", "gcm.x", "from",
        "'a' in topics", "'a' in topics && 'b' in topics", "!('a' in topics) || ('b' in topics && 'c' in topics)",
        "'a' in topics &&", "('a' in topics", "'a' in topics)", "'a b' in topics", "'a' intopics", "'a' in topics & 'b' in topics",
        "'a' in topics || 'b' in topics || 'c' in topics || 'd' in topics || 'e' in topics || 'f' in topics",
        "  ", "\"a\" in topics", "'' in topics", "'a' in", "'unterminated in topics", "label_1.2~%", "a/b",
        String(repeating: "l", count: 51), "{value}", "{max} {", "k\u{7f}",
    ]
    static let numbers = ["0", "-0", "1", "-7", "42", "1.0", "1.50", "1e3", "2.5E-3", "1.20000e4", "12345678901234567890",
                          "1700000000", "0.1", "-1.5e-7", "3600"]
    static let keys = ["a", "b", "from", "notification", "message_type", "google", "googlex", "gcm.n.e", "Google", "fromage",
                       "a b", "", "a.b", "k\"q", "é", "x-y_z", "z", "TTL", "apns-priority", "apns-push-type",
                       "apns-expiration", "apns-collapse-id", "event"]

    mutating func scalar() -> JSONValue {
        switch random.next() % 10 {
        case 0...5: return .string(pick(Self.strings))
        case 6, 7: return .number(pick(Self.numbers))
        case 8: return .bool(chance(0.5))
        default: return .null
        }
    }

    mutating func value(depth: Int = 0) -> JSONValue {
        switch random.next() % 12 {
        case 0...7: return scalar()
        case 8, 9:
            guard depth < 3 else { return scalar() }
            var object = JSONObject()
            for _ in 0..<Int(random.next() % 4) { object[pick(Self.keys)] = chance(0.7) ? .string(pick(Self.strings)) : value(depth: depth + 1) }
            return .object(object)
        default:
            guard depth < 3 else { return scalar() }
            return .array((0..<Int(random.next() % 4)).map { _ in chance(0.7) ? .string(pick(Self.strings)) : value(depth: depth + 1) })
        }
    }

    mutating func next() -> JSONValue {
        var message = JSONObject()
        // Usually one target, sometimes none or several.
        let targets = paths.filter { $0.path.count == 1 && ["token", "topic", "condition", "fid"].contains($0.path[0]) }
        let targetCount = chance(0.85) ? 1 : Int(random.next() % 3) * (chance(0.5) ? 1 : 2)
        for _ in 0..<targetCount {
            let (path, good, bad) = pick(targets)
            message[path[0]] = chance(0.8) ? good : chance(0.7) ? pick(bad) : scalar()
        }
        if chance(0.3) {
            // A Live Activity, mostly well formed.
            var aps = JSONObject()
            let event = pick(["start", "update", "end", "start", "update", "end", "stop"])
            if chance(0.95) { aps["event"] = .string(event) }
            if chance(0.95) { aps["timestamp"] = chance(0.95) ? 1_700_000_000 : scalar() }
            if chance(0.9) { aps["content-state"] = chance(0.95) ? ["k": 1] : value() }
            if event == "start" || chance(0.1) {
                if chance(0.85) { aps["attributes-type"] = "DemoAttributes" }
                if chance(0.85) { aps["attributes"] = ["a": 1] }
            }
            if event == "end" ? chance(0.5) : chance(0.15) { aps["dismissal-date"] = chance(0.9) ? 1_700_003_600 : scalar() }
            var apns = JSONObject()
            if chance(0.9) { apns["live_activity_token"] = chance(0.95) ? "la-token" : scalar() }
            if chance(0.9) { apns["payload"] = chance(0.9) ? ["aps": .object(aps)] : ["custom": 1] }
            if chance(0.5) { apns["headers"] = ["apns-priority": chance(0.9) ? "10" : scalar()] }
            message["apns"] = .object(apns)
        }
        for _ in 0..<Int(random.next() % 7) {
            let (path, good, bad) = pick(paths)
            let leaf: JSONValue = chance(0.75) ? good : chance(0.6) ? pick(bad) : chance(0.5) ? .string(pick(Self.strings)) : value()
            set(&message, path[...], leaf)
        }
        if chance(0.15) {
            // A map rule: data blocks and header maps with assorted keys and values.
            let path = pick([["data"], ["android", "data"], ["webpush", "data"], ["apns", "headers"], ["webpush", "headers"]])
            var map = JSONObject()
            for _ in 0..<Int(random.next() % 5) { map[pick(Self.keys)] = chance(0.75) ? .string(pick(Self.strings)) : value() }
            set(&message, path[...], .object(map))
        }
        if chance(0.05) {
            // Near the payload limits.
            let size = pick([2040, 2048, 2049, 4090, 4096, 4097, 5000])
            set(&message, pick([["data"], ["notification"], ["android", "data"], ["apns", "payload"]])[...],
                ["blob": .string(String(repeating: "x", count: size - 4))])
        }
        if chance(0.05) { message["future_field"] = value() }
        if chance(0.1) {
            // A misspelt member somewhere down a path the rules know: a closed object reports it,
            // an open one (data, aps, ...) lets it through.
            var (path, good, _) = pick(paths)
            path[path.count - 1] = misspell(path[path.count - 1])
            set(&message, path[...], good)
        }
        if message["android"] != nil && message["android_v2"] != nil && chance(0.85) {
            // The two Android blocks exclude each other; keep both only now and then.
            message[chance(0.5) ? "android" : "android_v2"] = nil
        }
        if chance(0.02) { return value() }
        return .object(message)
    }

    /// `name` with one slip: a letter dropped, doubled or upper-cased, two swapped, or far off.
    mutating func misspell(_ name: String) -> String {
        var letters = Array(name)
        let i = Int(random.next() % UInt64(letters.count))
        switch random.next() % 5 {
        case 0: letters.remove(at: i)
        case 1: letters.insert(letters[i], at: i)
        case 2: letters[i] = Character(letters[i].uppercased())
        case 3 where i + 1 < letters.count: letters.swapAt(i, i + 1)
        default: return "x_" + name + "_unheard_of"
        }
        return String(letters)
    }

    /// Sets `path` in `object`, creating objects on the way (and now and then finding a
    /// non-object in the way, which the rules must skip).
    func set(_ object: inout JSONObject, _ path: ArraySlice<String>, _ leaf: JSONValue) {
        guard let key = path.first else { return }
        if path.count == 1 {
            object[key] = leaf
            return
        }
        var inner: JSONObject
        switch object[key] {
        case .object(let existing)?: inner = existing
        case nil: inner = JSONObject()
        default: return
        }
        set(&inner, path.dropFirst(), leaf)
        object[key] = .object(inner)
    }
}
