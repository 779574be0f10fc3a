import Foundation
import Testing
@testable import FCM
import JSON

extension FCMFixtures {
    /// One answer of Tests/Fixtures/FCM/answers/answers.json: what FCM (or something between
    /// Herald and FCM) sent, where it was seen, and what Herald must do with it.
    struct Answer: CustomTestStringConvertible, Sendable {
        var id: String
        var status: Int
        var headers: [(name: String, value: String)]
        var body: [UInt8]
        var source: JSONValue
        var action: String
        var retryAfterSeconds: Double?
        var statedPerSecond: Double?
        /// Set while the classifier does not yet read this answer as it must.
        var awaitingClassifier: String?
        var testDescription: String { id }
    }

    static func answers() throws -> [Answer] {
        try load("answers/answers.json")["answers"]!.arrayValue!.map { item in
            let headers = (item["headers"]?.objectValue ?? JSONObject()).map { (name: $0.key, value: $0.value.stringValue ?? "") }
            let body: [UInt8]
            if let text = item["body_text"]?.stringValue {
                body = Array(text.utf8)
            } else {
                body = Array(item["body"]!.serialized.utf8)
            }
            return Answer(id: item["id"]!.stringValue!, status: item["status"]!.intValue!, headers: headers, body: body,
                          source: item["source"]!, action: item["action"]!.stringValue!,
                          retryAfterSeconds: item["retry_after_seconds"]?.doubleValue,
                          statedPerSecond: item["stated_per_second"]?.doubleValue,
                          awaitingClassifier: item["awaiting_classifier"]?.stringValue)
        }
    }

    /// The actions the corpus may name (its `actions` member describes each).
    static func answerActions() throws -> Set<String> {
        Set((try load("answers/answers.json")["actions"]?.objectValue ?? JSONObject()).map(\.key))
    }
}

/// Every answer body of the corpus, fed through Herald's classifier, leads to the action the
/// corpus states for it: what Herald does with FCM's real answers, not only with the emulator's.
@Suite struct FCMAnswerCorpusTests {
    static let answers = (try? FCMFixtures.answers()) ?? []
    /// A moment for HTTP-date Retry-After values.
    static let now = Date(timeIntervalSince1970: 1_800_000_000)

    /// The corpus's word for what a classification makes Herald do.
    static func action(of classification: SendClassification) -> (action: String, retryAfter: Double?) {
        switch classification {
        case .delivered: return ("complete", nil)
        case .pruneToken: return ("prune", nil)
        case .deadLetter: return ("dead-letter", nil)
        case .reauthenticate: return ("refresh-token", nil)
        case .retry(_, _, let retryAfter, let quota):
            switch quota {
            case nil: return (retryAfter == nil ? "retry" : "retry-after", retryAfter)
            case .project?: return ("project-quota", retryAfter)
            case .device?: return ("device-quota", retryAfter)
            case .topic?: return ("topic-quota", retryAfter)
            case .unattributed?: return ("quota-by-context", retryAfter)
            }
        }
    }

    @Test func theCorpusCoversFCMsAnswersAndSaysWhereEachCameFrom() throws {
        let answers = try FCMFixtures.answers()
        let actions = try FCMFixtures.answerActions()
        #expect(answers.count >= 20)
        #expect(Set(answers.map(\.id)).count == answers.count, "ids are unique")
        for answer in answers {
            #expect(actions.contains(answer.action), "\(answer.id): unknown action \(answer.action)")
            let source = answer.source
            #expect(source["url"]?.stringValue != nil || source["path"]?.stringValue != nil, "\(answer.id) names where it came from")
            #expect(source["repository"]?.stringValue != nil || source["url"]?.stringValue?.hasPrefix("https://") == true, "\(answer.id)")
            let note = source["note"]?.stringValue ?? ""
            #expect(note.count > 10, "\(answer.id) says what the source shows")
            if answer.action == "retry-after" { #expect(answer.retryAfterSeconds != nil, "\(answer.id) states the wait") }
        }
        // The kinds of answer the corpus is meant to hold, each at least once.
        let bodies = answers.map { String(decoding: $0.body, as: UTF8.self) }
        for needle in ["\"UNREGISTERED\"", "google.rpc.BadRequest", "\"SENDER_ID_MISMATCH\"", "google.rpc.QuotaFailure", "RATE_LIMIT_EXCEEDED",
                       "\"UNAVAILABLE\"", "\"INTERNAL\"", "\"THIRD_PARTY_AUTH_ERROR\"", "\"UNAUTHENTICATED\"", "\"PERMISSION_DENIED\"",
                       "<html", "notification_key", "DeviceMessageRateExceeded"] {
            #expect(bodies.contains { $0.contains(needle) }, "no answer holds \(needle)")
        }
        #expect(bodies.contains { $0.contains("\"QUOTA_EXCEEDED\"") && !$0.contains("QuotaFailure") }, "QUOTA_EXCEEDED without QuotaFailure")
    }

    @Test(arguments: answers)
    func heraldTakesTheStatedAction(_ answer: FCMFixtures.Answer) {
        let check = {
            let classification = SendClassification(httpStatus: answer.status, headers: answer.headers, body: answer.body, now: Self.now)
            let taken = Self.action(of: classification)
            #expect(taken.action == answer.action, "\(answer.id): \(classification)")
            if let seconds = answer.retryAfterSeconds {
                #expect(taken.retryAfter == seconds, "\(answer.id): waits \(String(describing: taken.retryAfter))")
            }
            // A quota answer that states the project's rate (stated_per_second) sets that rate: the
            // sender reads it from the answer beside the classification.
            if let perSecond = answer.statedPerSecond {
                let stated = FCMFailure(httpStatus: answer.status, headers: answer.headers, body: answer.body, now: Self.now)?.statedQuota
                #expect(stated?.rate == perSecond, "\(answer.id): states \(String(describing: stated))")
            }
        }
        if let reason = answer.awaitingClassifier {
            withKnownIssue(Comment(rawValue: reason)) { check() }
        } else {
            check()
        }
    }
}
