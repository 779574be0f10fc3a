import JSON

/// The message validation rules, compiled into this module from `Sources/FCM/Rules/message-rules.json`.
///
/// The same text serves both validators: `MessageValidator` interprets it in Swift, and
/// `herald migrate` loads it into PostgreSQL so `herald.validate_message(jsonb)` interprets the
/// same list in PL/pgSQL (`Sources/Queue/SQL/functions/validate_message.sql` and the `_mv_*`
/// helpers beside it; the tables in `migrations/020_validate_message.sql`). After applying the
/// migrations and function definitions, the migrator runs `MessageRules.loadStatement` with `MessageRules.json` as `$1`
/// on every run, so the database always holds the rules of the binary that migrated it.
public enum MessageRules {
    /// The rule list as JSON text.
    public static let json: String = EmbeddedMessageRules.text
    /// The rule-list format this module and `herald.load_message_rules` understand.
    public static let format = 1
    /// Parameterised statement that stores the rules (`$1` = `json`) in `herald.message_rules`.
    public static let loadStatement = "SELECT herald.load_message_rules($1::jsonb)"
}

/// Why a rule list cannot be used.
public struct RuleDefinitionError: Error, Sendable, CustomStringConvertible {
    public var description: String
}

/// A compiled rule list. `MessageValidator` holds the embedded one; tests may compile others.
public struct MessageRuleSet: Sendable {
    let compiled: CompiledRules
    /// Field paths the operator allows beyond the rules' `known_fields` lists, e.g.
    /// `message.android.new_option` (herald.message_extra_fields).
    public private(set) var extraFields: Set<String> = []

    /// Compiles a rule list in the format of `message-rules.json`.
    public init(json text: String) throws(RuleDefinitionError) {
        compiled = try CompiledRules(json: text)
    }

    /// The same rules, also accepting the members named by `paths` (each `message.` followed by
    /// the member names, as issues name fields) in objects the rules otherwise close. A field FCM
    /// added after this release can so be sent without a new Herald.
    public func allowing(extraFields paths: some Sequence<String>) -> MessageRuleSet {
        var copy = self
        copy.extraFields.formUnion(paths)
        return copy
    }
}

/// Everything the validator needs, immutable and shared, so a validation retains one object.
final class CompiledRules: Sendable {
    let root: PathNode
    let words: Words
    let valueMaxCharacters: Int

    init(json text: String) throws(RuleDefinitionError) {
        let document: JSONValue
        do { document = try JSONValue.parse(text) } catch {
            throw RuleDefinitionError(description: "message rules: \(error)")
        }
        guard let top = document.objectValue else { throw RuleDefinitionError(description: "message rules: not an object") }
        guard top["format"]?.intValue == MessageRules.format else {
            throw RuleDefinitionError(description: "message rules: format \(top["format"]?.serialized ?? "missing"), this build understands \(MessageRules.format)")
        }
        let words = try Words(top["words"])
        guard let templates = top["messages"]?.objectValue else { throw RuleDefinitionError(description: "message rules: no messages") }
        var charsets: [String: Charset] = [:]
        for member in top["charsets"]?.objectValue ?? JSONObject() {
            charsets[member.key] = try Charset(member.value, name: member.key)
        }
        guard let list = top["rules"]?.arrayValue else { throw RuleDefinitionError(description: "message rules: no rules") }
        var root = NodeBuilder(key: "")
        for (index, value) in list.enumerated() {
            let rule = try Rule(index: index, json: value, templates: templates, charsets: charsets)
            root.insert(rule, at: rule.path[...])
        }
        self.root = root.build()
        self.words = words
        self.valueMaxCharacters = top["value_max_characters"]?.intValue ?? 64
    }
}

/// Rules grouped by the member they apply to, so one walk of the message visits each object once
/// and a whole absent block (say `apns`) costs one lookup.
final class PathNode: Sendable {
    let key: String
    let rules: [Rule]
    let children: [PathNode]
    /// Whether any rule here can report an absent member (so an absent member still needs a look).
    let checksAbsence: Bool

    init(key: String, rules: [Rule], children: [PathNode]) {
        self.key = key
        self.rules = rules
        self.children = children
        checksAbsence = rules.contains { $0.presence == .required }
    }
}

