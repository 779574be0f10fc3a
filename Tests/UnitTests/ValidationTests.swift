import Testing
@testable import FCM
import JSON

extension FCMFixtures {
    struct ValidationCase: CustomTestStringConvertible, Sendable {
        var name: String
        var message: JSONValue
        var issues: [ValidationIssue]
        /// Paths of herald.message_extra_fields the case is judged with.
        var extraFields: Set<String>
        var testDescription: String { name }
    }

    /// `invalid` or `valid` cases of validation-cases.json.
    static func validationCases(_ group: String) throws -> [ValidationCase] {
        try load("validation-cases.json")[group]!.arrayValue!.map { item in
            let message: JSONValue
            if let text = item["text"]?.stringValue { message = try JSONValue.parse(text) } else { message = item["message"]! }
            let issues = item["issues"]!.arrayValue!.map { triple in
                let parts = triple.arrayValue!.map { $0.stringValue! }
                return ValidationIssue(field: parts[0], rule: parts[1], description: parts[2])
            }
            let extra = Set((item["extra_fields"]?.arrayValue ?? []).compactMap(\.stringValue))
            return ValidationCase(name: item["name"]!.stringValue!, message: message, issues: issues, extraFields: extra)
        }
    }
}

@Suite struct ValidationTests {
    static let invalid = (try? FCMFixtures.validationCases("invalid")) ?? []
    static let valid = (try? FCMFixtures.validationCases("valid")) ?? []

    @Test func theTableCoversEveryRuleKind() {
        #expect(Self.invalid.count >= 30)
        let rules = Set(Self.invalid.flatMap { $0.issues.map(\.rule) })
        for rule in ["type", "one_target", "nonempty", "topic", "charset", "length", "condition", "duration", "enum",
                     "color", "https_url", "max_bytes", "reserved_key", "payload_size", "required", "forbidden", "unknown_field"] {
            #expect(rules.contains(rule), "no invalid case for rule \(rule)")
        }
    }

    @Test(arguments: invalid)
    func invalidMessage(_ c: FCMFixtures.ValidationCase) {
        let issues = MessageValidator.validate(c.message, extraFields: c.extraFields)
        #expect(issues == c.issues)
    }

    @Test(arguments: valid)
    func validMessage(_ c: FCMFixtures.ValidationCase) {
        #expect(MessageValidator.validate(c.message, extraFields: c.extraFields) == [])
    }

    @Test func extraFieldsAreWhatMakesThoseCasesValid() throws {
        // Without the allow-list the same messages are refused, naming each extra field.
        for c in Self.valid where !c.extraFields.isEmpty {
            let refused = Set(MessageValidator.validate(c.message).map(\.field))
            #expect(refused == c.extraFields, "\(c.name)")
        }
    }

    @Test(arguments: [
        ("tll", "ttl"), ("TTL", "ttl"), ("ttl", "ttl"), ("titel", "title"), ("bdoy", "body"), ("colour", "color"),
        ("clickAction", "click_action"), ("restrictedPackageName", "restricted_package_name"), ("imag", "image"),
        ("notifcation", "notification"), ("tokens", "token"), ("tl", "ttl"),
    ])
    func closeNamesAreSuggested(_ typed: String, _ meant: String) throws {
        let known = KnownFields(["ttl", "title", "body", "color", "click_action", "restricted_package_name", "image",
                                 "notification", "token", "topic", "icon", "tag"])
        #expect(known.suggestion(for: typed) == meant)
    }

    @Test(arguments: ["x", "future_field", "priority", "a b", "", "tttttl", "ünïcödé", String(repeating: "title", count: 40)])
    func farNamesGetNoSuggestion(_ typed: String) {
        let known = KnownFields(["ttl", "title", "body", "color", "tag"])
        #expect(known.suggestion(for: typed) == nil)
    }

    @Test func suggestionTiesGoToTheNameListedFirst() {
        // "tig" is one edit from both "tag" and "tip".
        #expect(KnownFields(["tag", "tip"]).suggestion(for: "tig") == "tag")
        #expect(KnownFields(["tip", "tag"]).suggestion(for: "tig") == "tip")
    }

