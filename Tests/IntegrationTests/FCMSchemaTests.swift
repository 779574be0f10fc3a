import Foundation
import Testing
import FCM
import JSON
import TestSupport

/// The rule file against Google's published FCM v1 discovery document, read at test time from the
/// PyPI package google-api-python-client (`googleapiclient/discovery_cache/documents/fcm.v1.json`)
/// in the tests' virtual environment. Moving to a new revision is: upgrade the package, run these
/// tests, add to the rule file what they name (docs/fcm-schema.md).
@Suite(.serialized, .enabled(if: AgreementDatabase.url != nil, "no PostgreSQL to test against"))
struct FCMSchemaTests {
    @Test func theRuleFileNamesExactlyTheFieldsOfThePublishedDocument() throws {
        let document = try DiscoveryDocument.load()
        let rules = try RuleFile(MessageRules.json)
        let differences = document.differences(from: rules)
        for difference in differences { Issue.record("\(difference)") }
        #expect(differences.isEmpty, "fcm.v1.json revision \(document.revision): \(differences.count) differences")
        // A document read wrongly would agree with nothing and prove nothing.
        #expect(document.fields.count > 100, "\(document.fields.count) documented field paths")
        #expect(document.fields.contains { $0.path == "message.android_v2.remote_notification.notification.id" })
    }

