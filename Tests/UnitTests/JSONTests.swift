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

    /// The writer copies runs of plain bytes whole; what it escapes must be exactly what the
    /// byte-at-a-time rules say, wherever the byte falls in the string.
    @Test func stringsAreEscapedWhereverTheSpecialBytesFall() throws {
        let cases: [(String, String)] = [
            ("", #""""#),
            ("plain", #""plain""#),
            ("\"lead", #""\"lead""#),
            ("tail\\", #""tail\\""#),
            ("a\nb\rc\td", #""a\nb\rc\td""#),
            ("nul\u{0}bell\u{7}esc\u{1B}", #""nul\u0000bell\u0007esc\u001b""#),
            ("\u{1F}\u{7F}é😀", "\"\\u001f\u{7F}é😀\""),
        ]
        for (text, expected) in cases {
            #expect(JSONValue.quoted(text) == expected)
            #expect(try JSONValue.parse(expected).stringValue == text)
        }
    }

    /// Long strings are scanned eight bytes at a time: a byte to escape must be found in any
    /// position of a word, next to any neighbour, including bytes above 0x7F.
    @Test func everyPositionOfALongStringIsChecked() throws {
        func reference(_ s: String) -> String {
            var out = "\""
            for byte in s.utf8 {
                switch byte {
                case 0x22: out += "\\\""
                case 0x5C: out += "\\\\"
                case 0x0A: out += "\\n"
                case 0x0D: out += "\\r"
                case 0x09: out += "\\t"
                case 0..<0x20: out += "\\u00" + (byte < 0x10 ? "0" : "") + String(byte, radix: 16)
                default: out += String(decoding: [byte], as: UTF8.self)
                }
            }
            return out + "\""
        }
        let base = Array("abcdefghijklmnopqrstuvwxyz0123456789".utf8)
        for special: UInt8 in [0x00, 0x01, 0x09, 0x0A, 0x1F, 0x22, 0x5C] {
            for position in 0...base.count {
                var bytes = base
                bytes.insert(special, at: position)
                let text = String(decoding: bytes, as: UTF8.self)
                #expect(JSONValue.quoted(text) == reference(text), "byte \(special) at \(position)")
            }
        }
        let wide = String(repeating: "é😀ÿ ~", count: 9) + "\u{7F}\u{80}" + String(repeating: "ü", count: 11)
        #expect(JSONValue.quoted(wide) == "\"" + wide + "\"")
        #expect(try JSONValue.parse(JSONValue.quoted(wide + "\"\\\n")).stringValue == wide + "\"\\\n")
    }

    @Test(arguments: [0, 7, -7, 10, 1_234_567_890, -1_000_000, Int.max, Int.min])
    func integersAreWrittenAsStringSpellsThem(_ number: Int) {
        var out: [UInt8] = Array("x".utf8)
        JSONValue.writeInteger(number, into: &out)
        #expect(String(decoding: out, as: UTF8.self) == "x" + String(number))
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
