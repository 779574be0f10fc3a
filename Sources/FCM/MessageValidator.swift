import JSON

/// One reason a message would be refused, phrased for a dead-letter reason or a CLI error.
public struct ValidationIssue: Sendable, Equatable, CustomStringConvertible {
    /// The offending field, e.g. `message.android.ttl` or `message.data.from`.
    public var field: String
    /// The rule that failed, e.g. `type`, `duration`, `one_target`, `reserved_key`.
    public var rule: String
    /// `field: what is wrong`, e.g. `message.android.ttl: "abc" is not a duration like "3600s"`.
    public var description: String

    public init(field: String, rule: String, description: String) {
        self.field = field
        self.rule = rule
        self.description = description
    }
}

/// Checks a v1 `message` object against Herald's rule list (`MessageRules.json`) before it is
/// sent, so a message FCM would refuse is dead-lettered with a precise reason instead of costing a
/// request (FCM counts 4xx answers against the project's quota).
///
/// `herald.validate_message(jsonb)` in PostgreSQL applies the same rules and returns the same
/// descriptions in the same order.
///
/// Members of the objects FCM defines must be ones it knows (`known_fields` rules): a typo such
/// as `android.tll` is reported with the nearest known name instead of costing a request that
/// FCM answers with a terse 400. The operator's allow-list (herald.message_extra_fields) admits
/// fields FCM added after this release; see `MessageRuleSet.allowing(extraFields:)`.
///
/// The payload limit (4096 bytes; 2048 when the target is a `topic` or a `condition`) is measured
/// per platform as FCM delivers it: for Android, `android.data` (or `android_v2.data`, or else
/// `data`) plus `notification` plus `android.notification` (or
/// `android_v2.remote_notification.notification`); for APNs, `data` plus `notification` plus
/// `apns.payload`; for Web Push, `webpush.data` (or else `data`) plus `notification` plus
/// `webpush.notification`. In each part every member name and every string counts its UTF-8
/// bytes, a number the length of its plain decimal text, `true`/`false`/`null` 4, 5 and 4 bytes;
/// JSON punctuation and the target do not count. The largest platform must fit.
public enum MessageValidator {
    /// The embedded rules, compiled once.
    public static let rules: MessageRuleSet = {
        do {
            return try MessageRuleSet(json: MessageRules.json)
        } catch {
            fatalError("Herald's embedded message rules do not compile: \(error)")
        }
    }()

    /// Every issue of `message`, in rule order; empty when the message may be sent.
    public static func validate(_ message: JSONValue) -> [ValidationIssue] {
        rules.validate(message)
    }

    /// Every issue of `message`, accepting also the operator's extra field paths (see
    /// `MessageRuleSet.allowing(extraFields:)`).
    public static func validate(_ message: JSONValue, extraFields: Set<String>) -> [ValidationIssue] {
        extraFields.isEmpty ? rules.validate(message) : rules.allowing(extraFields: extraFields).validate(message)
    }
}

extension MessageRuleSet {
    /// Every issue of `message` under these rules, in rule order.
    public func validate(_ message: JSONValue) -> [ValidationIssue] {
        var run = Evaluation(set: compiled, message: message, extraFields: extraFields)
        for rule in compiled.root.rules { run.apply(rule, to: message) }
        if case .object(let object) = message { run.walk(compiled.root, object) }
        return run.finish()
    }
}

extension JSONObject {
    /// The first member named `key`, nil when absent or JSON null. Reads the members in place
    /// (the subscript copies each member it passes).
    @inline(__always) func member(_ key: String) -> JSONValue? {
        let count = key.utf8.count
        return members.withUnsafeBufferPointer { buffer -> JSONValue? in
            for i in 0..<buffer.count where buffer[i].key.utf8.count == count && buffer[i].key == key {
                if case .null = buffer[i].value { return nil }
                return buffer[i].value
            }
            return nil
        }
    }
}

private struct Evaluation {
    let set: CompiledRules
    let message: JSONValue
    let extraFields: Set<String>
    var found: [(rule: Int, order: Int, issue: ValidationIssue)] = []

    init(set: CompiledRules, message: JSONValue, extraFields: Set<String>) {
        self.set = set
        self.message = message
        self.extraFields = extraFields
    }

