import Foundation
import Testing
@testable import FCM

@Suite struct ClassificationTests {
    static let now = Date(timeIntervalSince1970: 1_700_000_000)

    static func classify(_ status: Int, _ body: String, headers: [(name: String, value: String)] = []) -> SendClassification {
        SendClassification(httpStatus: status, headers: headers, body: Array(body.utf8), now: now)
    }

    static func fcmError(_ status: Int, _ statusName: String, _ code: String?, _ message: String, extra: String = "") -> String {
        var details: [String] = []
        if let code { details.append(#"{"@type":"type.googleapis.com/google.firebase.fcm.v1.FcmError","errorCode":"\#(code)"}"#) }
        if !extra.isEmpty { details.append(extra) }
        return #"{"error":{"code":\#(status),"message":"\#(message)","status":"\#(statusName)","details":[\#(details.joined(separator: ","))]}}"#
    }

    @Test func delivered() {
        #expect(Self.classify(200, #"{"name":"projects/myproject-b5ae1/messages/0:1500415314455276%31bd1c9631bd1c96"}"#)
                == .delivered(name: "projects/myproject-b5ae1/messages/0:1500415314455276%31bd1c9631bd1c96"))
        // Device-group management answers with the key.
        #expect(Self.classify(200, #"{"notification_key":"APA91bGHXQBB...9QgnYOEURwm0I3lmyqzk2TXQ"}"#)
                == .delivered(name: "APA91bGHXQBB...9QgnYOEURwm0I3lmyqzk2TXQ"))
        #expect(Self.classify(200, "") == .delivered(name: ""))
    }

    /// A send's answer is read without a JSON parse only when it is exactly `{"name": "..."}`
    /// with a plain string; every other shape goes through the full reading, with the same result.
    @Test func theNameOfASendIsReadWithOrWithoutTheFullParse() {
        #expect(SendClassification.onlyName(in: Array(#"{"name":"projects/p/messages/0:15%31"}"#.utf8)) == "projects/p/messages/0:15%31")
        #expect(SendClassification.onlyName(in: Array("{\n  \"name\": \"projects/p/messages/1\"\n}\n".utf8)) == "projects/p/messages/1")
        #expect(Self.classify(200, "{\n  \"name\": \"projects/p/messages/1\"\n}\n") == .delivered(name: "projects/p/messages/1"))
        let fullReading = [
            #"{"name":"caf\u00e9"}"#, #"{"name":"café"}"#, #"{"name":"a","extra":1}"#, #"{"name":5}"#,
            #"{"name":"a"} x"#, #"{"nam":"a"}"#, #"{"name":"a"#, "",
        ]
        for body in fullReading {
            #expect(SendClassification.onlyName(in: Array(body.utf8)) == nil, "\(body)")
        }
        #expect(Self.classify(200, #"{"name":"caf\u00e9"}"#) == .delivered(name: "café"))
        #expect(Self.classify(200, #"{"name":"café"}"#) == .delivered(name: "café"))
        #expect(Self.classify(200, #"{"name":"a","extra":1}"#) == .delivered(name: "a"))
        // Not a delivery whatever the name says: the error wins, and a 4xx is never read as one.
        if case .pruneToken(let code, _) = Self.classify(200, #"{"name":"a","error":"NotRegistered"}"#) {
            #expect(code == "UNREGISTERED")
        } else {
            Issue.record("a legacy error on a 200 was read as a delivery")
        }
        #expect(Self.classify(400, #"{"name":"projects/p/messages/1"}"#) != .delivered(name: "projects/p/messages/1"))
    }

    // Every row of the error table in docs/fcm.md, Errors.

    @Test func unregisteredPrunesTheToken() {
        let result = Self.classify(404, Self.fcmError(404, "NOT_FOUND", "UNREGISTERED", "Requested entity was not found."))
        #expect(result == .pruneToken(code: "UNREGISTERED", message: "Requested entity was not found."))
        #expect(result.reason == "UNREGISTERED: Requested entity was not found.")
    }

    @Test func invalidArgumentDeadLettersWithoutPruning() {
        let result = Self.classify(400, Self.fcmError(400, "INVALID_ARGUMENT", "INVALID_ARGUMENT",
                                                      "The registration token is not a valid FCM registration token"))
        #expect(result == .deadLetter(code: "INVALID_ARGUMENT", message: "The registration token is not a valid FCM registration token"))
    }

