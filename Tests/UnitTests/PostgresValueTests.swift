import JSON
import Metrics
@testable import Postgres
@testable import Queue
import Testing

/// Values Herald hands to PostgreSQL, and what it prints about connections.
@Suite struct PostgresValueTests {
    @Test func passwordsNeverReachMessages() {
        // Only what was parsed is shown, in URL form, with the password masked.
        #expect(PGConnection.redacted("postgresql://herald:s3cret@db:5432/app") == "postgresql://herald:***@db:5432/app")
        #expect(PGConnection.redacted("host=db user=herald password=s3cret dbname=app") == "postgresql://herald:***@db/app")
        #expect(PGConnection.redacted("host=db password='s3 cret' dbname=app") == "postgresql://:***@db/app")
        #expect(PGConnection.redacted("postgresql://db/app?user=herald&password=s3cret&sslmode=require") == "postgresql://herald:***@db/app")
        #expect(PGConnection.redacted("postgresql://herald@127.0.0.1:5432/postgres") == "postgresql://herald@127.0.0.1:5432/postgres")
        #expect(PGConnection.redacted("postgresql://u:pw@/herald?host=/tmp/pg%20x&port=5433") == "postgresql://u:***@/herald?host=%2Ftmp%2Fpg%20x&port=5433")
        #expect(PGConnection.redacted("postgresql://u@[::1]:5432,h2:5433/app") == "postgresql://u@[::1],h2:5432,5433/app")
    }

    /// Strings that are not well-formed are refused without naming any part of them; those whose
    /// password would spill into another field (an unencoded @ or /) too.
    @Test(arguments: [
        "postgres//user:s3cret@host/db", "postgresql:// user:s3cret@host/db?x=1", "postgersql://user:s3cret@host/db",
        "POSTGRESQL://user:s3cret@host/db", "postgresql:user:s3cret@host/db", "postgresql://user:s3cr@et@host/db",
        "postgresql://user:s3/cret@host/db", "postgresql://user:12/s3cret@host/db", "postgresql://u@h/db?PASSWORD=s3cret",
        "host=h password='s3cret", "host=h password=s3c ret", "postgresql://user:s3cret@host/db\n", "user:s3cret@host/db",
        "host=h\npassword=s3cret", "dbname=postgresql://user:s3cret@host/db", "postgresql://u:s3cret@h/db?sslmode=require&passwrd=s3cret",
        "postgresql://u:s3cret@host:s3cret/db", "s3cret",
    ])
    func malformedStringsAreNeverShown(text: String) throws {
        let text = text.replacingOccurrences(of: "\\n", with: "\n")
        let error = try #require(throws: ConnectionString.Malformed.self) { try ConnectionString.parse(text) }
        #expect(!error.description.contains("s3c"), "\(error.description)")
        #expect(error.description.contains("DATABASE_URL (--database-url)"))
        #expect(!PGConnection.redacted(text).contains("s3c"))
        #expect(throws: PostgresError.self) { try PGConnection(url: text) }
        do { _ = try PGConnection(url: text) } catch { #expect(!"\(error)".contains("s3c"), "\(error)") }
    }

    /// libpq is given the parsed keywords, not the string: a percent-encoded password, an @ in
    /// one, a space after the scheme's slashes all come out as libpq reads them.
    @Test func wellFormedStringsAreParsedAsLibpqReadsThem() throws {
        let url = try ConnectionString.parse("postgresql://herald:p%40ss%2Fw0rd@db.example.com:6432/app?sslmode=require")
        #expect(url.password == "p@ss/w0rd")
        #expect(url.value("sslmode") == "require")
        #expect(url.display == "postgresql://herald:***@db.example.com:6432/app")
        let spaced = try ConnectionString.parse("postgresql:// herald:pw@db/app")
        #expect(spaced.display == "postgresql://%20herald:***@db/app")
        #expect(try ConnectionString.parse("").keywords.isEmpty)
    }

    @Test func errorTextsAreStorable() {
        #expect(OutcomeRecorder.clean("INTERNAL: bad\u{0}byte\u{7}here\nnext\tline") == "INTERNAL: bad byte here\nnext\tline")
        #expect(OutcomeRecorder.clean(String(repeating: "x", count: 5000)).count == 2000)
        // Long texts are checked eight bytes at a time: a bad byte anywhere is still found.
        let line = "UNAVAILABLE: the service is currently unavailable, retry later"
        for position in 0...line.utf8.count {
            for bad: UInt8 in [0x00, 0x07, 0x1F, 0x7F] {
                var bytes = Array(line.utf8)
                bytes.insert(bad, at: position)
                var expected = Array(line.utf8)
                expected.insert(0x20, at: position)
                #expect(OutcomeRecorder.clean(String(decoding: bytes, as: UTF8.self)) == String(decoding: expected, as: UTF8.self))
            }
        }
        #expect(OutcomeRecorder.clean(line + "\nnext\tline é") == line + "\nnext\tline é")
    }

    /// Numbers read from libpq's buffer without a String must be the numbers Int(String) and
    /// Double(String) read, bit for bit (claims read ids, attempts and epoch seconds this way).
    @Test func numbersReadInPlaceMatchTheStringInitialisers() {
        func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }
        let integers = ["0", "42", "-42", "+7", "9223372036854775807", "-9223372036854775808", "9223372036854775808",
                        "-9223372036854775809", "", "-", "+", "12a", " 1", "1.0"]
        for text in integers {
            #expect(bytes(text).withUnsafeBufferPointer { PGText.integer($0) } == Int(text), "\(text)")
        }
        let doubles = ["0", "-0", "1", "1.5", "-1.5", "1764750000.123456", "1764750000.1234567", "0.1", "0.3",
                       "123456789012345.6", "9007199254740993", "0.00000000000000000000001", "1e3", "1.5E-7", "5.", ".5",
                       ".", "-", "", "Infinity", "-Infinity", "NaN", "0x10", "1,5", "3.14159265358979323846"]
        for text in doubles {
            let fast = bytes(text).withUnsafeBufferPointer { PGText.double($0) }
            let slow = Double(text)
            #expect(fast?.bitPattern == slow?.bitPattern || (fast?.isNaN == true && slow?.isNaN == true), "\(text)")
        }
    }