struct NodeBuilder {
    var key: String
    var rules: [Rule] = []
    var children: [NodeBuilder] = []

    init(key: String) { self.key = key }

    mutating func insert(_ rule: Rule, at path: ArraySlice<String>) {
        guard let first = path.first else {
            rules.append(rule)
            return
        }
        if let index = children.firstIndex(where: { $0.key == first }) {
            children[index].insert(rule, at: path.dropFirst())
        } else {
            var child = NodeBuilder(key: first)
            child.insert(rule, at: path.dropFirst())
            children.append(child)
        }
    }

    func build() -> PathNode { PathNode(key: key, rules: rules, children: children.map { $0.build() }) }
}

struct Words: Sendable {
    var typeNames: [ValueType: String]
    var anObject: String
    var anArray: String
    var typeSeparator: String
    var listSeparator: String
    var truncated: String
    var atPosition: String
    var atEnd: String

    init(_ json: JSONValue?) throws(RuleDefinitionError) {
        guard let object = json?.objectValue else { throw RuleDefinitionError(description: "message rules: no words") }
        func word(_ key: String) throws(RuleDefinitionError) -> String {
            guard let value = object[key]?.stringValue else {
                throw RuleDefinitionError(description: "message rules: words.\(key) missing")
            }
            return value
        }
        var names: [ValueType: String] = [:]
        for type in ValueType.allCases { names[type] = try word(type.rawValue) }
        typeNames = names
        anObject = try word("an_object")
        anArray = try word("an_array")
        typeSeparator = try word("type_separator")
        listSeparator = try word("list_separator")
        truncated = try word("truncated")
        atPosition = try word("at_position")
        atEnd = try word("at_end")
    }
}

enum ValueType: String, CaseIterable, Sendable {
    case string, object, array, integer, number, boolean

    func matches(_ value: JSONValue) -> Bool {
        switch (self, value) {
        case (.string, .string), (.object, .object), (.array, .array), (.number, .number), (.boolean, .bool):
            return true
        case (.integer, .number(let literal)):
            // Most whole numbers are written as plain digits; only others need the full parse.
            if literal.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") || $0 == UInt8(ascii: "-") }) {
                return true
            }
            return DecimalLiteral(literal)?.isIntegral ?? false
        default:
            return false
        }
    }
}

/// A set of ASCII characters, written in the rules as `["a-z", "0-9", "_"]` (three-character
/// entries with a dash in the middle are ranges, one-character entries stand for themselves).
struct Charset: Sendable {
    var low: UInt64 = 0
    var high: UInt64 = 0
    /// The set as the descriptions show it, e.g. `[a-zA-Z0-9-_.~%]`.
    var display: String

    init(_ json: JSONValue, name: String) throws(RuleDefinitionError) {
        guard let entries = json.arrayValue else { throw RuleDefinitionError(description: "message rules: charset \(name) is not a list") }
        var shown = "["
        display = ""
        for entry in entries {
            guard let text = entry.stringValue else { throw RuleDefinitionError(description: "message rules: charset \(name) has a non-string entry") }
            let bytes = Array(text.utf8)
            guard bytes.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
                throw RuleDefinitionError(description: "message rules: charset \(name) entry \(text) is not printable ASCII")
            }
            switch bytes.count {
            case 1: add(bytes[0]...bytes[0])
            case 3 where bytes[1] == UInt8(ascii: "-") && bytes[0] <= bytes[2]: add(bytes[0]...bytes[2])
            default: throw RuleDefinitionError(description: "message rules: charset \(name) entry \(text) is neither a character nor a range")
            }
            shown += text
        }
        display = shown + "]"
    }

    private mutating func add(_ range: ClosedRange<UInt8>) {
        for byte in range {
            if byte < 64 { low |= 1 << UInt64(byte) } else { high |= 1 << UInt64(byte - 64) }
        }
    }

    @inline(__always) func contains(_ byte: UInt8) -> Bool {
        if byte < 64 { return low & (1 << UInt64(byte)) != 0 }
        if byte < 128 { return high & (1 << UInt64(byte - 64)) != 0 }
        return false
    }

    /// Whether every byte of `s` is in the set (a non-ASCII byte never is).
    func containsAll(_ s: String) -> Bool {
        var s = s
        return s.withUTF8 { bytes in
            for byte in bytes where !contains(byte) { return false }
            return true
        }
    }
}

