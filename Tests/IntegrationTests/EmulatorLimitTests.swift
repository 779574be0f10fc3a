import Emulator
import FCM
import Foundation
import JSON
import Testing
import TestSupport

/// The emulator's model of FCM's limits: per device, per topic, the project's bucket, and a
/// serving capacity past which answers slow down.
@Suite struct EmulatorLimitTests {
    /// The QuotaFailure violation of a 429 answer, as `subject` and `description`.
    static func violation(_ answer: CurlResult) -> (subject: String, description: String)? {
        guard let detail = answer.json?["error"]?["details"]?.arrayValue?.first(where: {
            $0["@type"]?.stringValue == "type.googleapis.com/google.rpc.QuotaFailure"
        }), let first = detail["violations"]?.arrayValue?.first else { return nil }
        return (first["subject"]?.stringValue ?? "", first["description"]?.stringValue ?? "")
    }

    static func topicMessage(_ topic: String) -> String {
        #"{"message":{"topic":"\#(topic)","data":{"k":"v"}}}"#
    }

    static func collapsibleMessage(_ token: String) -> String {
        #"{"message":{"token":"\#(token)","android":{"collapse_key":"score"},"data":{"k":"v"}}}"#
    }

    /// Many projects from one emulator (`--write-service-accounts N=DIR`): one file a project,
    /// private, each key accepted for its own project's sends and refused for another's.
    @Test func manyProjectsEachWithItsOwnAccountAndNoneSendingForAnother() throws {
        let emulator = try startEmulator { _ in }
        defer { emulator.stop() }
        let folder = NSTemporaryDirectory() + "herald-accounts-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: false)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let projects = try emulator.writeServiceAccounts(count: 300, folder: folder)
        #expect(projects.count == 300 && Set(projects).count == 300 && projects.last == "herald-project-300")
        let files = try FileManager.default.contentsOfDirectory(atPath: folder).filter { $0.hasSuffix(".json") }
        #expect(files.count == 300)
        let mode = (try FileManager.default.attributesOfItem(atPath: folder + "/herald-project-7.json")[.posixPermissions] as? NSNumber)?.intValue
        #expect(mode == 0o600, "a key file readable by others: \(String(mode ?? 0, radix: 8))")
        let seventh = try TestAccount(json: String(contentsOfFile: folder + "/herald-project-7.json", encoding: .utf8))
        let last = try TestAccount(json: String(contentsOfFile: folder + "/herald-project-300.json", encoding: .utf8))
        #expect(seventh.projectID == "herald-project-7" && last.projectID == "herald-project-300")
        #expect(seventh.email != last.email)
        let token = try seventh.accessToken(), lastToken = try last.accessToken()
        #expect(try sendMessage(emulator, project: "herald-project-7", accessToken: token, body: tokenMessage("a-1")).status == 200)
        #expect(try sendMessage(emulator, project: "herald-project-300", accessToken: lastToken, body: tokenMessage("a-2")).status == 200)
        let crossed = try sendMessage(emulator, project: "herald-project-8", accessToken: token, body: tokenMessage("a-3"))
        #expect(crossed.status == 403 && crossed.body.contains("PERMISSION_DENIED"), "\(crossed.status) \(crossed.body)")
    }

