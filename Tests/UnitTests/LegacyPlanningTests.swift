import FCM
import JSON
import Queue
import Testing
import Worker

/// Legacy rows as the worker meets them: translated when the request is built, with the clock of
/// that attempt; refused ones settled with their Table 9 code (docs/legacy.md 3) before any request.
@Suite struct LegacyPlanningTests {
    func job(_ message: String, attempt: Int = 1, pruned: Bool = false, validateOnly: Bool = false) -> ClaimedJob {
        ClaimedJob(id: 9, message: Array(message.utf8), attempt: attempt, tokenPruned: pruned, validateOnly: validateOnly)
    }

    func sent(_ preparation: Preparation) throws -> (body: JSONValue, token: String?) {
        guard case .send(let body, let token) = preparation else {
            throw LegacyPlanningFailure("not sent: \(preparation)")
        }
        return (try JSONValue.parse(body), token)
    }

    @Test func aLegacyRowIsSentAsItsTranslationWithTheClockOfEachAttempt() throws {
        let row = #"{"to":"device-1","time_to_live":600,"priority":"high","notification":{"title":"T","badge":"3"}}"#
        let first = try sent(Planning.prepare(job(row), now: 1_700_000_000))
        #expect(first.token == "device-1")
        #expect(first.body["validate_only"] == nil)
        let message = try #require(first.body["message"])
        #expect(message["token"] == "device-1")
        #expect(message["android"] == ["priority": "HIGH", "ttl": "600s"])
        #expect(message["apns"]?["headers"] == ["apns-priority": "10", "apns-expiration": "1700000600"])
        #expect(message["apns"]?["payload"] == ["aps": ["badge": 3]])
        // A retry ten minutes later counts the time to live from its own request.
        let retry = try sent(Planning.prepare(job(row, attempt: 2), now: 1_700_000_600))
        #expect(retry.body["message"]?["apns"]?["headers"]?["apns-expiration"] == "1700001200")
    }

    @Test func dryRunsAskFCMToValidateOnly() throws {
        let legacy = try sent(Planning.prepare(job(#"{"registration_ids":["a"],"dry_run":true,"data":{"k":"v"}}"#), now: 0))
        #expect(legacy.body["validate_only"] == true)
        #expect(legacy.body["message"] == ["token": "a", "data": ["k": "v"]])
        let column = try sent(Planning.prepare(job(#"{"token":"b"}"#, validateOnly: true)))
        #expect(column.body["validate_only"] == true)
        let plain = try sent(Planning.prepare(job(#"{"token":"b"}"#)))
        #expect(plain.body["validate_only"] == nil)
    }

    @Test func refusedLegacyRowsAreDeadLetteredWithTheirCodeAndPath() {
        #expect(Planning.prepare(job(#"{"to":"d","time_to_live":-5}"#))
                == .settled(JobOutcome(id: 9, attempt: 1, .dead(reason: "InvalidTtl at legacy.time_to_live: must be a whole number of seconds from 0 to 2419200 (4 weeks), not -5"))))
        #expect(Planning.prepare(job(#"{"to":"d","data":{"from":"x"}}"#))
                == .settled(JobOutcome(id: 9, attempt: 1, .dead(reason: #"InvalidDataKey at legacy.data.from: "from" is reserved by FCM (from, message_type, notification, google*, gcm*)"#))))
        guard case .settled(let outcome) = Planning.prepare(job(#"{"registration_ids":["a","b"],"data":{"k":"v"}}"#)),
              case .dead(let reason) = outcome.action else {
            Issue.record("a two-token row was not settled")
            return
        }
        #expect(reason.hasPrefix("InvalidParameters at legacy.registration_ids: 2 registration tokens in one job"))
    }

    @Test func aPrunedLegacyTokenIsDiscardedWithoutARequest() {
        guard case .settled(let outcome) = Planning.prepare(job(#"{"registration_ids":["gone"],"data":{"k":"v"}}"#, pruned: true)),
              case .discarded = outcome.action else {
            Issue.record("not discarded")
            return
        }
        #expect(outcome.id == 9)
    }

    @Test func v1MessagesAreNotTakenForLegacy() throws {
        // A condition with a title is valid in both formats; without a legacy-only key it stays v1.
        let both = try sent(Planning.prepare(job(#"{"condition":"'a' in topics","notification":{"title":"T"},"data":{"n":"1"}}"#)))
        #expect(both.body["message"] == ["condition": "'a' in topics", "notification": ["title": "T"], "data": ["n": "1"]])
    }
}

struct LegacyPlanningFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