struct Platform: Sendable {
    var name: String
    /// Each part is a list of alternatives (indices into the check's paths): the first present
    /// one counts.
    var parts: [[Int]]
}

enum Check: Sendable {
    case oneTarget([String])
    case nonempty
    case enumeration([String])
    case charset(Charset, min: Int, max: Int?)
    case topic(prefix: String, charset: Charset)
    case condition(maxTopics: Int, charset: Charset)
    case duration(max: Int)
    case color
    case httpsURL
    case maxBytes(Int)
    case dataMap(ReservedKeys)
    case stringMap
    case stringArray
    case knownFields(KnownFields)
    case payloadSize(PayloadLimit)
}

// The checks with lists are classes: matching a check hands each over with one retain instead of
// one per list.

/// A data map's reserved names and name prefixes.
final class ReservedKeys: Sendable {
    let reserved: [String]
    let prefixes: [String]
    init(reserved: [String], prefixes: [String]) {
        self.reserved = reserved
        self.prefixes = prefixes
    }
}

/// The payload limit: `max` bytes, `topicMax` when a `topicTargets` member is present, measured
/// per platform over `paths`.
final class PayloadLimit: Sendable {
    let max: Int
    let topicMax: Int
    let topicTargets: [String]
    let paths: [[String]]
    let platforms: [Platform]
    init(max: Int, topicMax: Int, topicTargets: [String], paths: [[String]], platforms: [Platform]) {
        self.max = max
        self.topicMax = topicMax
        self.topicTargets = topicTargets
        self.paths = paths
        self.platforms = platforms
    }
}

enum Condition: Sendable {
    case present([String])
    case valueIn([String], [String])
    case valueNotIn([String], [String])
}

enum Presence: String, Sendable {
    case required, forbidden
}

final class Rule: Sendable {
    let index: Int
    let path: [String]
    /// `message.android.ttl`, as issues name the field.
    let field: String
    let when: [Condition]
    let whenText: String?
    let presence: Presence?
    let types: [ValueType]?
    let check: Check?
    let templates: [String: String]