    /// A thousand keys written by one emulator are served by another started later
    /// (`--service-accounts DIR`): a registry of a thousand projects outlives an emulator's
    /// restart, each key still good for its own project only. A folder holding a file that is
    /// not a key is refused naming that file, and none of its keys is accepted.
    @Test func aThousandKeysFromAFolderServedByALaterEmulator() throws {
        let folder = NSTemporaryDirectory() + "herald-accounts-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: false)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let writer = try startEmulator { _ in }
        try writer.writeServiceAccounts(count: 1000, folder: folder)
        writer.stop()

        func account(_ index: Int, at emulator: EmulatorServer) throws -> TestAccount {
            var account = try TestAccount(json: String(contentsOfFile: folder + "/herald-project-\(index).json", encoding: .utf8))
            account.tokenURI = emulator.tokenURI  // the file names the first emulator's port
            return account
        }
        let unaware = try startEmulator { _ in }
        defer { unaware.stop() }
        let refused = try account(1, at: unaware).exchange(try account(1, at: unaware).assertion())
        #expect(refused.status == 400 && refused.body.contains("invalid_grant"), "an emulator that was not given the folder: \(refused.status) \(refused.body)")

        let emulator = try startEmulator { _ in }
        defer { emulator.stop() }
        let projects = try emulator.trustServiceAccounts(inFolder: folder)
        #expect(projects.count == 1000 && Set(projects).count == 1000 && Set(projects).contains("herald-project-1000"))
        for index in [1, 2, 500, 999, 1000] {
            let key = try account(index, at: emulator)
            let token = try key.accessToken()
            let sent = try sendMessage(emulator, project: key.projectID, accessToken: token, body: tokenMessage("k-\(index)"))
            #expect(sent.status == 200, "herald-project-\(index): \(sent.status) \(sent.body)")
            let crossed = try sendMessage(emulator, project: "herald-project-\(index % 1000 + 1)", accessToken: token, body: tokenMessage("x-\(index)"))
            #expect(crossed.status == 403 && crossed.body.contains("PERMISSION_DENIED"), "\(crossed.status) \(crossed.body)")
        }
        #expect(emulator.deliveredMessages().map(\.projectID) == ["herald-project-1", "herald-project-2", "herald-project-500", "herald-project-999", "herald-project-1000"])

        try #"{"type": "service_account", "project_id": "half-written"}"#.write(toFile: folder + "/broken.json", atomically: true, encoding: .utf8)
        let strict = try startEmulator { _ in }
        defer { strict.stop() }
        do {
            try strict.trustServiceAccounts(inFolder: folder)
            Issue.record("a folder holding a file that is not a key was accepted")
        } catch {
            #expect(error.description.contains(folder + "/broken.json") && error.description.contains("private_key"), "\(error)")
        }
        let notTrusted = try account(7, at: strict).exchange(try account(7, at: strict).assertion())
        #expect(notTrusted.status == 400, "a key of a refused folder was accepted: \(notTrusted.body)")
    }

    @Test func aDeviceOverItsLimitIsRefusedAloneAndNamed() throws {
        let emulator = try startEmulator {
            $0.scenario.limits.devicePerMinute = 3
            $0.scenario.quotaAnswer = .legacy
        }
        defer { emulator.stop() }
        let account = try TestAccount(emulator)
        let token = try account.accessToken()
        for _ in 1...3 {
            #expect(try sendMessage(emulator, project: account.projectID, accessToken: token, body: tokenMessage("hot-1")).status == 200)
        }
        let refused = try sendMessage(emulator, project: account.projectID, accessToken: token, body: tokenMessage("hot-1"))
        #expect(refused.status == 429)
        #expect(refused.fcmErrorCode == "QUOTA_EXCEEDED")
        let violation = try #require(Self.violation(refused), "\(refused.body)")
        #expect(violation.subject == "device:hot-1")
        #expect(violation.description.contains("device"))
        // 3 a minute: the next one is 20 s away.
        let wait = try #require(refused.headers["retry-after"].flatMap { Int($0) })
        #expect((15...20).contains(wait), "Retry-After: \(wait)")
        // Another device of the same project is not limited.
        #expect(try sendMessage(emulator, project: account.projectID, accessToken: token, body: tokenMessage("cold-1")).status == 200)
        #expect(emulator.deliveredMessages(token: "hot-1").count == 3)
        let refusals = emulator.quotaRefusals()
        #expect(refusals.map(\.target) == ["hot-1"])
        #expect(refusals.map(\.subject) == ["device"])
        #expect(try curl(emulator.baseURL + "/emulator/stats").json?["quota_exceeded_by_limit"]?["device"]?.intValue == 1)
    }