    /// The comparison names each path that differs: a rule file without a documented field, with a
    /// field the document lacks, with a wrong type or wrong enum values.
    @Test func aRuleFileThatDiffersIsToldEachPath() throws {
        let document = try DiscoveryDocument.load()
        var text = MessageRules.json
        for (old, new) in [
            (#""image", "id"]"#, #""image"]"#),
            (#"{"path": "android_v2.direct_boot_ok", "type": "boolean"}"#, #"{"path": "android_v2.direct_boot_ok", "type": "string"}"#),
            (#""fields": ["analytics_label"]}"#, #""fields": ["analytics_label", "analytics_id"]}"#),
            (#""values": ["NORMAL", "HIGH"]"#, #""values": ["NORMAL", "HIGH", "URGENT"]"#),
        ] {
            try #require(text.contains(old), "\(old)")
            text = text.replacingOccurrences(of: old, with: new)
        }
        let differences = document.differences(from: try RuleFile(text))
        for path in ["message.android_v2.remote_notification.notification.id: documented",
                     "message.android_v2.direct_boot_ok: the document says boolean, the rule file string",
                     "message.fcm_options.analytics_id: in the rule file's known_fields but not in the document",
                     "message.android.priority: the document's values"] {
            #expect(differences.contains { $0.hasPrefix(path) }, "\(path) not among \(differences)")
        }
    }

    @Test func everyDocumentedFieldIsAcceptedAndEveryMisspeltOneRefusedBySwiftAndSQLAlike() throws {
        let document = try DiscoveryDocument.load()
        let rules = try RuleFile(MessageRules.json)
        var cases: [(name: String, message: JSONValue, misspelt: String?)] = []
        for field in document.fields {
            cases.append((field.path, sampleMessage(for: field, rules: rules, key: nil), nil))
            let wrong = misspell(field.name)
            cases.append((field.path + " misspelt", sampleMessage(for: field, rules: rules, key: wrong), wrong))
        }
        let database = try AgreementDatabase()
        defer { database.drop() }
        let answers = try database.validate(cases.map(\.message.serialized))
        try #require(answers.count == cases.count)
        var accepted = 0
        var refusedWithHint = 0
        for (index, c) in cases.enumerated() {
            let swift = MessageValidator.validate(c.message).map(\.description)
            let sql = answers[index].issues
            #expect(swift == sql, "\(c.name): Swift \(swift), PostgreSQL \(sql) for \(c.message.serialized)")
            if let wrong = c.misspelt {
                let field = document.fields[index / 2]
                let parent = field.path.split(separator: ".").dropLast().joined(separator: ".")
                let expected = "\(parent).\(wrong): unknown field; did you mean \"\(field.name)\"?"
                if swift.contains(expected) { refusedWithHint += 1 } else { Issue.record("\(c.name): expected \(expected), got \(swift)") }
            } else if swift.isEmpty {
                accepted += 1
            } else {
                Issue.record("documented field \(c.name) refused: \(swift) for \(c.message.serialized)")
            }
        }
        #expect(accepted == document.fields.count)
        #expect(refusedWithHint == document.fields.count)
        print("fcm.v1.json revision \(document.revision): \(accepted) documented field paths accepted, \(refusedWithHint) misspellings refused with the right hint, by Swift and PostgreSQL alike")
    }

    @Test func androidWithAndroidV2TwoTargetsAndUnknownV2FieldsAreRefusedNamingThePath() throws {
        let cases: [(String, [String])] = [
            (#"{"token":"t","android":{},"android_v2":{}}"#,
             ["message.android_v2: cannot be set together with message.android; android and android_v2 are mutually exclusive, keep one"]),
            (#"{"token":"t","fid":"f"}"#,
             ["message: more than one target (token, fid); set exactly one of token, topic, condition, fid"]),
            (#"{"fid":"f","android_v2":{"notification":{"title":"x"}}}"#,
             [#"message.android_v2.notification: unknown field"#]),
            (#"{"fid":"f","android_v2":{"remote_notification":{"notificaton":{}}}}"#,
             [#"message.android_v2.remote_notification.notificaton: unknown field; did you mean "notification"?"#]),
        ]
        let database = try AgreementDatabase()
        defer { database.drop() }
        let answers = try database.validate(cases.map(\.0))
        for (index, (text, expected)) in cases.enumerated() {
            #expect(MessageValidator.validate(try JSONValue.parse(text)).map(\.description) == expected, "\(text)")
            #expect(answers[index].issues == expected, "\(text)")
        }
    }

    // MARK: samples

    /// A message holding `field` with a value its documented type and the rule file's checks take
    /// (or, with `key`, the same value under the misspelt name), plus a token target unless the
    /// field is a target.
    func sampleMessage(for field: DocumentedField, rules: RuleFile, key: String?) -> JSONValue {
        var segments = Array(field.path.split(separator: ".").dropFirst().map(String.init))
        if let key { segments[segments.count - 1] = key }
        var message = JSONObject()
        let isTarget = ["token", "topic", "condition", "fid"].contains(field.name) && segments.count == 1
        if !isTarget || key != nil { message["token"] = "device-token-1" }
        set(&message, segments[...], sampleValue(for: field, rules: rules))
        // A Live Activity token needs its aps (the rule file's presence rules).
        if field.path == "message.apns.live_activity_token" && key == nil {
            var apns = message["apns"]?.objectValue ?? JSONObject()
            apns["payload"] = ["aps": ["event": "end", "timestamp": 1_700_000_000]]
            message["apns"] = .object(apns)
        }
        return .object(message)
    }

    func sampleValue(for field: DocumentedField, rules: RuleFile) -> JSONValue {
        let rule = field.path.dropFirst("message.".count)
        if let values = rules.enums[String(rule)], let last = values.last { return .string(last) }
        switch field.type {
        case "boolean": return true
        case "integer": return 3
        case "number": return .number("0.5")
        case "array": return [field.itemFormat == "google-duration" ? "0.5s" : "text"]
        case "object": return field.closed ? .object(JSONObject()) : ["k": "v"]
        default:
            switch rules.checks[String(rule)] {
            case "duration": return "3600s"
            case "color": return "#3366cc"
            case "https_url": return "https://example.com/a.png"
            case "charset": return "label-1"
            case "topic": return "news"
            case "condition": return "'news' in topics"
            default:
                switch field.format {
                case "google-duration": return "1.5s"
                case "google-datetime": return "2026-10-23T10:00:00Z"
                default: return "text"
                }
            }
        }
    }

    /// `name` with its last two characters swapped (or its last one dropped when they are alike).
    func misspell(_ name: String) -> String {
        var letters = Array(name)
        if letters.count >= 2 && letters[letters.count - 1] != letters[letters.count - 2] {
            letters.swapAt(letters.count - 1, letters.count - 2)
        } else {
            letters.removeLast()
        }
        return String(letters)
    }

    func set(_ object: inout JSONObject, _ path: ArraySlice<String>, _ leaf: JSONValue) {
        guard let key = path.first else { return }
        if path.count == 1 {
            object[key] = leaf
            return
        }
        var inner = object[key]?.objectValue ?? JSONObject()
        set(&inner, path.dropFirst(), leaf)
        object[key] = .object(inner)
    }
}

/// One field path of the document, named as the rule file names it (`message.android_v2.ttl`).
struct DocumentedField: CustomStringConvertible {
    var path: String
    var name: String
    /// string, boolean, integer, number, array or object.
    var type: String
    /// An object of a documented message type (its fields are known); false for a map.
    var closed: Bool
    var format: String?
    var itemFormat: String?
    var enumValues: [String]?
    var description: String { path }
}

/// The fields of `fcm.v1.json` reachable from `Message`.
struct DiscoveryDocument {
    var revision: String
    var fields: [DocumentedField] = []

    /// The release of google-api-python-client whose document the rule file was last checked
    /// against. Pinned, so a new Google revision turns the suite red when someone moves to it
    /// (docs/fcm-schema.md), not on the day PyPI publishes it.
    static let packageVersion = "2.202.0"

    /// The document shipped in google-api-python-client, installed into the tests' environment.
    static func load() throws -> DiscoveryDocument {
        let python = try PythonEnvironment.python(importing: ["googleapiclient"],
                                                  packages: ["google-api-python-client==\(packageVersion)"])
        let (status, output) = try PythonEnvironment.run(python, ["-c", """
            import os, googleapiclient
            print(os.path.join(os.path.dirname(googleapiclient.__file__), "discovery_cache", "documents", "fcm.v1.json"))
            """])
        guard status == 0 else { throw TestFailure("cannot locate fcm.v1.json: \(output)") }
        let path = output.trimmingCharacters(in: .whitespacesAndNewlines)
        let json = try JSONValue.parse(String(contentsOfFile: path, encoding: .utf8))
        guard let schemas = json["schemas"]?.objectValue, let revision = json["revision"]?.stringValue else {
            throw TestFailure("\(path) has no schemas or revision")
        }
        var document = DiscoveryDocument(revision: revision)
        document.walk(schema: "Message", prefix: "message", schemas: schemas, depth: 0)
        return document
    }

    mutating func walk(schema name: String, prefix: String, schemas: JSONObject, depth: Int) {
        guard depth < 8, let properties = schemas[name]?["properties"]?.objectValue else { return }
        for property in properties.members.sorted(by: { $0.key < $1.key }) {
            let key = Self.snakeCase(property.key)
            let path = prefix + "." + key
            let value = property.value
            if let reference = value["$ref"]?.stringValue {
                fields.append(DocumentedField(path: path, name: key, type: "object", closed: true))
                walk(schema: reference, prefix: path, schemas: schemas, depth: depth + 1)
                continue
            }
            let type = value["type"]?.stringValue ?? "any"
            fields.append(DocumentedField(path: path, name: key, type: type, closed: false,
                                          format: value["format"]?.stringValue,
                                          itemFormat: value["items"]?["format"]?.stringValue,
                                          enumValues: value["enum"]?.arrayValue?.compactMap(\.stringValue)))
        }
    }

    /// Proto JSON's lowerCamelCase name as the reference (and the rule file) writes it.
    static func snakeCase(_ name: String) -> String {
        var out = ""
        for character in name {
            if character.isUppercase {
                out += "_" + character.lowercased()
            } else {
                out.append(character)
            }
        }
        return out
    }

    /// Each place where the rule file and the document disagree, naming the path.
    func differences(from rules: RuleFile) -> [String] {
        var found: [String] = []
        let documented = Dictionary(fields.map { ($0.path, $0) }, uniquingKeysWith: { a, _ in a })
        for field in fields {
            let parent = field.path.split(separator: ".").dropLast().joined(separator: ".")
            if !(rules.known[parent]?.contains(field.name) ?? false) {
                found.append("\(field.path): documented (revision \(revision)) but not in the rule file's known_fields of \(parent)")
                continue
            }
            let rule = String(field.path.dropFirst("message.".count))
            if field.type == "object" && field.closed && rules.known[field.path] == nil {
                found.append("\(field.path): a documented message type, but the rule file has no known_fields rule closing it")
            }
            if field.type == "object" && !field.closed && rules.known[field.path] != nil {
                found.append("\(field.path): a free-form map in the document, but the rule file closes it with known_fields")
            }
            if let types = rules.types[rule] {
                if !types.contains(field.type) {
                    found.append("\(field.path): the document says \(field.type), the rule file \(types.joined(separator: " or "))")
                }
            } else {
                found.append("\(field.path): documented as \(field.type), but the rule file has no type rule for it")
            }
            if let values = field.enumValues {
                if let ruled = rules.enums[rule] {
                    if Set(ruled) != Set(values) {
                        found.append("\(field.path): the document's values \(values.sorted()), the rule file's \(ruled.sorted())")
                    }
                } else {
                    found.append("\(field.path): the document lists values \(values), but the rule file has no enum rule for it")
                }
            }
        }
        for (parent, names) in rules.known.sorted(by: { $0.key < $1.key }) {
            for name in names where documented[parent + "." + name] == nil {
                found.append("\(parent).\(name): in the rule file's known_fields but not in the document (revision \(revision))")
            }
        }
        return found
    }
}

/// What the rule file says about each path: the names its known_fields rules list, and its types,
/// enum values and checks.
struct RuleFile {
    /// `message.android` -> the member names its known_fields rule lists.
    var known: [String: [String]] = [:]
    var types: [String: [String]] = [:]
    var enums: [String: [String]] = [:]
    var checks: [String: String] = [:]

    init(_ text: String) throws {
        let json = try JSONValue.parse(text)
        for rule in json["rules"]?.arrayValue ?? [] {
            guard let path = rule["path"]?.stringValue, rule["presence"] == nil else { continue }
            if let type = rule["type"] {
                types[path] = type.stringValue.map { [$0] } ?? type.arrayValue?.compactMap(\.stringValue) ?? []
            }
            guard let check = rule["check"]?.stringValue else { continue }
            checks[path] = check
            if check == "known_fields" {
                known[path.isEmpty ? "message" : "message." + path] = rule["fields"]?.arrayValue?.compactMap(\.stringValue) ?? []
            }
            if check == "enum" { enums[path] = rule["values"]?.arrayValue?.compactMap(\.stringValue) ?? [] }
        }
    }
}
