/// A JSON document as written: objects keep their members in order and numbers keep their
/// literal text, so a message read from the database and written to FCM loses nothing, not even
/// fields this project does not interpret.
///
/// Not `indirect`: arrays and objects already hold their elements in heap storage, and a boxed
/// case would cost an allocation for every string and number of every message parsed.
public enum JSONValue: Sendable {
    case null
    case bool(Bool)
    /// The number's literal text, e.g. `"3600"` or `"1.5e3"`; see `intValue` and `doubleValue`.
    case number(String)
    case string(String)
    case array([JSONValue])
    case object(JSONObject)
}

/// An ordered JSON object. Lookup is linear, which beats hashing for the handful of keys a
/// message object has.
public struct JSONObject: Sendable, Sequence {
    public struct Member: Sendable {
        public var key: String
        public var value: JSONValue
        public init(key: String, value: JSONValue) {
            self.key = key
            self.value = value
        }
    }

    public private(set) var members: [Member]

    public init() { members = [] }
    public init(_ members: [Member]) { self.members = members }
    public init(_ pairs: KeyValuePairs<String, JSONValue>) {
        members = pairs.map { Member(key: $0.key, value: $0.value) }
    }

    public var count: Int { members.count }
    public var isEmpty: Bool { members.isEmpty }
    public var keys: [String] { members.map(\.key) }

    /// The value of the first member named `key`; setting `nil` removes every member of that name.
    public subscript(key: String) -> JSONValue? {
        get {
            for member in members where member.key == key { return member.value }
            return nil
        }
        set {
            if let newValue {
                if let index = members.firstIndex(where: { $0.key == key }) {
                    members[index].value = newValue
                } else {
                    members.append(Member(key: key, value: newValue))
                }
            } else {
                members.removeAll { $0.key == key }
            }
        }
    }

    public func makeIterator() -> IndexingIterator<[Member]> { members.makeIterator() }
}

extension JSONObject: Equatable {
    /// Objects are equal when they have the same members, whatever their order.
    public static func == (lhs: JSONObject, rhs: JSONObject) -> Bool {
        guard lhs.members.count == rhs.members.count else { return false }
        for member in lhs.members where rhs[member.key] != member.value { return false }
        return true
    }
}

extension JSONValue: Equatable {
    /// Semantic equality: object member order does not matter and numbers compare by value.
    public static func == (lhs: JSONValue, rhs: JSONValue) -> Bool {
        switch (lhs, rhs) {
        case (.null, .null): return true
        case let (.bool(a), .bool(b)): return a == b
        case let (.number(a), .number(b)): return a == b || (Double(a) != nil && Double(a) == Double(b))
        case let (.string(a), .string(b)): return a == b
        case let (.array(a), .array(b)): return a == b
        case let (.object(a), .object(b)): return a == b
        default: return false
        }
    }
}

extension JSONValue {
    public var objectValue: JSONObject? { if case .object(let o) = self { return o } else { return nil } }
    public var arrayValue: [JSONValue]? { if case .array(let a) = self { return a } else { return nil } }
    public var stringValue: String? { if case .string(let s) = self { return s } else { return nil } }
    public var boolValue: Bool? { if case .bool(let b) = self { return b } else { return nil } }
    public var isNull: Bool { if case .null = self { return true } else { return false } }
    /// The number as an integer when its literal is one (no fraction, no exponent, in range).
    public var intValue: Int? { if case .number(let n) = self { return Int(n) } else { return nil } }
    public var doubleValue: Double? { if case .number(let n) = self { return Double(n) } else { return nil } }

    /// The member `key` of an object; nil for anything else.
    public subscript(key: String) -> JSONValue? { objectValue?[key] }

    /// The JSON type's name as FCM's error messages spell it.
    public var typeName: String {
        switch self {
        case .null: return "null"
        case .bool: return "boolean"
        case .number: return "number"
        case .string: return "string"
        case .array: return "array"
        case .object: return "object"
        }
    }

    public init(_ int: Int) { self = .number(String(int)) }
}

extension JSONValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByBooleanLiteral,
    ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral, ExpressibleByNilLiteral, ExpressibleByFloatLiteral
{
    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int) { self = .number(String(value)) }
    public init(floatLiteral value: Double) { self = .number(String(value)) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        self = .object(JSONObject(elements.map { JSONObject.Member(key: $0.0, value: $0.1) }))
    }
    public init(nilLiteral: ()) { self = .null }
}