    @Test func collapsibleMessagesGetABurstThenOneAtATime() throws {
        let emulator = try startEmulator {
            $0.scenario.limits.collapsibleBurst = 2
            $0.scenario.limits.collapsibleEverySeconds = 180
            // The older shape's Retry-After tells the collapsible rate.
            $0.scenario.quotaAnswer = .legacy
        }
        defer { emulator.stop() }
        let account = try TestAccount(emulator)
        let token = try account.accessToken()
        for _ in 1...2 {
            #expect(try sendMessage(emulator, project: account.projectID, accessToken: token, body: Self.collapsibleMessage("c-1")).status == 200)
        }
        let refused = try sendMessage(emulator, project: account.projectID, accessToken: token, body: Self.collapsibleMessage("c-1"))
        #expect(refused.status == 429)
        #expect(Self.violation(refused)?.subject == "device:c-1")
        let wait = try #require(refused.headers["retry-after"].flatMap { Int($0) })
        #expect((170...180).contains(wait), "one every 3 minutes: Retry-After \(wait)")
        // A message that does not collapse is under the per-device rate only.
        #expect(try sendMessage(emulator, project: account.projectID, accessToken: token, body: tokenMessage("c-1")).status == 200)
    }

    @Test func aTopicOverItsLimitIsRefusedAndNamed() throws {
        let emulator = try startEmulator { $0.scenario.limits.topicPerMinute = 2 }
        defer { emulator.stop() }
        let account = try TestAccount(emulator)
        let token = try account.accessToken()
        for _ in 1...2 {
            #expect(try sendMessage(emulator, project: account.projectID, accessToken: token, body: Self.topicMessage("news")).status == 200)
        }
        let refused = try sendMessage(emulator, project: account.projectID, accessToken: token, body: Self.topicMessage("news"))
        #expect(refused.status == 429)
        #expect(refused.fcmErrorCode == "QUOTA_EXCEEDED")
        #expect(Self.violation(refused)?.subject == "topic:news")
        #expect(refused.headers["retry-after"] == nil, "FCM's shape, the default, states no Retry-After")
        #expect(try sendMessage(emulator, project: account.projectID, accessToken: token, body: Self.topicMessage("sport")).status == 200)
        // Topic limits do not limit devices.
        for i in 1...3 {
            #expect(try sendMessage(emulator, project: account.projectID, accessToken: token, body: tokenMessage("t-\(i)")).status == 200)
        }
    }

    @Test func aDeviceOverItsLimitGetsFCMsShapeByDefault() throws {
        let emulator = try startEmulator { $0.scenario.limits.devicePerMinute = 2 }
        defer { emulator.stop() }
        let account = try TestAccount(emulator)
        let token = try account.accessToken()
        for _ in 1...2 {
            #expect(try sendMessage(emulator, project: account.projectID, accessToken: token, body: tokenMessage("warm-1")).status == 200)
        }
        let refused = try sendMessage(emulator, project: account.projectID, accessToken: token, body: tokenMessage("warm-1"))
        #expect(refused.status == 429)
        #expect(refused.json?["error"]?["status"]?.stringValue == "RESOURCE_EXHAUSTED")
        #expect(refused.fcmErrorCode == "QUOTA_EXCEEDED")
        #expect(Self.violation(refused)?.subject == "device:warm-1")
        #expect(refused.headers["retry-after"] == nil, "\(refused.headers)")
        #expect(emulator.quotaRefusals().map(\.subject) == ["device"])
    }