    mutating func finish() -> [ValidationIssue] {
        if found.isEmpty { return [] }
        if found.count > 1 {
            found.sort { ($0.rule, $0.order) < ($1.rule, $1.order) }
        }
        return found.map(\.issue)
    }

    mutating func walk(_ node: PathNode, _ object: JSONObject) {
        for child in node.children {
            let value = object.member(child.key)
            if value == nil && !child.checksAbsence { continue }
            for rule in child.rules { apply(rule, to: value) }
            if !child.children.isEmpty, case .object(let inner)? = value { walk(child, inner) }
        }
    }

    // MARK: one rule

    mutating func apply(_ rule: Rule, to value: JSONValue?) {
        if !rule.when.isEmpty {
            for condition in rule.when where !holds(condition) { return }
        }
        switch rule.presence {
        case .required?:
            if value == nil { report(rule, "required", ["when": rule.whenText ?? ""]) }
            return
        case .forbidden?:
            if value != nil { report(rule, "forbidden", ["when": rule.whenText ?? ""]) }
            return
        case nil:
            break
        }
        guard let value else { return }
        if let types = rule.types, !types.contains(where: { $0.matches(value) }) {
            let expected = types.map { set.words.typeNames[$0] ?? $0.rawValue }.joined(separator: set.words.typeSeparator)
            report(rule, "type", ["expected": expected, "value": render(value)])
            return
        }
        if let check = rule.check { run(check, rule, value) }
    }

    func resolve(_ path: [String]) -> JSONValue? {
        var current = message
        for key in path {
            guard case .object(let object) = current, let next = object.member(key) else { return nil }
            current = next
        }
        return current
    }

    func holds(_ condition: Condition) -> Bool {
        switch condition {
        case .present(let path):
            return resolve(path) != nil
        case .valueIn(let path, let values):
            guard case .string(let s)? = resolve(path) else { return false }
            return values.contains { Text.same($0, s) }
        case .valueNotIn(let path, let values):
            guard case .string(let s)? = resolve(path) else { return false }
            return !values.contains { Text.same($0, s) }
        }
    }

    mutating func run(_ check: Check, _ rule: Rule, _ value: JSONValue) {
        switch check {
        case .oneTarget(let targets):
            if case .object(let object) = value { checkOneTarget(rule, object, targets) }
        case .nonempty:
            if case .string(let s) = value, s.isEmpty { report(rule, "nonempty", [:]) }
        case .enumeration(let values):
            if case .string(let s) = value { checkEnumeration(rule, s, value, values) }
        case .charset(let charset, let min, let max):
            if case .string(let s) = value { checkCharset(rule, s, value, charset, min: min, max: max) }
        case .topic(let prefix, let charset):
            if case .string(let s) = value { checkTopic(rule, s, value, prefix: prefix, charset: charset) }
        case .condition(let maxTopics, let charset):
            if case .string(let s) = value, let problem = ConditionChecker.check(s, maxTopics: maxTopics, charset: charset) {
                reportCondition(rule, problem, value, maxTopics: maxTopics, charset: charset)
            }
        case .duration(let max):
            if case .string(let s) = value { checkDuration(rule, s, value, max: max) }
        case .color:
            if case .string(let s) = value, !Checks.isColor(s) { report(rule, "color", ["value": render(value)]) }
        case .httpsURL:
            if case .string(let s) = value, !Checks.isHTTPSURL(s) { report(rule, "https_url", ["value": render(value)]) }
        case .maxBytes(let max):
            if case .string(let s) = value, s.utf8.count > max { report(rule, "max_bytes", ["value": render(value), "max": String(max)]) }
        case .dataMap(let keys):
            if case .object(let object) = value { checkDataMap(rule, object, keys) }
        case .stringMap:
            if case .object(let object) = value { checkStringMap(rule, object) }
        case .stringArray:
            if case .array(let elements) = value { checkStringArray(rule, elements) }
        case .knownFields(let known):
            if case .object(let object) = value { checkKnownFields(rule, object, known) }
        case .payloadSize(let limit):
            if case .object(let object) = value { checkPayloadSize(rule, object, limit) }
        }
    }

    // MARK: the checks

