import Crypto
import Emulator
import Foundation
import JSON
import Testing
import TestSupport

@Suite struct EmulatorTokenEndpointTests {
    @Test func acceptsAGoodGrant() throws {
        let emulator = try startEmulator { $0.tokenLifetimeSeconds = 1234 }
        defer { emulator.stop() }
        let account = try TestAccount(emulator)
        for audience in [account.tokenURI, "https://oauth2.googleapis.com/token"] {
            let answer = try account.exchange(try account.assertion(audience: audience))
            #expect(answer.status == 200, "\(answer.body)")
            #expect(answer.json?["token_type"]?.stringValue == "Bearer")
            #expect(answer.json?["expires_in"]?.intValue == 1234)
            #expect(answer.json?["access_token"]?.stringValue?.isEmpty == false)
        }
        #expect(emulator.tokensIssued == 2)
        // The broad scope the Admin SDKs ask for is also good for FCM.
        #expect(try account.exchange(try account.assertion(scope: "https://www.googleapis.com/auth/cloud-platform https://www.googleapis.com/auth/userinfo.email")).status == 200)
    }

    @Test func trustsAServiceAccountWrittenByAnEarlierRun() throws {
        let earlier = try startEmulator()
        let json = try earlier.serviceAccountJSON(projectID: "kept")
        earlier.stop()
        let later = try startEmulator()
        defer { later.stop() }
        var account = try TestAccount(later)  // only for its helpers; the key below is the earlier one's
        let document = try JSONValue.parse(json)
        account.email = try #require(document["client_email"]?.stringValue)
        account.key = try RSAPrivateKey(pem: try #require(document["private_key"]?.stringValue))
        account.projectID = "kept"
        #expect(try account.exchange(try account.assertion(audience: "https://oauth2.googleapis.com/token")).status == 400)
        try later.trustServiceAccount(json: json)
        let answer = try account.exchange(try account.assertion(audience: "https://oauth2.googleapis.com/token"))
        #expect(answer.status == 200, "\(answer.body)")
        let token = try #require(answer.json?["access_token"]?.stringValue)
        #expect(try sendMessage(later, project: "kept", accessToken: token, body: tokenMessage("d")).status == 200)
    }

    @Test func rejectsBadGrants() throws {
        let emulator = try startEmulator()
        defer { emulator.stop() }
        let account = try TestAccount(emulator)
        let stranger = try RSAPrivateKey.generate(bits: 2048)
        let now = Date().timeIntervalSince1970
        let cases: [(String, String, String, String)] = [
            ("signed by another key", try account.assertion(signingKey: stranger), "invalid_grant", "Invalid JWT Signature."),
            ("wrong scope", try account.assertion(scope: "https://www.googleapis.com/auth/devstorage.read_only"), "invalid_scope", "firebase.messaging"),
            ("expired", try account.assertion(issuedAt: now - 7200, lifetime: 3600), "invalid_grant", "short-lived"),
            ("longer than an hour", try account.assertion(lifetime: 7200), "invalid_grant", "short-lived"),
            ("wrong audience", try account.assertion(audience: "https://example.com/token"), "invalid_grant", "audience"),
            ("unknown account", try account.assertion(issuer: "someone@else.iam.gserviceaccount.com"), "invalid_grant", "account not found"),
            ("not a JWT", "not-a-jwt", "invalid_grant", "not a JWT"),
        ]
        for (name, assertion, error, fragment) in cases {
            let answer = try account.exchange(assertion)
            #expect(answer.status == 400, "\(name): \(answer.status)")
            #expect(answer.json?["error"]?.stringValue == error, "\(name): \(answer.body)")
            #expect(answer.json?["error_description"]?.stringValue?.contains(fragment) == true, "\(name): \(answer.body)")
        }
        let wrongGrant = try curl(account.tokenURI, method: "POST", headers: ["content-type": "application/x-www-form-urlencoded"],
                                  body: "grant_type=client_credentials", over: .h2c)
        #expect(wrongGrant.status == 400)
        #expect(wrongGrant.json?["error"]?.stringValue == "unsupported_grant_type")
        #expect(emulator.tokensIssued == 0)
    }
}

@Suite struct EmulatorSendTests {
    @Test func deliversAndRecordsInOrder() throws {
        let emulator = try startEmulator()
        defer { emulator.stop() }
        let account = try TestAccount(emulator)
        let token = try account.accessToken()
        var names: [String] = []
        for i in 1...3 {
            let answer = try sendMessage(emulator, project: account.projectID, accessToken: token,
                                         body: tokenMessage("device-1", data: ["n": String(i)]), over: i == 2 ? .http1 : .h2c)
            #expect(answer.status == 200, "\(answer.body)")
            names.append(try #require(answer.json?["name"]?.stringValue))
        }
        #expect(names.allSatisfy { $0.hasPrefix("projects/herald-test/messages/") })
        let ids = names.compactMap { Int($0.split(separator: "/").last ?? "") }
        #expect(ids.count == 3 && ids == ids.sorted() && Set(ids).count == 3)

        let listed = try curl(emulator.baseURL + "/emulator/messages?token=device-1")
        let messages = try #require(listed.json?["messages"]?.arrayValue)
        #expect(messages.map { $0["message"]?["data"]?["n"]?.stringValue } == ["1", "2", "3"])
        #expect(messages.map { $0["name"]?.stringValue } == names)
        #expect(messages.allSatisfy { $0["time"]?.stringValue?.hasSuffix("Z") == true })

        // validate_only validates without delivering.
        let dry = try sendMessage(emulator, project: account.projectID, accessToken: token,
                                  body: #"{"message":{"token":"device-1"},"validate_only":true}"#)
        #expect(dry.status == 200)
        #expect(emulator.deliveredMessages(token: "device-1").count == 3)

        let stats = try #require(try curl(emulator.baseURL + "/emulator/stats").json)
        #expect(stats["requests"]?.intValue == 4)
        #expect(stats["delivered"]?.intValue == 3)
        #expect(stats["by_status"]?["200"]?.intValue == 4)
        #expect((stats["http1_requests"]?.intValue ?? 0) >= 1)
        #expect((stats["http2_requests"]?.intValue ?? 0) >= 3)

        #expect(try curl(emulator.baseURL + "/emulator/messages", method: "DELETE").status == 204)
        #expect(try curl(emulator.baseURL + "/emulator/messages").json?["count"]?.intValue == 0)
        #expect(try curl(emulator.baseURL + "/emulator/stats").json?["requests"]?.intValue == 0)
    }

    @Test func bearerTokensAreRequired() throws {
        let emulator = try startEmulator { $0.tokenLifetimeSeconds = 1 }
        defer { emulator.stop() }
        let account = try TestAccount(emulator)
        let body = tokenMessage("device-1")

        let missing = try sendMessage(emulator, project: account.projectID, accessToken: nil, body: body)
        #expect(missing.status == 401)
        #expect(missing.json?["error"]?["status"]?.stringValue == "UNAUTHENTICATED")
        #expect(missing.fcmErrorCode == nil)
        #expect(missing.json?["error"]?["message"]?.stringValue?.contains("missing required authentication credential") == true)

        let unknown = try sendMessage(emulator, project: account.projectID, accessToken: "ya29.made-up", body: body)
        #expect(unknown.status == 401)
        #expect(unknown.fcmErrorCode == nil)

        let issuedAt = Date()
        let token = try account.accessToken()
        #expect(try sendMessage(emulator, project: "another-project", accessToken: token, body: body).json?["error"]?["status"]?.stringValue == "PERMISSION_DENIED")
        waitForClock(toPass: issuedAt.addingTimeInterval(1.2))
        let expired = try sendMessage(emulator, project: account.projectID, accessToken: token, body: body)
        #expect(expired.status == 401)
        #expect(expired.json?["error"]?["status"]?.stringValue == "UNAUTHENTICATED")
        #expect(emulator.deliveredMessages().isEmpty)
    }

    @Test func faultTokensAnswerAsDocumented() throws {
        let emulator = try startEmulator()
        defer { emulator.stop() }
        let account = try TestAccount(emulator)
        let token = try account.accessToken()
        func send(_ device: String) throws -> CurlResult {
            try sendMessage(emulator, project: account.projectID, accessToken: token, body: tokenMessage(device))
        }
        // (token, [(status, errorCode, retry-after)] for successive attempts)
        let expectations: [(String, [(Int, String?, String?)])] = [
            ("fail-unregistered-1", [(404, "UNREGISTERED", nil), (404, "UNREGISTERED", nil)]),
            ("fail-invalid-1", [(400, "INVALID_ARGUMENT", nil), (400, "INVALID_ARGUMENT", nil)]),
            ("fail-mismatch-1", [(403, "SENDER_ID_MISMATCH", nil)]),
            ("fail-auth-1", [(401, "THIRD_PARTY_AUTH_ERROR", nil)]),
            ("fail-quota-7-a", [(429, "QUOTA_EXCEEDED", "7"), (200, nil, nil), (200, nil, nil)]),
            ("fail-quota", [(429, "QUOTA_EXCEEDED", nil), (429, "QUOTA_EXCEEDED", nil)]),
            ("fail-unavailable-3-a", [(503, "UNAVAILABLE", "3"), (200, nil, nil)]),
            ("fail-internal-2-a", [(500, "INTERNAL", nil), (500, "INTERNAL", nil), (200, nil, nil)]),
        ]
        for (device, attempts) in expectations {
            for (index, expected) in attempts.enumerated() {
                let answer = try send(device)
                #expect(answer.status == expected.0, "\(device) attempt \(index + 1): \(answer.body)")
                #expect(answer.fcmErrorCode == expected.1, "\(device) attempt \(index + 1): \(answer.body)")
                #expect(answer.headers["retry-after"] == expected.2, "\(device) attempt \(index + 1)")
            }
        }
        let mismatch = try send("fail-mismatch-2")
        #expect(mismatch.json?["error"]?["status"]?.stringValue == "PERMISSION_DENIED")
        // Attempts are per token string: a new suffix starts over.
        #expect(try send("fail-quota-7-b").status == 429)
        // DELETE /emulator/messages forgets the attempts too.
        _ = try curl(emulator.baseURL + "/emulator/messages", method: "DELETE")
        #expect(try send("fail-internal-2-a").status == 500)
    }

    @Test func validationErrorsNameTheField() throws {
        let emulator = try startEmulator()
        defer { emulator.stop() }
        let account = try TestAccount(emulator)
        let token = try account.accessToken()
        let cases: [(String, String)] = [
            (#"{"message":{"token":"t","android":{"ttl":"10 minutes"}}}"#, "message.android.ttl"),
            (#"{"message":{"token":"t","data":{"from":"me"}}}"#, "message.data"),
            (#"{"message":{"token":"t","topic":"news"}}"#, "message.topic"),
            (#"{"message":{"token":"t","apns":{"headers":{"apns-priority":"9"}}}}"#, "message.apns.headers"),
            (#"{"message":{"token":"t","apns":{"live_activity_token":"la","payload":{"aps":{"event":"start","timestamp":1,"content-state":{}}}}}}"#,
             "message.apns.payload.aps.attributes-type"),
            (#"{"message":{"topic":"news","data":{"x":"\#(String(repeating: "y", count: 2100))"}}}"#, "message"),
            ("{not json", ""),
        ]
        for (body, field) in cases {
            let answer = try sendMessage(emulator, project: account.projectID, accessToken: token, body: body)
            #expect(answer.status == 400, "\(body)")
            #expect(answer.json?["error"]?["status"]?.stringValue == "INVALID_ARGUMENT")
            #expect(answer.fcmErrorCode == "INVALID_ARGUMENT")
            let violation = answer.json?["error"]?["details"]?.arrayValue?.first { $0["@type"]?.stringValue == "type.googleapis.com/google.rpc.BadRequest" }
            #expect(violation?["fieldViolations"]?.arrayValue?.first?["field"]?.stringValue == field, "\(answer.body)")
        }
        #expect(emulator.deliveredMessages().isEmpty)
    }

    @Test func latencyDelaysAnswersWithoutSerializingThem() throws {
        let emulator = try startEmulator { $0.latencyMilliseconds = 300 }
        defer { emulator.stop() }
        let account = try TestAccount(emulator)
        let token = try account.accessToken()
        let answer = try sendMessage(emulator, project: account.projectID, accessToken: token, body: tokenMessage("slow"))
        #expect(answer.status == 200)
        #expect(answer.seconds >= 0.3, "\(answer.seconds)s")
        // 200 sends, 100 in flight: one after another they would take a minute.
        let bodyFile = NSTemporaryDirectory() + "herald-latency-\(UUID().uuidString).json"
        try Data(tokenMessage("slow-many").utf8).write(to: URL(fileURLWithPath: bodyFile))
        defer { try? FileManager.default.removeItem(atPath: bodyFile) }
        let started = Date()
        let output = try h2load(["-n", "200", "-c", "2", "-m", "50", "-d", bodyFile, "-H", "authorization: Bearer \(token)",
                                 "-H", "content-type: application/json", emulator.sendURL(projectID: account.projectID)])
        #expect(h2loadCounts(output)?.succeeded == 200, "\(output)")
        #expect(Date().timeIntervalSince(started) < 15)
        #expect(emulator.deliveredMessages(token: "slow-many").count == 200)
    }

    @Test func quotaBucketAnswers429AndCountsEarlyReturns() throws {
        let emulator = try startEmulator {
            // Three at once, then one a minute: slow test machines cannot refill it in time. The
            // older shape, whose answers carry a Retry-After to break.
            $0.scenario.quota = Scenario.Quota(perMinute: 1, burst: 3, window: .continuous)
            $0.scenario.quotaAnswer = .legacy
        }
        defer { emulator.stop() }
        let account = try TestAccount(emulator)
        let token = try account.accessToken()
        for i in 1...3 {
            #expect(try sendMessage(emulator, project: account.projectID, accessToken: token, body: tokenMessage("q\(i)")).status == 200)
        }
        let limited = try sendMessage(emulator, project: account.projectID, accessToken: token, body: tokenMessage("q4"))
        #expect(limited.status == 429)
        #expect(limited.fcmErrorCode == "QUOTA_EXCEEDED")
        let wait = try #require(limited.headers["retry-after"].flatMap { Int($0) })
        #expect((55...60).contains(wait), "Retry-After: \(wait)")
        #expect(emulator.retryAfterViolations == 0)
        // Another message of the project before that minute passed breaks the Retry-After.
        _ = try sendMessage(emulator, project: account.projectID, accessToken: token, body: tokenMessage("q5"))
        #expect(emulator.retryAfterViolations == 1)
        let recent = try curl(emulator.baseURL + "/emulator/stats").json?["retry_after_violations"]?["recent"]?.arrayValue?.first
        #expect(recent?["scope"]?.stringValue == "project")
        #expect(recent?["error"]?.stringValue == "QUOTA_EXCEEDED")
    }

    @Test func perTokenRetryAfterViolationsAreCounted() throws {
        let emulator = try startEmulator()
        defer { emulator.stop() }
        let account = try TestAccount(emulator)
        let token = try account.accessToken()
        let first = try sendMessage(emulator, project: account.projectID, accessToken: token, body: tokenMessage("fail-unavailable-30-x"))
        #expect(first.status == 503)
        #expect(first.headers["retry-after"] == "30")
        // An unrelated token is not early.
        _ = try sendMessage(emulator, project: account.projectID, accessToken: token, body: tokenMessage("other"))
        #expect(emulator.retryAfterViolations == 0)
        let early = try sendMessage(emulator, project: account.projectID, accessToken: token, body: tokenMessage("fail-unavailable-30-x"))
        #expect(early.status == 200)  // the fault is over, but the sender did not wait
        #expect(emulator.retryAfterViolations == 1)
        let stats = try #require(try curl(emulator.baseURL + "/emulator/stats").json)
        let recent = stats["retry_after_violations"]?["recent"]?.arrayValue?.first
        #expect(recent?["subject"]?.stringValue == "fail-unavailable-30-x")
        #expect((recent?["early_by_ms"]?.intValue ?? 0) > 25_000)
    }

    @Test func scenarioScriptsAnswerByPrefix() throws {
        let scenario = try Scenario.parse(#"""
            {"scripts": [{"prefix": "flaky-", "answers": [{"error": "UNAVAILABLE", "retry_after": 0}, {"error": "UNAUTHENTICATED"}], "then": "success"},
                         {"prefix": "fail-unregistered-but-ok", "then": "success"}]}
            """#)
        let emulator = try startEmulator { $0.scenario = scenario }
        defer { emulator.stop() }
        let account = try TestAccount(emulator)
        let token = try account.accessToken()
        func send(_ device: String) throws -> CurlResult {
            try sendMessage(emulator, project: account.projectID, accessToken: token, body: tokenMessage(device))
        }
        #expect(try send("flaky-1").status == 503)
        let second = try send("flaky-1")
        #expect(second.status == 401)
        #expect(second.fcmErrorCode == nil)
        #expect(try send("flaky-1").status == 200)
        #expect(try send("flaky-2").status == 503)
        // Scripts come before the built-in fault tokens.
        #expect(try send("fail-unregistered-but-ok").status == 200)
    }

    @Test func randomErrorsRepeatWithTheSeed() throws {
        func outcomes(seed: UInt64) throws -> [Int] {
            let emulator = try startEmulator {
                $0.scenario.seed = seed
                $0.scenario.errorRate = 0.5
            }
            defer { emulator.stop() }
            let account = try TestAccount(emulator)
            let token = try account.accessToken()
            return try (0..<24).map { i in
                try sendMessage(emulator, project: account.projectID, accessToken: token, body: tokenMessage("r\(i)")).status
            }
        }
        let first = try outcomes(seed: 9)
        #expect(first == (try outcomes(seed: 9)))
        #expect(first.contains(503) && first.contains(200))
    }
}

@Suite struct EmulatorDeviceGroupEndpointTests {
    private func manage(_ emulator: EmulatorServer, token: String, project: String, _ body: String) throws -> CurlResult {
        try curl(emulator.baseURL + "/fcm/notification", method: "POST",
                 headers: ["content-type": "application/json", "access_token_auth": "true",
                           "authorization": "Bearer \(token)", "project_id": project],
                 body: body)
    }

    @Test func createAddRemoveGetAndSend() throws {
        let emulator = try startEmulator()
        defer { emulator.stop() }
        let account = try TestAccount(emulator)
        let token = try account.accessToken()
        let project = account.projectID

        let created = try manage(emulator, token: token, project: project,
                                 #"{"operation":"create","notification_key_name":"appUser-Chris","registration_ids":["phone","tablet"]}"#)
        #expect(created.status == 200)
        let key = try #require(created.json?["notification_key"]?.stringValue)
        #expect(key.hasPrefix("APA91b"))

        let again = try manage(emulator, token: token, project: project,
                               #"{"operation":"create","notification_key_name":"appUser-Chris","registration_ids":["x"]}"#)
        #expect(again.status == 400)
        #expect(again.json?["error"]?.stringValue == "notification_key already exists")

        let added = try manage(emulator, token: token, project: project,
                               #"{"operation":"add","notification_key_name":"appUser-Chris","notification_key":"\#(key)","registration_ids":["watch"]}"#)
        #expect(added.json?["notification_key"]?.stringValue == key)

        let looked = try curl(emulator.baseURL + "/fcm/notification?notification_key_name=appUser-Chris",
                              headers: ["access_token_auth": "true", "authorization": "Bearer \(token)", "project_id": project])
        let alias = try #require(looked.json?["notification_key"]?.stringValue)
        #expect(alias.hasPrefix("APA91b"))

        // A message to the group's key reaches every member, and is recorded under the key too.
        let sent = try sendMessage(emulator, project: project, accessToken: token, body: tokenMessage(alias, data: ["hello": "group"]))
        #expect(sent.status == 200)
        for member in ["phone", "tablet", "watch", alias] {
            let delivered = emulator.deliveredMessages(token: member)
            #expect(delivered.count == 1, "\(member)")
            #expect(delivered.first?.deviceGroup == alias)
            #expect(delivered.first?.message["data"]?["hello"]?.stringValue == "group")
        }

        // Twenty members at most; a refused add changes nothing.
        let many = (1...17).map { "\"m\($0)\"" }.joined(separator: ",")
        #expect(try manage(emulator, token: token, project: project,
                           #"{"operation":"add","notification_key_name":"appUser-Chris","notification_key":"\#(key)","registration_ids":[\#(many)]}"#).status == 200)
        let over = try manage(emulator, token: token, project: project,
                              #"{"operation":"add","notification_key_name":"appUser-Chris","notification_key":"\#(key)","registration_ids":["one-too-many"]}"#)
        #expect(over.status == 400)
        #expect(over.json?["error"]?.stringValue?.contains("20") == true)

        // Removing every member deletes the group.
        let everyone = (["phone", "tablet", "watch"] + (1...17).map { "m\($0)" }).map { "\"\($0)\"" }.joined(separator: ",")
        #expect(try manage(emulator, token: token, project: project,
                           #"{"operation":"remove","notification_key_name":"appUser-Chris","notification_key":"\#(key)","registration_ids":[\#(everyone)]}"#).status == 200)
        let gone = try curl(emulator.baseURL + "/fcm/notification?notification_key_name=appUser-Chris",
                            headers: ["access_token_auth": "true", "authorization": "Bearer \(token)", "project_id": project])
        #expect(gone.status == 404)
        #expect(gone.json?["error"]?.stringValue == "notification_key not found")
        let unknownKey = try manage(emulator, token: token, project: project,
                                    #"{"operation":"add","notification_key_name":"appUser-Chris","notification_key":"\#(key)","registration_ids":["x"]}"#)
        #expect(unknownKey.status == 404)
    }

    @Test func authIsChecked() throws {
        let emulator = try startEmulator()
        defer { emulator.stop() }
        let account = try TestAccount(emulator)
        let token = try account.accessToken()
        let body = #"{"operation":"create","notification_key_name":"g","registration_ids":["a"]}"#
        let noBearer = try curl(emulator.baseURL + "/fcm/notification", method: "POST",
                                headers: ["content-type": "application/json", "access_token_auth": "true", "project_id": account.projectID], body: body)
        #expect(noBearer.status == 401)
        #expect(noBearer.json?["error"]?.stringValue != nil)
        let noFlag = try curl(emulator.baseURL + "/fcm/notification", method: "POST",
                              headers: ["authorization": "Bearer \(token)", "project_id": account.projectID], body: body)
        #expect(noFlag.status == 401)
        let noProject = try curl(emulator.baseURL + "/fcm/notification", method: "POST",
                                 headers: ["authorization": "Bearer \(token)", "access_token_auth": "true"], body: body)
        #expect(noProject.status == 400)
        let badBody = try manage(emulator, token: token, project: account.projectID, #"{"operation":"create"}"#)
        #expect(badBody.status == 400)
    }
}

@Suite struct EmulatorLifecycleTests {
    @Test func aDroppedEmulatorStopsListening() throws {
        var port = 0
        do {
            let emulator = try startEmulator()
            port = emulator.port
            #expect(try curl("http://127.0.0.1:\(port)/emulator/health").status == 200)
        }
        // Nothing holds the emulator now: its deinit stopped the server and closed the port.
        #expect(throws: (any Error).self) { try curl("http://127.0.0.1:\(port)/emulator/health", over: .http1) }
    }
}

@Suite struct EmulatorTLSTests {
    @Test func servesH2AndHTTP1OverTLS() throws {
        let files = try makeCertificate()
        defer { try? FileManager.default.removeItem(atPath: files.directory) }
        let emulator = try startEmulator { $0.tls = .init(certificateFile: files.certificate, privateKeyFile: files.key) }
        defer { emulator.stop() }
        #expect(emulator.baseURL.hasPrefix("https://127.0.0.1:"))
        let account = try TestAccount(emulator)
        #expect(account.tokenURI.hasPrefix("https://"))
        let grant = try account.exchange(try account.assertion(), over: .tlsHTTP1(caFile: files.certificate))
        #expect(grant.version == "1.1")
        let token = try #require(grant.json?["access_token"]?.stringValue)
        let h2 = try sendMessage(emulator, project: account.projectID, accessToken: token, body: tokenMessage("secure"),
                                 over: .tlsH2(caFile: files.certificate))
        #expect(h2.status == 200)
        #expect(h2.version == "2")
        #expect(emulator.deliveredMessages(token: "secure").count == 1)
    }
}

/// The emulator's FCM Data API: from what it delivered, with Google's scope and refusals.
@Suite struct EmulatorDeliveryDataTests {
    @Test func itCountsWhatReachedDevicesPerLabelAndAnswersPageByPageToTheCloudPlatformScopeOnly() throws {
        let emulator = try startEmulator()
        defer { emulator.stop() }
        let account = try TestAccount(emulator, projectID: "shop-fcm")
        let sendToken = try account.accessToken()
        func send(_ message: String) throws {
            #expect(try sendMessage(emulator, project: "shop-fcm", accessToken: sendToken, body: message).status == 200)
        }
        try send(#"{"message": {"token": "d1", "fcm_options": {"analytics_label": "spring"}}}"#)
        try send(#"{"message": {"token": "d2", "fcm_options": {"analytics_label": "spring"}, "android": {"fcm_options": {"analytics_label": "spring-android"}}}}"#)
        try send(#"{"message": {"token": "d3"}}"#)
        try send(#"{"message": {"token": "d4", "fcm_options": {"analytics_label": "spring"}}, "validate_only": true}"#)
        let url = emulator.baseURL + "/v1beta1/projects/shop-fcm/androidApps/1:1:android:a/deliveryData"

        // FCM's send scope does not read the Data API; cloud-platform does.
        let narrow = try curl(url, headers: ["authorization": "Bearer \(sendToken)"])
        #expect(narrow.status == 403 && narrow.body.contains("ACCESS_TOKEN_SCOPE_INSUFFICIENT"), "\(narrow.body)")
        #expect(try curl(url).status == 401)
        let granted = try account.exchange(try account.assertion(scope: "https://www.googleapis.com/auth/cloud-platform"))
        let token = try #require(granted.json?["access_token"]?.stringValue, "\(granted.body)")
        emulator.updateDeliveryData { $0.pageSize = 2 }

        var entries: [JSONValue] = []
        var next: String? = nil
        var pages = 0
        repeat {
            let page = try curl(url + "?pageSize=10" + (next.map { "&pageToken=" + $0 } ?? ""), headers: ["authorization": "Bearer \(token)"])
            #expect(page.status == 200, "\(page.body)")
            entries += page.json?["androidDeliveryData"]?.arrayValue ?? []
            next = page.json?["nextPageToken"]?.stringValue
            pages += 1
        } while next != nil && pages < 10
        #expect(pages == 2, "3 entries, 2 a page")
        let labels = entries.map { $0["analyticsLabel"]?.stringValue ?? "(none)" }
        #expect(labels == ["(none)", "spring", "spring-android"], "one message each; validate_only is not delivered: \(labels)")
        #expect(entries.allSatisfy { $0["data"]?["countMessagesAccepted"]?.stringValue == "1" && $0["appId"]?.stringValue == "1:1:android:a" })
        #expect(entries.first?["data"]?["messageOutcomePercents"]?["delivered"]?.intValue == 100, "all delivered unless told otherwise")

        // Told: the shares of a label, and a project whose key may not read the data.
        let told = try curl(emulator.baseURL + "/emulator/delivery-data", method: "POST",
                            body: #"{"label_data": {"spring": {"messageOutcomePercents": {"delivered": 70, "pending": 30}}}, "denied": ["shop-fcm"]}"#)
        #expect(told.status == 200 && told.json?["denied"]?.arrayValue?.count == 1, "\(told.body)")
        let refused = try curl(url, headers: ["authorization": "Bearer \(token)"])
        #expect(refused.status == 403 && refused.json?["error"]?["status"]?.stringValue == "PERMISSION_DENIED"
                && refused.body.contains("IAM_PERMISSION_DENIED") && refused.body.contains("fcmdata.deliverydata.list"), "\(refused.body)")
        #expect(try curl(emulator.baseURL + "/emulator/delivery-data", method: "POST", body: #"{"denied": []}"#).status == 200)
        let spring = try curl(url, headers: ["authorization": "Bearer \(token)"]).json?["androidDeliveryData"]?.arrayValue?
            .first { $0["analyticsLabel"]?.stringValue == "spring" }
        #expect(spring?["data"]?["messageOutcomePercents"]?["pending"]?.intValue == 30)
        let other = try TestAccount(emulator, projectID: "news-fcm")
        let otherToken = try #require(try other.exchange(try other.assertion(scope: "https://www.googleapis.com/auth/cloud-platform")).json?["access_token"]?.stringValue)
        #expect(try curl(url, headers: ["authorization": "Bearer \(otherToken)"]).status == 403, "another project's key")
        #expect(try curl(emulator.baseURL + "/emulator/delivery-data", method: "POST", body: #"{"page_size": "two"}"#).status == 400)
    }
}