    @Test func theProjectBucketNamesTheProjectInTheOlderShape() throws {
        let emulator = try startEmulator {
            $0.scenario.quota = Scenario.Quota(perMinute: 1, burst: 1, window: .continuous)
            $0.scenario.quotaAnswer = .legacy
        }
        defer { emulator.stop() }
        let account = try TestAccount(emulator)
        let token = try account.accessToken()
        #expect(try sendMessage(emulator, project: account.projectID, accessToken: token, body: tokenMessage("p-1")).status == 200)
        let refused = try sendMessage(emulator, project: account.projectID, accessToken: token, body: tokenMessage("p-2"))
        #expect(refused.status == 429)
        #expect(Self.violation(refused)?.subject == "project:\(account.projectID)")
        #expect(refused.headers["retry-after"].flatMap { Int($0) } != nil)
        #expect(emulator.quotaRefusals().map(\.subject) == ["project"])
    }

    /// The same quota, counted in the two models: both let what they hold through at once and
    /// refuse the next send; the documented minute until its window ends (the older answer's
    /// Retry-After says when: most of a minute), the continuous bucket until it has refilled one
    /// message (at 30 a minute, 2 s).
    @Test func theDocumentedMinuteRefusesUntilItsWindowEndsTheBucketUntilItRefills() throws {
        for window in QuotaWindowModel.allCases {
            let emulator = try startEmulator {
                $0.scenario.quota = window == .minute ? Scenario.Quota(perMinute: 3) : Scenario.Quota(perMinute: 30, burst: 3, window: .continuous)
                $0.scenario.quotaAnswer = .legacy
            }
            defer { emulator.stop() }
            let account = try TestAccount(emulator)
            let token = try account.accessToken()
            for i in 1...3 {
                let answer = try sendMessage(emulator, project: account.projectID, accessToken: token, body: tokenMessage("m-\(window)-\(i)"))
                #expect(answer.status == 200, "\(window): send \(i): \(answer.status)")
            }
            let refused = try sendMessage(emulator, project: account.projectID, accessToken: token, body: tokenMessage("m-\(window)-4"))
            #expect(refused.status == 429)
            let wait = try #require(refused.headers["retry-after"].flatMap { Int($0) }, "\(refused.headers)")
            #expect(window == .minute ? (50...60).contains(wait) : (1...2).contains(wait), "\(window): Retry-After \(wait)")
            // The refusal is listed with its target and time, for a benchmark measuring at FCM's side.
            let listed = try curl(emulator.baseURL + "/emulator/refusals").json?["refusals"]?.arrayValue ?? []
            #expect(listed.map { $0["target"]?.stringValue } == ["m-\(window)-4"] && listed.first?["limit"]?.stringValue == "project", "\(listed)")
            #expect(listed.first?["time"]?.stringValue?.hasSuffix("Z") == true)
            // It says which it uses.
            let stats = try #require(try curl(emulator.baseURL + "/emulator/stats").json?["quota"])
            #expect(stats["window"]?.stringValue == window.rawValue, "\(stats)")
            #expect(stats["described"]?.stringValue?.contains(window == .minute ? "windows of 60 s" : "refilled continuously") == true, "\(stats)")
        }
    }

    @Test func theStartUpLineNamesTheQuotasModel() throws {
        for (arguments, words) in [(["--quota", "100/s"], "(--quota-window minute): 6000 messages a minute, counted in windows of 60 s"),
                                   (["--quota", "300/s", "--quota-window", "continuous", "--quota-burst", "300"],
                                    "(--quota-window continuous): 18000 messages a minute, a bucket of 300 refilled continuously at 300 a second")] {
            let emulator = try HeraldProcess(["emulator", "--port", "0"] + arguments, environment: [:])
            try emulator.start()
            defer { emulator.signal(SIGKILL) }
            #expect(waitUntil(timeout: 30) { emulator.output.contains("# the project's quota " + words) }, "\(arguments): \(emulator.output)")
        }
        // A burst without the continuous bucket says what to give instead, and starts nothing.
        let refused = try HeraldProcess.run(["emulator", "--port", "0", "--quota", "300/s", "--quota-burst", "300"], environment: [:], timeout: 30)
        #expect(refused.status != 0 && refused.output.contains("--quota-window continuous"), "\(refused.output)")
    }