    mutating func checkOneTarget(_ rule: Rule, _ object: JSONObject, _ targets: [String]) {
        // Nearly every message has exactly one: count first, list the targets only for the issue.
        var count = 0
        for target in targets where object.member(target) != nil { count += 1 }
        if count == 1 { return }
        let present = targets.filter { object.member($0) != nil }
        let all = targets.joined(separator: set.words.listSeparator)
        if present.isEmpty {
            report(rule, "one_target.none", ["targets": all])
        } else {
            report(rule, "one_target.many", ["targets": all, "found": present.joined(separator: set.words.listSeparator)])
        }
    }

    mutating func checkEnumeration(_ rule: Rule, _ s: String, _ value: JSONValue, _ values: [String]) {
        if !values.contains(where: { Text.same($0, s) }) {
            let allowed = values.map(Text.quote).joined(separator: set.words.listSeparator)
            report(rule, "enum", ["value": render(value), "allowed": allowed])
        }
    }

    mutating func checkTopic(_ rule: Rule, _ s: String, _ value: JSONValue, prefix: String, charset: Charset) {
        if Text.hasPrefix(s, prefix) {
            report(rule, "topic.prefix", ["value": render(value), "prefix": Text.quote(prefix)])
            return
        }
        checkCharset(rule, s, value, charset, min: 1, max: nil)
    }

    mutating func checkDuration(_ rule: Rule, _ s: String, _ value: JSONValue, max: Int) {
        switch Checks.duration(s, max: max) {
        case .format?: report(rule, "duration.format", ["value": render(value)])
        case .range?: report(rule, "duration.range", ["value": render(value), "max": String(max)])
        case nil: break
        }
    }

    mutating func checkDataMap(_ rule: Rule, _ object: JSONObject, _ keys: ReservedKeys) {
        let reserved = keys.reserved, prefixes = keys.prefixes
        var issues: [(key: String, issue: ValidationIssue)] = []
        object.members.withUnsafeBufferPointer { members in
            for i in 0..<members.count {
                guard case .string = members[i].value else {
                    issues.append(typeIssue(rule, key: members[i].key, value: members[i].value))
                    continue
                }
                let key = members[i].key
                if reserved.contains(where: { Text.same($0, key) }) {
                    issues.append((key, issue(rule, "reserved_key.name", field: memberField(rule, key), ["key": quoteValue(key)])))
                } else if let prefix = prefixes.first(where: { Text.hasPrefix(key, $0) }) {
                    issues.append((key, issue(rule, "reserved_key.prefix", field: memberField(rule, key),
                        ["key": quoteValue(key), "prefix": Text.quote(prefix)])))
                }
            }
        }
        add(rule, issues)
    }

    mutating func checkStringMap(_ rule: Rule, _ object: JSONObject) {
        var issues: [(key: String, issue: ValidationIssue)] = []
        object.members.withUnsafeBufferPointer { members in
            for i in 0..<members.count {
                if case .string = members[i].value { continue }
                issues.append(typeIssue(rule, key: members[i].key, value: members[i].value))
            }
        }
        add(rule, issues)
    }

    mutating func checkStringArray(_ rule: Rule, _ elements: [JSONValue]) {
        for (index, element) in elements.enumerated() {
            if case .string = element { continue }
            let field = rule.field + "[\(index)]"
            found.append((rule.index, index, issue(rule, "type", field: field,
                ["expected": set.words.typeNames[.string] ?? "a string", "value": render(element)])))
        }
    }

    mutating func checkKnownFields(_ rule: Rule, _ object: JSONObject, _ known: KnownFields) {
        var issues: [(key: String, issue: ValidationIssue)] = []
        // Unlike elsewhere, a null member counts: FCM refuses a name it does not know whatever
        // its value.
        for position in object.members.indices {
            let key = object.members[position].key
            if known.contains(key) { continue }
            if !extraFields.isEmpty, isExtra(rule.field + "." + key) { continue }
            let field = memberField(rule, key)
            if let suggestion = known.suggestion(for: key) {
                issues.append((key, issue(rule, "unknown_field.suggest", field: field, ["suggestion": Text.quote(suggestion)])))
            } else {
                issues.append((key, issue(rule, "unknown_field", field: field, [:])))
            }
        }
        add(rule, issues)
    }