    init(index: Int, json: JSONValue, templates defaults: JSONObject, charsets: [String: Charset]) throws(RuleDefinitionError) {
        func fail(_ why: String) -> RuleDefinitionError {
            RuleDefinitionError(description: "message rules: rule \(index) (\(json.serialized.prefix(80))): \(why)")
        }
        guard let object = json.objectValue, let pathText = object["path"]?.stringValue else { throw fail("needs a path") }
        let path = pathText.isEmpty ? [] : pathText.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        guard !path.contains("") else { throw fail("empty segment in path") }
        // Names and values the rules compare with are ASCII, which makes Swift's string equality
        // the byte equality PostgreSQL applies (see Text.same).
        func isASCII(_ s: String) -> Bool { s.utf8.allSatisfy { $0 < 0x80 } }
        guard isASCII(pathText) else { throw fail("path must be ASCII") }
        var when: [Condition] = []
        var whenText: String?
        var presence: Presence?
        var types: [ValueType]?
        var check: Check?

        var merged: [String: String] = [:]
        for member in defaults { if let text = member.value.stringValue { merged[member.key] = text } }
        for member in object["messages"]?.objectValue ?? JSONObject() {
            guard let text = member.value.stringValue else { throw fail("message \(member.key) is not a string") }
            merged[member.key] = text
        }

        func strings(_ key: String) throws(RuleDefinitionError) -> [String] {
            guard let list = object[key]?.arrayValue else { throw fail("\(key) must be a list of strings") }
            var result: [String] = []
            for item in list {
                guard let s = item.stringValue, isASCII(s) else { throw fail("\(key) must be a list of ASCII strings") }
                result.append(s)
            }
            return result
        }
        func int(_ key: String) throws(RuleDefinitionError) -> Int {
            guard let value = object[key]?.intValue else { throw fail("\(key) must be a whole number") }
            return value
        }
        func charset() throws(RuleDefinitionError) -> Charset {
            guard let name = object["charset"]?.stringValue, let set = charsets[name] else { throw fail("unknown charset") }
            return set
        }
        func splitPath(_ text: String) -> [String] { text.split(separator: ".").map(String.init) }

        if let conditions = object["when"] {
            guard let list = conditions.arrayValue else { throw fail("when must be a list") }
            for condition in list {
                if let present = condition["present"]?.stringValue {
                    when.append(.present(splitPath(present)))
                } else if let target = condition["path"]?.stringValue, let values = condition["in"]?.arrayValue,
                          values.allSatisfy({ $0.stringValue.map(isASCII) ?? false }) {
                    when.append(.valueIn(splitPath(target), values.compactMap(\.stringValue)))
                } else if let target = condition["path"]?.stringValue, let values = condition["not_in"]?.arrayValue,
                          values.allSatisfy({ $0.stringValue.map(isASCII) ?? false }) {
                    when.append(.valueNotIn(splitPath(target), values.compactMap(\.stringValue)))
                } else {
                    throw fail("unknown condition \(condition.serialized)")
                }
            }
            guard let text = object["when_text"]?.stringValue else { throw fail("a rule with when needs when_text") }
            whenText = text
        }
        if let presenceText = object["presence"] {
            guard let name = presenceText.stringValue, let parsed = Presence(rawValue: name) else { throw fail("unknown presence") }
            guard whenText != nil else { throw fail("presence needs when and when_text") }
            presence = parsed
        }
        if let typeValue = object["type"] {
            let names = typeValue.stringValue.map { [$0] } ?? typeValue.arrayValue?.compactMap(\.stringValue) ?? []
            var list: [ValueType] = []
            for name in names {
                guard let type = ValueType(rawValue: name) else { throw fail("unknown type \(name)") }
                list.append(type)
            }
            guard !list.isEmpty else { throw fail("type must name at least one type") }
            types = list
        }
        if let checkName = object["check"] {
            switch checkName.stringValue {
            case "one_target": check = .oneTarget(try strings("targets"))
            case "nonempty": check = .nonempty
            case "enum": check = .enumeration(try strings("values"))
            case "charset":
                let min = object["min"] == nil ? 0 : try int("min")
                guard min == 0 || min == 1 else { throw fail("min must be 0 or 1") }
                check = .charset(try charset(), min: min, max: object["max"] == nil ? nil : try int("max"))
            case "topic":
                guard let prefix = object["prefix"]?.stringValue else { throw fail("topic needs a prefix") }
                check = .topic(prefix: prefix, charset: try charset())
            case "condition": check = .condition(maxTopics: try int("max_topics"), charset: try charset())
            case "duration": check = .duration(max: try int("max"))
            case "color": check = .color
            case "https_url": check = .httpsURL
            case "max_bytes": check = .maxBytes(try int("max"))
            case "data_map": check = .dataMap(ReservedKeys(reserved: try strings("reserved"), prefixes: try strings("reserved_prefixes")))
            case "string_map": check = .stringMap
            case "string_array": check = .stringArray
            case "known_fields": check = .knownFields(KnownFields(try strings("fields")))
            case "payload_size":
                guard let list = object["platforms"]?.arrayValue else { throw fail("payload_size needs platforms") }
                var platforms: [Platform] = []
                var paths: [[String]] = []
                for item in list {
                    guard let name = item["name"]?.stringValue, let parts = item["parts"]?.arrayValue else {
                        throw fail("a platform needs a name and parts")
                    }
                    platforms.append(Platform(name: name, parts: parts.map { part in
                        (part.arrayValue ?? []).compactMap(\.stringValue).map { text in
                            let path = splitPath(text)
                            if let index = paths.firstIndex(of: path) { return index }
                            paths.append(path)
                            return paths.count - 1
                        }
                    }))
                }
                check = .payloadSize(PayloadLimit(max: try int("max"), topicMax: try int("topic_max"),
                                                  topicTargets: try strings("topic_targets"), paths: paths, platforms: platforms))
            default:
                throw fail("unknown check \(checkName.serialized); this build of Herald is older than its rules")
            }
        }
        self.index = index
        self.path = path
        field = path.isEmpty ? "message" : "message." + pathText
        self.when = when
        self.whenText = whenText
        self.presence = presence
        self.types = types
        self.check = check
        templates = merged
    }
}