    /// record_outcomes.sql reads these rows with jsonb_to_recordset: every field must survive,
    /// and a text PostgreSQL cannot store (NUL, control characters) is cleaned as before.
    @Test func recordRowsCarryEveryOutcomeField() throws {
        let outcomes = [
            JobOutcome(id: 1, attempt: 1, .completed(messageName: "projects/p/messages/1")),
            JobOutcome(id: 2, attempt: 3, .completed(messageName: nil)),
            JobOutcome(id: 3, attempt: 2, .retry(error: "UNAVAILABLE: \"busy\"\nnul\u{0}here", delay: 1.5)),
            JobOutcome(id: 4, attempt: 1, .dead(reason: "INVALID_ARGUMENT: bad \\ path é")),
            JobOutcome(id: 5, attempt: 1, .discarded(reason: "pruned earlier")),
            JobOutcome(id: 6, attempt: 1, .pruned(token: "tok\"en", reason: "UNREGISTERED: gone")),
            JobOutcome(id: Int.max, attempt: 2, .released(delay: -3)),
        ]
        let rows = try JSONValue.parse(OutcomeRecorder.recordRows(outcomes))
        let expected = try JSONValue.parse(#"""
            [{"id":1,"att":1,"a":"completed","name":"projects/p/messages/1"},
             {"id":2,"att":3,"a":"completed"},
             {"id":3,"att":2,"a":"retried","delay":1.5,"err":"UNAVAILABLE: \"busy\"\nnul here"},
             {"id":4,"att":1,"a":"dead","err":"INVALID_ARGUMENT: bad \\ path é"},
             {"id":5,"att":1,"a":"discarded","err":"pruned earlier"},
             {"id":6,"att":1,"a":"pruned","err":"UNREGISTERED: gone","token":"tok\"en"},
             {"id":9223372036854775807,"att":2,"a":"released","delay":0.0}]
            """#)
        #expect(rows == expected)
        #expect(OutcomeRecorder.recordRows([]) == Array("[]".utf8))
        // The statement knows every word a row may carry (the words metrics and logs use too).
        for outcome in MessageOutcome.allCases {
            #expect(SQL.recordOutcomes.contains("'\(outcome.rawValue)'"), "record_outcomes.sql handles \(outcome.rawValue)")
        }
    }

    @Test func textArraysQuoteEveryElement() {
        #expect(PGValue.textArray(["a", "b,c", "d\"e", "f\\g"]) == .text(#"{"a","b,c","d\"e","f\\g"}"#))
        #expect(PGValue.textArray([]) == .text("{}"))
    }
}