    mutating func checkPayloadSize(_ rule: Rule, _ object: JSONObject, _ limit: PayloadLimit) {
        let (largest, largestName) = Self.largestPlatformPayload(object, limit)
        let toTopics = limit.topicTargets.contains { object.member($0) != nil }
        let max = toTopics ? limit.topicMax : limit.max
        if largest > max {
            report(rule, toTopics ? "payload_size.topic" : "payload_size.message",
                   ["platform": largestName, "size": String(largest), "max": String(max)])
        }
    }

    /// The largest payload any platform would be sent, in bytes, and that platform's name.
    static func largestPlatformPayload(_ object: JSONObject, _ limit: PayloadLimit) -> (size: Int, platform: String) {
        let paths = limit.paths, platforms = limit.platforms
        var largest = -1
        var largestPlatform = 0
        // Each distinct part (data, notification, ...) is measured once for all platforms.
        // The nested lists are read through buffers: iterating them as arrays retains and
        // releases every inner list for every message.
        withUnsafeTemporaryAllocation(of: Int.self, capacity: paths.count) { sizes in
            for i in 0..<paths.count { sizes[i] = -1 }
            platforms.withUnsafeBufferPointer { platformList in
                for platform in 0..<platformList.count {
                    var size = 0
                    platformList[platform].parts.withUnsafeBufferPointer { parts in
                        for part in 0..<parts.count {
                            parts[part].withUnsafeBufferPointer { alternatives in
                                for index in alternatives {
                                    if sizes[index] == -1 {
                                        sizes[index] = measured(object, paths[index][...]) ?? -2
                                    }
                                    if sizes[index] >= 0 {
                                        size += sizes[index]
                                        break
                                    }
                                }
                            }
                        }
                    }
                    if size > largest {
                        largest = size
                        largestPlatform = platform
                    }
                }
            }
        }
        return (largest, platforms.isEmpty ? "" : platforms[largestPlatform].name)
    }

    mutating func checkCharset(_ rule: Rule, _ s: String, _ value: JSONValue, _ charset: Charset, min: Int, max: Int?) {
        if !charset.containsAll(s) {
            report(rule, "charset", ["value": render(value), "chars": charset.display])
        } else if s.utf8.count < min {
            report(rule, "length.short", ["value": render(value), "min": String(min)])
        } else if let max, s.utf8.count > max {
            report(rule, "length.long", ["value": render(value), "max": String(max)])
        }
    }

    mutating func reportCondition(_ rule: Rule, _ problem: ConditionChecker.Problem, _ value: JSONValue, maxTopics: Int, charset: Charset) {
        let words = set.words
        func place(_ position: Int?) -> String {
            guard let position else { return words.atEnd }
            return Text.fill(words.atPosition, [("position", String(position))])
        }
        let shown = render(value)
        switch problem {
        case .empty:
            report(rule, "condition.empty", ["value": shown])
        case .operand(let position):
            report(rule, "condition.operand", ["value": shown, "where": place(position)])
        case .unterminated(let position):
            report(rule, "condition.unterminated", ["value": shown, "position": String(position)])
        case .topic(let name, let position):
            report(rule, "condition.topic", ["value": shown, "position": String(position), "topic": quoteValue(name), "chars": charset.display])
        case .inTopics(let position):
            report(rule, "condition.in", ["value": shown, "where": place(position)])
        case .operator(let position):
            report(rule, "condition.operator", ["value": shown, "where": place(position)])
        case .unmatched(let position):
            report(rule, "condition.unmatched", ["value": shown, "position": String(position)])
        case .unclosed(let position):
            report(rule, "condition.unclosed", ["value": shown, "position": String(position)])
        case .tooManyTopics(let position):
            report(rule, "condition.topics", ["value": shown, "position": String(position), "max": String(maxTopics)])
        }
    }

    /// Whether the operator allowed `path`, compared byte for byte as PostgreSQL does.
    func isExtra(_ path: String) -> Bool {
        guard let index = extraFields.firstIndex(of: path) else { return false }
        return Text.same(extraFields[index], path)
    }

    // MARK: issues