    @Test func embeddedRulesAreTheRepositoryFile() throws {
        let file = try String(contentsOf: FCMFixtures.directory.deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Sources/FCM/Rules/message-rules.json"), encoding: .utf8)
        #expect(MessageRules.json == file)
        #expect(try JSONValue.parse(MessageRules.json)["format"]?.intValue == MessageRules.format)
    }

    @Test func unknownRuleKindsAreRefused() throws {
        var rules = try JSONValue.parse(MessageRules.json).objectValue!
        var list = rules["rules"]!.arrayValue!
        list.append(["path": "token", "check": "palindrome"])
        rules["rules"] = .array(list)
        do {
            _ = try MessageRuleSet(json: JSONValue.object(rules).serialized)
            Issue.record("a rule list with an unknown check compiled")
        } catch {
            #expect(error.description.contains("palindrome"))
        }
        rules["format"] = 2
        #expect(throws: RuleDefinitionError.self) { try MessageRuleSet(json: JSONValue.object(rules).serialized) }
    }

    @Test func ruleMessagesCanBeReworded() throws {
        // The descriptions come from the rule list, not from code.
        var rules = try JSONValue.parse(MessageRules.json).objectValue!
        var messages = rules["messages"]!.objectValue!
        messages["duration.format"] = "{value} ist keine Dauer"
        rules["messages"] = .object(messages)
        let set = try MessageRuleSet(json: JSONValue.object(rules).serialized)
        let issues = set.validate(["token": "t", "android": ["ttl": "abc"]])
        #expect(issues.map(\.description) == [#"message.android.ttl: "abc" ist keine Dauer"#])
    }

    // MARK: the pieces

    @Test(arguments: [
        ("1.50", "1.50", 4, false), ("1e3", "1000", 4, true), ("1.5e3", "1500", 4, true), ("1.2345e2", "123.45", 6, false),
        ("-0", "0", 1, true), ("-0.0", "0.0", 3, true), ("1e-2", "0.01", 4, false), ("0.00", "0.00", 4, true),
        ("1E+2", "100", 3, true), ("12345678901234567890.5", "12345678901234567890.5", 22, false),
        ("1.0e-10", "0.00000000010", 13, false), ("0e5", "0", 1, true), ("-1.20e1", "-12.0", 5, true), ("100e-2", "1.00", 4, true),
        ("42", "42", 2, true), ("-7", "-7", 2, true),
    ])
    func numbersReadAsPostgreSQLPrintsThem(_ literal: String, _ text: String, _ length: Int, _ integral: Bool) throws {
        let decimal = try #require(DecimalLiteral(literal))
        #expect(decimal.canonicalText(limit: 64, ellipsis: "…") == text)
        #expect(decimal.canonicalLength == length)
        #expect(decimal.isIntegral == integral)
    }

    @Test func longNumbersAreCut() throws {
        let decimal = try #require(DecimalLiteral("1e70"))
        #expect(decimal.canonicalLength == 71)
        #expect(decimal.canonicalText(limit: 5, ellipsis: "…") == "10000…")
    }

    @Test func quotingMatchesPostgreSQLToJSON() {
        #expect(Text.quote("a\"b\\c/\u{8}\u{c}\n\r\t\u{1}\u{1f}\u{7f}é") == #""a\"b\\c/\b\f\n\r\t\u0001\u001f"# + "\u{7f}é\"")
    }

    @Test func templatesFillInOnePass() {
        #expect(Text.fill("{a} and {b} {unknown} {", [("a", "{b}"), ("b", "B")]) == "{b} and B {unknown} {")
    }

    @Test(arguments: [
        ("3600s", nil), ("0s", nil), ("0.000000001s", nil), ("2419200s", nil), ("2419200.000s", nil),
        ("2419200.001s", .range), ("2419201s", .range), ("s", .format), ("1.s", .format), (".5s", .format),
        ("1.5", .format), ("1 s", .format), ("1.1234567891s", .format), ("+1s", .format), ("", .format),
    ] as [(String, Checks.DurationProblem?)])
    func durations(_ text: String, _ problem: Checks.DurationProblem?) {
        #expect(Checks.duration(text, max: 2_419_200) == problem)
    }

    @Test(arguments: [
        ("https://a", true), ("HTTPS://A/b?c#d", true), ("https://foo.bar/pizza-monster.png", true),
        ("http://a", false), ("https://", false), ("https:///x", false), ("https://?q", false),
        ("https://a b", false), ("https://a\u{7f}", false), (" https://a", false), ("ftp://a", false),
    ])
    func httpsURLs(_ text: String, _ valid: Bool) {
        #expect(Checks.isHTTPSURL(text) == valid)
    }

    @Test func conditionsPointAtTheOffendingPosition() throws {
        let topic = try Charset(["a-z", "A-Z", "0-9", "-", "_", ".", "~", "%"], name: "topic")
        func check(_ s: String) -> ConditionChecker.Problem? { ConditionChecker.check(s, maxTopics: 5, charset: topic) }
        #expect(check("'dogs' in topics && 'cats' in topics") == nil)
        #expect(check("!!('a' in topics)") == nil)
        #expect(check("'TopicA' in topics && ('TopicB' in topics || 'TopicC' in topics)") == nil)
        #expect(check("") == .empty)
        #expect(check("()") == .operand(position: 2))
        #expect(check("'a' in topics ||| 'b' in topics") == .operand(position: 17))
        #expect(check("'a' in topics 'b' in topics") == .operator(position: 15))
        #expect(check("'a' intopics") == .inTopics(position: 5))
        #expect(check("'a' in") == .inTopics(position: nil))
        #expect(check("'' in topics") == .topic(name: "", position: 1))
        #expect(check("'é' in topics") == .topic(name: "é", position: 1))
        #expect(check("('a' in topics))") == .unmatched(position: 16))
        #expect(check("((('a' in topics)") == .unclosed(position: 2))
    }
}