    /// The ErrorInfo detail of an answer.
    static func errorInfo(_ answer: CurlResult) -> JSONValue? {
        answer.json?["error"]?["details"]?.arrayValue?.first { $0["@type"]?.stringValue == "type.googleapis.com/google.rpc.ErrorInfo" }
    }

    @Test func theProjectQuotaAnswersAsFCMDidInProduction() throws {
        // A bucket of 3 a minute (refilled one message every 20 s, so not within the test).
        let emulator = try startEmulator { $0.scenario.quota = Scenario.Quota(perMinute: 3) }
        defer { emulator.stop() }
        let account = try TestAccount(emulator)
        let token = try account.accessToken()
        #expect(try sendMessage(emulator, project: account.projectID, accessToken: token, body: tokenMessage("r-1")).status == 200)
        // A 4xx answer counts against the quota as at FCM: a bad TTL takes the second message.
        let invalid = try sendMessage(emulator, project: account.projectID, accessToken: token,
                                      body: #"{"message":{"token":"r-2","android":{"ttl":"soon"}}}"#)
        #expect(invalid.status == 400)
        #expect(try sendMessage(emulator, project: account.projectID, accessToken: token, body: tokenMessage("r-3")).status == 200)
        let refused = try sendMessage(emulator, project: account.projectID, accessToken: token, body: tokenMessage("r-4"))
        #expect(refused.status == 429)
        #expect(refused.headers["retry-after"] == nil, "no Retry-After: \(refused.headers)")
        let error = try #require(refused.json?["error"], "\(refused.body)")
        #expect(error["code"]?.intValue == 429)
        #expect(error["status"]?.stringValue == "RESOURCE_EXHAUSTED")
        let number = try #require(Self.errorInfo(refused)?["metadata"]?["consumer"]?.stringValue?.split(separator: "/").last.map(String.init))
        #expect(number.count == 12 && number.allSatisfy(\.isNumber), "a project number: \(number)")
        #expect(error["message"]?.stringValue
                == "Quota exceeded for quota metric 'Send requests' and limit 'Send requests per minute' of service 'fcm.googleapis.com' for consumer 'project_number:\(number)'.")
        let details = try #require(error["details"]?.arrayValue)
        #expect(details.compactMap { $0["@type"]?.stringValue }
                == ["type.googleapis.com/google.rpc.ErrorInfo", "type.googleapis.com/google.rpc.Help"], "no FcmError, no QuotaFailure")
        let info = try #require(Self.errorInfo(refused))
        #expect(info["reason"]?.stringValue == "RATE_LIMIT_EXCEEDED")
        #expect(info["domain"]?.stringValue == "googleapis.com")
        let metadata = try #require(info["metadata"])
        #expect(metadata["quota_limit"]?.stringValue == "SendsPerMinutePerProject")
        #expect(metadata["quota_metric"]?.stringValue == "fcm.googleapis.com/send_requests")
        #expect(metadata["quota_unit"]?.stringValue == "1/min/{project}")
        #expect(metadata["quota_limit_value"]?.stringValue == "3", "the configured limit a minute")
        #expect(metadata["service"]?.stringValue == "fcm.googleapis.com")
        #expect(metadata["quota_location"]?.stringValue == "global")
        #expect(details.last?["links"]?.arrayValue?.first?["url"]?.stringValue?.hasPrefix("https://") == true)
        // A 429 takes nothing: the project stays refused, and every refusal is the project's.
        #expect(try sendMessage(emulator, project: account.projectID, accessToken: token, body: tokenMessage("r-5")).status == 429)
        #expect(emulator.deliveredMessages(token: "r-3").count == 1)
        #expect(emulator.quotaRefusals().map(\.subject) == ["project", "project"])
        #expect(try curl(emulator.baseURL + "/emulator/stats").json?["quota_exceeded_by_limit"]?["project"]?.intValue == 2)
        // And Herald's classifier reads it as a quota answer, to be retried.
        let reading = SendClassification(httpStatus: refused.status, headers: [], body: Array(refused.body.utf8), now: Date())
        guard case .retry(let code, _, let retryAfter, _) = reading else {
            Issue.record("\(reading)")
            return
        }
        #expect(code == "QUOTA_EXCEEDED" && retryAfter == nil)
    }

    @Test func aScriptedRateLimitStatesWhatItIsTold() throws {
        let scenario = try Scenario.parse(#"""
            {"quota": {"per_minute": 600000},
             "scripts": [
              {"prefix": "stated-", "answers": [{"error": "QUOTA_EXCEEDED", "quota": "rate-limit"}]},
              {"prefix": "odd-", "answers": [{"error": "QUOTA_EXCEEDED", "quota": "rate-limit", "quota_limit_value": "lots"}]}
            ]}
            """#)
        let emulator = try startEmulator { $0.scenario = scenario }
        defer { emulator.stop() }
        let account = try TestAccount(emulator)
        let token = try account.accessToken()
        let stated = try sendMessage(emulator, project: account.projectID, accessToken: token, body: tokenMessage("stated-1"))
        #expect(stated.status == 429)
        #expect(Self.errorInfo(stated)?["metadata"]?["quota_limit_value"]?.stringValue == "600000")
        let odd = try sendMessage(emulator, project: account.projectID, accessToken: token, body: tokenMessage("odd-1"))
        #expect(Self.errorInfo(odd)?["metadata"]?["quota_limit_value"]?.stringValue == "lots")
        #expect(emulator.quotaRefusals().map(\.subject) == ["project", "project"])
    }

    @Test func scriptedQuotaAnswersNameTheLimitTheyAreToldTo() throws {
        let scenario = try Scenario.parse(#"""
            {"scripts": [
              {"prefix": "dev-", "answers": [{"error": "QUOTA_EXCEEDED", "quota": "device"}]},
              {"prefix": "bare-", "answers": [{"error": "QUOTA_EXCEEDED", "quota": "none"}]},
              {"prefix": "old-", "answers": [{"error": "QUOTA_EXCEEDED", "quota": "legacy-device"}]}
            ]}
            """#)
        let emulator = try startEmulator { $0.scenario = scenario }
        defer { emulator.stop() }
        let account = try TestAccount(emulator)
        let token = try account.accessToken()
        let device = try sendMessage(emulator, project: account.projectID, accessToken: token, body: tokenMessage("dev-1"))
        #expect(device.status == 429)
        #expect(Self.violation(device)?.subject == "device:dev-1")
        let bare = try sendMessage(emulator, project: account.projectID, accessToken: token, body: tokenMessage("bare-1"))
        #expect(bare.status == 429)
        #expect(bare.fcmErrorCode == "QUOTA_EXCEEDED")
        #expect(Self.violation(bare) == nil)
        let legacy = try sendMessage(emulator, project: account.projectID, accessToken: token, body: tokenMessage("old-1"))
        #expect(legacy.status == 429)
        #expect(legacy.json?["error"]?.stringValue == "DeviceMessageRateExceeded")
        // The second attempt of each succeeds, as scripted.
        #expect(try sendMessage(emulator, project: account.projectID, accessToken: token, body: tokenMessage("dev-1")).status == 200)
    }

    @Test func pastItsCapacityAnswersSlowDownWithTheRequestsOpen() throws {
        // 100 sends a second: 60 sent at once are served over 0.6 s, the last answered ~0.6 s late.
        let emulator = try startEmulator { $0.capacityPerSecond = 100 }
        defer { emulator.stop() }
        let account = try TestAccount(emulator)
        let accessToken = try account.accessToken()
        let bodyFile = NSTemporaryDirectory() + "herald-capacity-\(UUID().uuidString).json"
        try tokenMessage("line-1").write(toFile: bodyFile, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: bodyFile) }
        let output = try h2load(["-n", "60", "-c", "1", "-m", "60", "-d", bodyFile, "-H", "authorization: Bearer \(accessToken)",
                                 "-H", "content-type: application/json", emulator.sendURL(projectID: account.projectID)])
        #expect(h2loadCounts(output)?.succeeded == 60, "\(output)")
        let times = emulator.deliveredMessages(token: "line-1").map(\.receivedAtMilliseconds).sorted()
        #expect(times.count == 60)
        // Served one every 10 ms: the span of service times is the line, not the arrival burst.
        let span = try #require(times.last) - (try #require(times.first))
        #expect(span >= 500 && span <= 900, "60 sends at 100/s were served over \(span) ms")
        // A send alone afterwards is served at once.
        let alone = try sendMessage(emulator, project: account.projectID, accessToken: accessToken, body: tokenMessage("line-2"))
        #expect(alone.status == 200)
        #expect(alone.seconds < 0.3, "an idle line answers at once, not after \(alone.seconds) s")
    }

    @Test func theCommandLineSetsTheLimits() throws {
        let options = try #require(try EmulatorCommand.Options.parse(["--fcm-limits", "--topic-limit", "600/min", "--quota", "300/s",
                                                                       "--capacity", "2000/s"]))
        let limits = options.configuration.scenario.limits
        #expect(limits.devicePerMinute == 240 && limits.devicePerHour == 5000)
        #expect(limits.collapsibleBurst == 20 && limits.collapsibleEverySeconds == 180)
        #expect(limits.topicPerMinute == 600)
        // FCM's documented minute unless told otherwise.
        #expect(options.configuration.scenario.quota == Scenario.Quota(perMinute: 18_000, window: .minute))
        #expect(options.configuration.scenario.quotaAnswer == .production)
        let stated = try #require(try EmulatorCommand.Options.parse(["--quota", "600000/min", "--quota-start", "0"]))
        #expect(stated.configuration.scenario.quota == Scenario.Quota(perMinute: 600_000, start: 0, window: .minute))
        // The continuous bucket is asked for by name, and a burst only goes with it.
        let older = try #require(try EmulatorCommand.Options.parse(["--quota", "300/s", "--quota-window", "continuous", "--quota-burst", "300",
                                                                     "--quota-answer", "legacy"]))
        #expect(older.configuration.scenario.quota == Scenario.Quota(perMinute: 18_000, burst: 300, window: .continuous))
        #expect(older.configuration.scenario.quotaAnswer == .legacy)
        for (arguments, fragment) in [(["--quota-answer", "modern"], "--quota-answer"), (["--quota-start", "5"], "--quota-start needs --quota"),
                                      (["--quota", "10/min", "--quota-start", "11"], "--quota-start 11"),
                                      (["--quota", "300/hour"], "--quota"),
                                      (["--quota", "300/s", "--quota-burst", "300"], "--quota-window continuous"),
                                      (["--quota", "300/s", "--quota-window", "rolling"], "--quota-window must be minute"),
                                      (["--quota-window", "continuous"], "--quota-window needs a quota")] {
            do {
                _ = try EmulatorCommand.Options.parse(arguments)
                Issue.record("accepted \(arguments)")
            } catch {
                #expect(error.description.contains(fragment), "\(error)")
            }
        }
        #expect(options.configuration.capacityPerSecond == 2000)
        #expect(throws: EmulatorError.self) { _ = try EmulatorCommand.Options.parse(["--capacity", "fast"]) }
        do {
            _ = try EmulatorCommand.Options.parse(["--quota", "-3/s"])
            Issue.record("a negative quota was accepted")
        } catch {
            #expect(error.description.contains("--quota"), "\(error)")
        }
        #expect(throws: Scenario.ParseError.self) { _ = try Scenario.parse(#"{"limits": {"collapsible_burst": 20}}"#) }
        #expect(throws: Scenario.ParseError.self) {
            _ = try Scenario.parse(#"{"scripts": [{"prefix": "x", "answers": [{"error": "INTERNAL", "quota": "device"}]}]}"#)
        }
    }
}