    func issue(_ rule: Rule, _ key: String, field: String? = nil, _ values: KeyValuePairs<String, String>) -> ValidationIssue {
        let field = field ?? rule.field
        let template = rule.templates[key] ?? key
        let text = Text.fill(template, values.map { ($0.key, $0.value) })
        let name = key.split(separator: ".", maxSplits: 1).first.map(String.init) ?? key
        return ValidationIssue(field: field, rule: name, description: field + ": " + text)
    }

    mutating func report(_ rule: Rule, _ key: String, _ values: KeyValuePairs<String, String>) {
        found.append((rule.index, found.count, issue(rule, key, values)))
    }

    /// Adds a map rule's issues in byte order of the member names, as PostgreSQL lists them.
    mutating func add(_ rule: Rule, _ issues: [(key: String, issue: ValidationIssue)]) {
        guard !issues.isEmpty else { return }
        let ordered = issues.count == 1 ? issues : issues.sorted { Text.byteOrder($0.key, $1.key) }
        for (order, item) in ordered.enumerated() { found.append((rule.index, order, item.issue)) }
    }

    func memberField(_ rule: Rule, _ key: String) -> String {
        rule.field + Self.renderKey(key, limit: set.valueMaxCharacters, ellipsis: set.words.truncated)
    }

    func typeIssue(_ rule: Rule, key: String, value: JSONValue) -> (key: String, issue: ValidationIssue) {
        (key, issue(rule, "type", field: memberField(rule, key),
                    ["expected": set.words.typeNames[.string] ?? "a string", "value": render(value)]))
    }

    func quoteValue(_ s: String) -> String {
        Text.quote(Text.truncate(s, limit: set.valueMaxCharacters, ellipsis: set.words.truncated))
    }

    /// A value as descriptions show it: strings quoted (and cut), numbers in plain decimal,
    /// objects and arrays by kind.
    func render(_ value: JSONValue) -> String {
        switch value {
        case .string(let s): return quoteValue(s)
        case .number(let literal):
            guard let decimal = DecimalLiteral(literal) else { return literal }
            return decimal.canonicalText(limit: set.valueMaxCharacters, ellipsis: set.words.truncated)
        case .bool(let b): return b ? "true" : "false"
        case .null: return "null"
        case .object: return set.words.anObject
        case .array: return set.words.anArray
        }
    }

    /// `.name` for plain names, `["odd name"]` for the rest.
    static func renderKey(_ key: String, limit: Int, ellipsis: String) -> String {
        var plain = !key.isEmpty && key.utf8.count <= limit
        if plain {
            for byte in key.utf8 {
                switch byte {
                case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                     UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "_"), UInt8(ascii: "-"): continue
                default: plain = false
                }
                if !plain { break }
            }
        }
        return plain ? "." + key : "[" + Text.quote(Text.truncate(key, limit: limit, ellipsis: ellipsis)) + "]"
    }

    /// Payload bytes of the value at `path` below `object`, nil when it is absent or JSON null:
    /// `resolve(path).map(measure)` without copying the values on the way.
    static func measured(_ object: JSONObject, _ path: ArraySlice<String>) -> Int? {
        guard let key = path.first else { return nil }
        let count = key.utf8.count
        return object.members.withUnsafeBufferPointer { buffer -> Int? in
            for i in 0..<buffer.count where buffer[i].key.utf8.count == count && buffer[i].key == key {
                switch buffer[i].value {
                case .null: return nil
                case .object(let inner) where path.count > 1: return measured(inner, path.dropFirst())
                default: return path.count == 1 ? measure(buffer[i].value) : nil
                }
            }
            return nil
        }
    }

    /// Payload bytes of a value, as defined on `MessageValidator`.
    static func measure(_ value: JSONValue) -> Int {
        switch value {
        case .string(let s): return s.utf8.count
        case .number(let literal): return DecimalLiteral(literal)?.canonicalLength ?? literal.utf8.count
        case .bool(let b): return b ? 4 : 5
        case .null: return 4
        case .array(let elements):
            return elements.withUnsafeBufferPointer { buffer in
                var total = 0
                for i in 0..<buffer.count { total += measure(buffer[i]) }
                return total
            }
        case .object(let object):
            return object.members.withUnsafeBufferPointer { buffer in
                var total = 0
                for i in 0..<buffer.count { total += buffer[i].key.utf8.count + measure(buffer[i].value) }
                return total
            }
        }
    }
}