    @Test func badRequestNamesTheField() {
        let body = #"""
            {"error":{"code":400,"message":"Invalid value at 'message.android.ttl' (type.googleapis.com/google.protobuf.Duration), \"abc\"","status":"INVALID_ARGUMENT","details":[{"@type":"type.googleapis.com/google.rpc.BadRequest","fieldViolations":[{"field":"message.android.ttl","description":"Invalid value at 'message.android.ttl' (type.googleapis.com/google.protobuf.Duration), \"abc\""}]}]}}
            """#
        let result = Self.classify(400, body)
        #expect(result.reason == #"INVALID_ARGUMENT: Invalid value at 'message.android.ttl' (type.googleapis.com/google.protobuf.Duration), "abc""#)
        let failure = FCMFailure(httpStatus: 400, headers: [], body: Array(body.utf8), now: Self.now)
        #expect(failure?.fieldViolations.map(\.field) == ["message.android.ttl"])

        // A violation the message does not mention is appended.
        let terse = #"{"error":{"code":400,"message":"Request contains an invalid argument.","status":"INVALID_ARGUMENT","details":[{"@type":"type.googleapis.com/google.rpc.BadRequest","fieldViolations":[{"field":"message.data[0].value","description":"Invalid JSON payload received."}]}]}}"#
        #expect(Self.classify(400, terse).reason == "INVALID_ARGUMENT: Request contains an invalid argument. [message.data[0].value: Invalid JSON payload received.]")
    }

    @Test func senderIDMismatchDeadLetters() {
        #expect(Self.classify(403, Self.fcmError(403, "PERMISSION_DENIED", "SENDER_ID_MISMATCH", "SenderId mismatch"))
                == .deadLetter(code: "SENDER_ID_MISMATCH", message: "SenderId mismatch"))
    }

    @Test func quotaExceededRetriesAfterTheHeaderAndSlowsTheSender() {
        let quota = #"{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"subject":"project:myproject-b5ae1","description":"Send requests per minute"}]}"#
        let body = Self.fcmError(429, "RESOURCE_EXHAUSTED", "QUOTA_EXCEEDED", "Quota exceeded for quota metric 'Send requests'", extra: quota)
        let result = Self.classify(429, body, headers: [("Retry-After", "120")])
        #expect(result == .retry(code: "QUOTA_EXCEEDED",
                                 message: "Quota exceeded for quota metric 'Send requests' [quota: project:myproject-b5ae1: Send requests per minute]",
                                 retryAfter: 120, quota: .project))
        #expect(result.isQuota)
        // Header names are case-insensitive (HTTP/2 sends them lower-case).
        if case .retry(_, _, let after, _) = Self.classify(429, body, headers: [("retry-after", "7")]) { #expect(after == 7) }
        else { Issue.record("not a retry") }
    }

    @Test func retryInfoStandsInForAMissingHeader() {
        let info = #"{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"30s"}"#
        let result = Self.classify(429, Self.fcmError(429, "RESOURCE_EXHAUSTED", "QUOTA_EXCEEDED", "Quota exceeded", extra: info))
        #expect(result == .retry(code: "QUOTA_EXCEEDED", message: "Quota exceeded", retryAfter: 30, quota: .unattributed))
    }

    @Test func unavailableRetriesWithAnHTTPDate() {
        let result = Self.classify(503, Self.fcmError(503, "UNAVAILABLE", "UNAVAILABLE", "The service is currently unavailable."),
                                   headers: [("Retry-After", "Tue, 14 Nov 2023 22:13:27 GMT")])
        #expect(result == .retry(code: "UNAVAILABLE", message: "The service is currently unavailable.", retryAfter: 7, quota: nil))
        #expect(!result.isQuota)
    }

    @Test func internalRetries() {
        #expect(Self.classify(500, Self.fcmError(500, "INTERNAL", "INTERNAL", "Internal error encountered."))
                == .retry(code: "INTERNAL", message: "Internal error encountered.", retryAfter: nil, quota: nil))
    }

    @Test func thirdPartyAuthErrorDeadLettersRatherThanReauthenticating() {
        #expect(Self.classify(401, Self.fcmError(401, "UNAUTHENTICATED", "THIRD_PARTY_AUTH_ERROR", "Auth error from APNS or Web Push Service"))
                == .deadLetter(code: "THIRD_PARTY_AUTH_ERROR", message: "Auth error from APNS or Web Push Service"))
    }

    @Test func expiredAccessTokenReauthenticates() {
        let body = #"{"error":{"code":401,"message":"Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential.","status":"UNAUTHENTICATED"}}"#
        let result = Self.classify(401, body)
        #expect(result == .reauthenticate(message: "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential."))
        #expect(Self.classify(401, "<HTML><HEAD><TITLE>Unauthorized</TITLE></HEAD></HTML>") == .reauthenticate(message: "HTTP 401: <HTML><HEAD><TITLE>Unauthorized</TITLE></HEAD></HTML>"))
    }

    // Falling back from errorCode to status to HTTP status.

    @Test func permissionDeniedWithoutFCMErrorDeadLetters() {
        let body = #"{"error":{"code":403,"message":"Permission 'cloudmessaging.messages.create' denied on resource '//cloudresourcemanager.googleapis.com/projects/p' (or it may not exist).","status":"PERMISSION_DENIED","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"IAM_PERMISSION_DENIED"}]}}"#
        if case .deadLetter(let code, _) = Self.classify(403, body) { #expect(code == "PERMISSION_DENIED") } else { Issue.record("not dead-lettered") }
    }

    @Test func notFoundWithoutUnregisteredNeverPrunes() {
        // A wrong project id answers 404 too; pruning on it would delete every token.
        let body = #"{"error":{"code":404,"message":"Requested entity was not found.","status":"NOT_FOUND"}}"#
        #expect(Self.classify(404, body) == .deadLetter(code: "NOT_FOUND", message: "Requested entity was not found."))
        #expect(Self.classify(404, "Not Found") == .deadLetter(code: "NOT_FOUND", message: "HTTP 404: Not Found"))
    }

    @Test func unknownFCMCodesFallBackToTheStatus() {
        #expect(Self.classify(500, Self.fcmError(500, "INTERNAL", "UNSPECIFIED_ERROR", "No more information"))
                == .retry(code: "INTERNAL", message: "No more information", retryAfter: nil, quota: nil))
        #expect(Self.classify(400, Self.fcmError(400, "INVALID_ARGUMENT", "SOMETHING_NEW", "Newer than us"))
                == .deadLetter(code: "INVALID_ARGUMENT", message: "Newer than us"))
        #expect(Self.classify(429, #"{"error":{"code":429,"message":"Too many","status":"RESOURCE_EXHAUSTED"}}"#)
                == .retry(code: "QUOTA_EXCEEDED", message: "Too many", retryAfter: nil, quota: .unattributed))
    }

    @Test(arguments: [
        (500, "INTERNAL", false), (502, "HTTP_502", false), (503, "UNAVAILABLE", false), (504, "HTTP_504", false),
        (429, "QUOTA_EXCEEDED", true), (408, "DEADLINE_EXCEEDED", false),
    ])
    func bareStatusesRetry(_ status: Int, _ code: String, _ slow: Bool) {
        let result = Self.classify(status, "<html><body>\n  upstream   error\n</body></html>", headers: [("Retry-After", "3")])
        #expect(result == .retry(code: code, message: "HTTP \(status): <html><body> upstream error </body></html>", retryAfter: 3, quota: slow ? .unattributed : nil))
    }

    @Test(arguments: [(400, "INVALID_ARGUMENT"), (403, "PERMISSION_DENIED"), (404, "NOT_FOUND"), (413, "HTTP_413"), (409, "HTTP_409")])
    func bareClientErrorsDeadLetter(_ status: Int, _ code: String) {
        #expect(Self.classify(status, "") == .deadLetter(code: code, message: "HTTP \(status)"))
    }

    // Legacy names (docs/fcm.md, Legacy error names; docs/legacy.md 3), as device-group management answers.

    @Test(arguments: [
        ("MissingRegistration", 200, SendClassification.deadLetter(code: "INVALID_ARGUMENT", message: "MissingRegistration: the request has no registration token")),
        ("InvalidRegistration", 200, .deadLetter(code: "INVALID_ARGUMENT", message: "InvalidRegistration: the registration token is malformed")),
        ("NotRegistered", 200, .pruneToken(code: "UNREGISTERED", message: "NotRegistered: the registration token is no longer registered")),
        ("InvalidPackageName", 200, .deadLetter(code: "INVALID_ARGUMENT", message: "InvalidPackageName: the token's package name does not match restricted_package_name")),
        ("MismatchSenderId", 200, .deadLetter(code: "SENDER_ID_MISMATCH", message: "MismatchSenderId: the token belongs to another sender")),
        ("InvalidParameters", 400, .deadLetter(code: "INVALID_ARGUMENT", message: "InvalidParameters: a parameter has a wrong name or type")),
        ("MessageTooBig", 200, .deadLetter(code: "INVALID_ARGUMENT", message: "MessageTooBig: the payload is over 4096 bytes (2048 for topics)")),
        ("InvalidDataKey", 200, .deadLetter(code: "INVALID_ARGUMENT", message: "InvalidDataKey: a data key is reserved (from, gcm..., google...)")),
        ("InvalidTtl", 200, .deadLetter(code: "INVALID_ARGUMENT", message: "InvalidTtl: the time to live is not a whole number of seconds from 0 to 2419200")),
        ("Unavailable", 200, .retry(code: "UNAVAILABLE", message: "Unavailable: FCM could not process the request in time", retryAfter: nil, quota: nil)),
        ("InternalServerError", 500, .retry(code: "INTERNAL", message: "InternalServerError: FCM had an internal error", retryAfter: nil, quota: nil)),
        ("DeviceMessageRateExceeded", 200, .retry(code: "QUOTA_EXCEEDED", message: "DeviceMessageRateExceeded: too many messages to this device", retryAfter: nil, quota: .device)),
        ("TopicsMessageRateExceeded", 200, .retry(code: "QUOTA_EXCEEDED", message: "TopicsMessageRateExceeded: too many messages to this topic", retryAfter: nil, quota: .topic)),
        ("InvalidApnsCredential", 200, .deadLetter(code: "THIRD_PARTY_AUTH_ERROR", message: "InvalidApnsCredential: the APNs key or certificate is missing or expired")),
    ])
    func legacyNames(_ name: String, _ status: Int, _ expected: SendClassification) {
        #expect(Self.classify(status, #"{"error":"\#(name)"}"#) == expected)
        // The same name inside a legacy results list, and as plain text.
        #expect(Self.classify(status, #"{"multicast_id":108,"success":0,"failure":1,"results":[{"error":"\#(name)"}]}"#) == expected)
        #expect(Self.classify(status, "Error=\(name)") == expected)
    }

    @Test func legacyAuthenticationFailureReauthenticates() {
        #expect(Self.classify(401, "<HTML><TITLE>Unauthorized</TITLE>Error 401</HTML>") == .reauthenticate(message: "HTTP 401: <HTML><TITLE>Unauthorized</TITLE>Error 401</HTML>"))
        if case .reauthenticate = Self.classify(401, #"{"error":"SomethingElse"}"#) {} else { Issue.record("401 with a legacy body must reauthenticate") }
        #expect(Self.classify(200, #"{"error":"SomethingElse"}"#) == .deadLetter(code: "SomethingElse", message: "SomethingElse: unknown legacy error"))
    }

    // Keeping secrets out of reasons.

    @Test func reasonsNeverCarryCredentials() {
        let jwt = "eyJhbGciOiJSUzI1NiIsInR5cCI6IkpXVCJ9.eyJpc3MiOiJ4In0.c2lnbmF0dXJl"
        let body = #"{"error":{"code":401,"message":"Bad header Authorization: Bearer ya29.a0AfH6SMBx-secret_token.value for assertion \#(jwt) and ya29.other","status":"UNAUTHENTICATED"}}"#
        let result = Self.classify(401, body)
        let reason = result.reason ?? ""
        #expect(!reason.contains("ya29"))
        #expect(!reason.contains("secret_token"))
        #expect(!reason.contains("eyJ"))
        #expect(reason == "UNAUTHENTICATED: Bad header Authorization: Bearer [redacted] for assertion [redacted] and [redacted]")
    }

    @Test func exactSecretsAreRemovedToo() {
        let token = "bk3RNwTe3H0:CI2k_HHwgIpoDKCIZvvDMExUdFQ3P1"
        let body = #"{"error":{"code":400,"message":"The registration token bk3RNwTe3H0:CI2k_HHwgIpoDKCIZvvDMExUdFQ3P1 is not valid","status":"INVALID_ARGUMENT"}}"#
        let result = SendClassification(httpStatus: 400, headers: [], body: Array(body.utf8), now: Self.now, redacting: [token])
        #expect(result == .deadLetter(code: "INVALID_ARGUMENT", message: "The registration token [redacted] is not valid"))
        let transport = SendClassification(transport: TransportFailure(.connection, detail: "proxy said: \(token)"), redacting: [token])
        #expect(transport.reason == "CONNECTION: proxy said: [redacted]")
    }

    @Test func longAnswersAreCut() {
        let body = String(repeating: "x", count: 5000)
        guard case .retry(_, let message, _, _) = Self.classify(502, body) else { Issue.record("not a retry"); return }
        #expect(message.count <= 501)
        #expect(message.hasSuffix("…"))
    }

    @Test(arguments: [
        (TransportFailure.Kind.timeout, "TIMEOUT"), (.connection, "CONNECTION"), (.tls, "TLS"), (.other, "TRANSPORT"),
    ])
    func transportFailuresRetry(_ kind: TransportFailure.Kind, _ code: String) {
        let result = SendClassification(transport: TransportFailure(kind, detail: "Operation timed out after 10000 milliseconds"))
        #expect(result == .retry(code: code, message: "Operation timed out after 10000 milliseconds", retryAfter: nil, quota: nil))
        #expect(result.reason == "\(code): Operation timed out after 10000 milliseconds")
    }
}
