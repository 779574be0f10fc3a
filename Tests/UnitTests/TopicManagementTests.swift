import FCM
import Foundation
import HTTPClient
import Testing

/// How the pool reads Instance ID's answers to batchAdd / batchRemove.
@Suite struct TopicManagementTests {
    func response(_ status: Int, _ body: String, headers: [(name: String, value: String)] = []) -> HTTPResponse {
        HTTPResponse(status: status, headers: headers, body: Array(body.utf8))
    }

    @Test func theRequestIsTheAdminSDKs() throws {
        let request = TopicManagement.request(base: "https://iid.example/", action: .remove, topic: "news", tokens: ["a", "b"],
                                              authorization: "Bearer xyz")
        #expect(request.url == "https://iid.example/iid/v1:batchRemove")
        #expect(request.headers.contains("access_token_auth: true") && request.headers.contains("Authorization: Bearer xyz"))
        #expect(String(decoding: request.body, as: UTF8.self) == #"{"to":"/topics/news","registration_tokens":["a","b"]}"#)
    }

    @Test func eachTokenGetsItsOwnAnswer() {
        let answer = TopicManagement.interpret(response(200, #"{"results": [{}, {"error": "NOT_FOUND"}, {}]}"#), tokenCount: 3)
        #expect(answer == .perToken([nil, "NOT_FOUND", nil]))
        // One result short: nothing can be told per token, so the whole request is asked again.
        guard case .retry = TopicManagement.interpret(response(200, #"{"results": [{}]}"#), tokenCount: 3) else {
            Issue.record("a short answer must be retried")
            return
        }
    }

    @Test func wholeRequestAnswers() {
        let quota = TopicManagement.interpret(response(429, "slow down", headers: [("retry-after", "7")]), tokenCount: 1)
        #expect(quota == .retry(reason: "RESOURCE_EXHAUSTED: HTTP 429: slow down", retryAfter: 7, quota: true, authentication: false))
        if case .retry(_, let after, false, false) = TopicManagement.interpret(response(503, "", headers: [("retry-after", "3")]), tokenCount: 1) {
            #expect(after == 3)
        } else {
            Issue.record("503 is retried")
        }
        if case .retry(let reason, nil, false, true) = TopicManagement.interpret(response(401, "token sk-live-123456 refused"), tokenCount: 1,
                                                                                   secrets: ["sk-live-123456"]) {
            #expect(!reason.contains("sk-live-123456") && reason.contains("[redacted]"), "\(reason)")
        } else {
            Issue.record("401 refreshes the token and retries")
        }
        #expect(TopicManagement.interpret(response(400, #"{"error": "InvalidTopic"}"#), tokenCount: 2)
                == .refused(reason: #"HTTP 400: {"error": "InvalidTopic"}"#))
    }
}
