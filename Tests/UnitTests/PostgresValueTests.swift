import Postgres
import Queue
import Testing

/// Values Herald hands to PostgreSQL, and what it prints about connections.
@Suite struct PostgresValueTests {
    @Test func passwordsNeverReachMessages() {
        #expect(PGConnection.redacted("postgresql://herald:s3cret@db:5432/app") == "postgresql://herald:***@db:5432/app")
        #expect(PGConnection.redacted("host=db user=herald password=s3cret dbname=app") == "host=db user=herald password=*** dbname=app")
        #expect(PGConnection.redacted("host=db password='s3 cret' dbname=app") == "host=db password=*** dbname=app")
        #expect(PGConnection.redacted("postgresql://db/app?user=herald&password=s3cret&sslmode=require")
                == "postgresql://db/app?user=herald&password=***&sslmode=require")
        #expect(PGConnection.redacted("postgresql://herald@127.0.0.1:5432/postgres") == "postgresql://herald@127.0.0.1:5432/postgres")
    }

    @Test func errorTextsAreStorable() {
        #expect(JobStore.clean("INTERNAL: bad\u{0}byte\u{7}here\nnext\tline") == "INTERNAL: bad byte here\nnext\tline")
        #expect(JobStore.clean(String(repeating: "x", count: 5000)).count == 2000)
    }

    @Test func textArraysQuoteEveryElement() {
        #expect(JobStore.textArray(["a", "b,c", "d\"e", "f\\g"]) == .text(#"{"a","b,c","d\"e","f\\g"}"#))
        #expect(JobStore.textArray([]) == .text("{}"))
    }
}
