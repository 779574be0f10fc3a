import Testing
@testable import JSON

@Suite struct JSONTests {
    @Test func roundTripKeepsOrderAndNumberText() throws {
        let text = #"{"message":{"token":"t","data":{"b":"2","a":"1"},"android":{"ttl":"3600s","n":12345678901234567890,"f":1.50}}}"#
        let value = try JSONValue.parse(text)
        #expect(value.serialized == text)
    }

    @Test func escapesAndUnicode() throws {
        let value = try JSONValue.parse(#"{"s":"a\"b\\c\n\u00e9\ud83d\ude00"}"#)
        #expect(value["s"]?.stringValue == "a\"b\\c\né😀")
        #expect(try JSONValue.parse(value.serialized) == value)
    }

    @Test func semanticEqualityIgnoresMemberOrder() throws {
        #expect(try JSONValue.parse(#"{"a":1,"b":[true,null]}"#) == JSONValue.parse(#"{ "b": [true, null], "a": 1.0 }"#))
        #expect(try JSONValue.parse(#"{"a":1}"#) != JSONValue.parse(#"{"a":"1"}"#))
    }

    @Test(arguments: [
        "", "{", "{\"a\"}", "[1,]", "01", "\"\\x\"", "tru", "{\"a\":1} x", "\"\u{01}\"", "\"\\ud800\"", "1.", "-",
    ])
    func rejectsMalformed(_ text: String) {
        #expect(throws: JSONParseError.self) { try JSONValue.parse(text) }
    }

    @Test func refusesDeepNesting() {
        let deep = String(repeating: "[", count: 200) + String(repeating: "]", count: 200)
        #expect(throws: JSONParseError.self) { try JSONValue.parse(deep) }
    }

    @Test func errorNamesTheOffset() {
        do {
            _ = try JSONValue.parse(#"{"a": tx}"#)
            Issue.record("parsed invalid JSON")
        } catch {
            #expect(error.offset == 6)
        }
    }
}
