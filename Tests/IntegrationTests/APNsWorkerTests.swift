import APNs
import Emulator
import Foundation
import JSON
import Postgres
import Queue
import Testing
import TestSupport

/// A pool working APNs apps' jobs beside FCM jobs, measured at the emulator's APNs stand-in: what
/// it received, with which headers and provider token, and what became of each job.
@Suite(.serialized) struct APNsWorkerTests {
    /// A worker stack with an APNs key written by the emulator and app `shop` registered for it.
    struct Stand {
        let stack: WorkerStack
        let folder: String
        let keyID: String
        let teamID: String
        let keyPath: String
        /// A second emulator for APNs when a test needs its own settings (else the stack's).
        let apns: EmulatorServer

        init(apnsConfiguration: EmulatorConfiguration? = nil) throws {
            stack = try WorkerStack()
            folder = NSTemporaryDirectory() + "herald-apns-worker-\(UUID().uuidString)"
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            if var apnsConfiguration {
                // APNs is reached over TLS only, as Apple serves it.
                if apnsConfiguration.tls == nil { apnsConfiguration.tls = try TestTLS.files() }
                apns = EmulatorServer(configuration: apnsConfiguration)
                try apns.start()
            } else {
                apns = stack.emulator
            }
            let written = try apns.writeAPNsKey(folder: folder)
            keyID = written.keyID
            teamID = written.teamID
            keyPath = written.path
            try register("shop", keyFile: keyPath)
        }

        func register(_ name: String, keyFile: String, keyID: String? = nil) throws {
            try stack.connection.query("SELECT herald.add_apns_app($1, $2, $3, $4, 'com.example.shop')",
                                       [.text(name), .text(keyFile), .text(keyID ?? self.keyID), .text(teamID)])
        }

        var environment: [String: String] {
            var environment = stack.environment
            environment["HERALD_APNS_URL"] = apns.baseURL
            return environment
        }

        func work(_ arguments: [String] = ["--drain", "--processes", "1", "--poll-interval", "0.2"]) throws -> (status: Int32?, output: String) {
            try HeraldProcess.run(["work"] + arguments, environment: environment, timeout: 180)
        }

        /// Enqueues one APNs job of `app` for `token`; returns its id.
        @discardableResult
        func enqueue(_ token: String, pushType: String = "alert", payload: String = #"{"aps":{"alert":{"title":"Hi"}}}"#,
                     app: String = "shop") throws -> Int {
            let message = #"{"apns_token":"\#(token)","apns":{"headers":{"apns-push-type":"\#(pushType)"},"payload":\#(payload)}}"#
            return try stack.connection.query("SELECT herald.enqueue($1::jsonb, apns_app => $2)", [.text(message), .text(app)]).int(0, 0) ?? -1
        }

        /// `n` alerts of app `shop` to tokens made from `prefix` (hex) and the row number.
        func enqueueAlerts(_ n: Int, prefix: String) throws {
            try stack.connection.query("""
                INSERT INTO herald.jobs (message, project)
                SELECT jsonb_build_object('apns_token', $1::text || lpad(to_hex(g), 64 - length($1::text), '0'),
                                          'apns', jsonb_build_object('headers', jsonb_build_object('apns-push-type', 'alert'),
                                                                     'payload', jsonb_build_object('aps', jsonb_build_object('alert', 'n' || g)))),
                       'shop'
                FROM generate_series(1, $2::int) AS g
                """, [.text(prefix), .int(n)])
        }

        func close() {
            if apns !== stack.emulator { apns.stop() }
            stack.close()
            try? FileManager.default.removeItem(atPath: folder)
        }
    }

    static func token(_ prefix: String, _ n: Int = 1) -> String {
        let tail = String(n, radix: 16)
        return prefix + String(repeating: "0", count: 64 - prefix.count - tail.count) + tail
    }

    @Test func onePoolDeliversAPNsAndFCMJobsEachOnceAndActsOnApplesAnswers() throws {
        let s = try Stand()
        defer { s.close() }
        try s.enqueueAlerts(300, prefix: "ab")
        try s.stack.enqueue(200, prefix: "fcm-")
        let live = try s.enqueue(Self.token("cd"), pushType: "liveactivity",
                                 payload: #"{"aps":{"event":"update","timestamp":1800000000,"content-state":{"score":2}}}"#)
        let background = try s.enqueue(Self.token("ce"), pushType: "background", payload: #"{"aps":{"content-available":1}}"#)
        let gone = Self.token("fa110410")
        let goneAgain = Self.token("fa110410", 2)
        let badToken = Self.token("fa110400")
        let limited = Self.token("fa1104293")
        let flaky = Self.token("fa1105032")
        var ids: [String: Int] = [:]
        for token in [gone, goneAgain, badToken, limited, flaky] { ids[token] = try s.enqueue(token) }
        // goneAgain was registered again after Apple's timestamp (its app reported it later).
        try s.stack.connection.query("INSERT INTO herald.device_tokens (token, last_seen_at) VALUES ($1, now() + interval '10 minutes')",
                                     [.text(goneAgain)])

        let run = try s.work()
        #expect(run.status == 0, "\(run.output)")

        // Each APNs job reached the stand-in once, FCM's each reached FCM once.
        let deliveries = s.apns.apnsDeliveries()
        var byToken: [String: [APNsDelivery]] = [:]
        for delivery in deliveries { byToken[delivery.deviceToken, default: []].append(delivery) }
        #expect(byToken.count == 300 + 2 + 2, "\(byToken.count) tokens delivered")
        #expect(byToken.values.allSatisfy { $0.count == 1 }, "a token delivered twice")
        let fcm = s.stack.emulator.deliveredMessages().filter { $0.projectID == "e2e-project" }
        #expect(fcm.count == 200 && Set(fcm.compactMap(\.token)).count == 200)
        #expect(!fcm.contains { $0.token?.hasPrefix("ab") == true }, "an APNs token went to FCM")

        // One provider token for the key, made by the worker (the stand-in checked each
        // signature, kid and iss, or it would not have delivered).
        #expect(s.apns.apnsStatistics.providerTokensByKey[s.keyID] == 1, "\(s.apns.apnsStatistics.providerTokensByKey)")
        #expect(deliveries.allSatisfy { $0.keyID == s.keyID && $0.teamID == s.teamID })

        // Topic, push type and priority per push type; the apns-id is the job's own.
        let alerts = deliveries.filter { $0.deviceToken.hasPrefix("ab") }
        #expect(alerts.allSatisfy { $0.topic == "com.example.shop" && $0.pushType == "alert" && $0.priority == 10 })
        let liveDelivery = try #require(byToken[Self.token("cd")]?.first)
        #expect(liveDelivery.topic == "com.example.shop.push-type.liveactivity" && liveDelivery.pushType == "liveactivity" && liveDelivery.priority == 10)
        #expect(liveDelivery.apnsID == APNsIdentifier.forJob(Int64(live)))
        let backgroundDelivery = try #require(byToken[Self.token("ce")]?.first)
        #expect(backgroundDelivery.topic == "com.example.shop" && backgroundDelivery.pushType == "background" && backgroundDelivery.priority == 5)
        #expect(backgroundDelivery.apnsID == APNsIdentifier.forJob(Int64(background)))

        // 410: pruned, unless registered again after Apple's timestamp.
        #expect(try s.stack.count("SELECT count(*) FROM herald.pruned_tokens WHERE token = $1", [.text(gone)]) == 1)
        #expect(try s.stack.count("SELECT count(*) FROM herald.pruned_tokens WHERE token = $1", [.text(goneAgain)]) == 0)
        #expect(try s.stack.count("SELECT count(*) FROM herald.device_tokens WHERE token = $1", [.text(goneAgain)]) == 1)
        let keptReason = try s.stack.connection.query("SELECT last_error FROM herald.jobs WHERE message->>'apns_token' = $1", [.text(goneAgain)])[0, 0] ?? ""
        #expect(keptReason.contains("registered again"), "\(keptReason)")

        // BadDeviceToken: dead-lettered, the reason naming the other environment.
        let dead = try s.stack.connection.query("SELECT reason FROM herald.dead_letters WHERE message->>'apns_token' = $1", [.text(badToken)])
        #expect(dead.rowCount == 1 && (dead[0, 0] ?? "").contains("other environment"), "\(dead.rowCount > 0 ? dead[0, 0] ?? "" : "none")")

        // TooManyRequests three times, then delivered once: the gaps between its attempts grow,
        // and the attempts answered 429 were not counted against max_attempts.
        #expect(byToken[limited]?.count == 1)
        let times = try s.stack.connection.query("""
            SELECT extract(epoch FROM (e->>'at')::timestamptz) FROM herald.jobs j, jsonb_array_elements(j.errors) e
            WHERE j.message->>'apns_token' = $1 UNION ALL
            SELECT extract(epoch FROM finished_at) FROM herald.jobs WHERE message->>'apns_token' = $1 ORDER BY 1
            """, [.text(limited)])
        let stamps = (0..<times.rowCount).compactMap { times.double($0, 0) }
        #expect(stamps.count == 4, "\(stamps)")
        if stamps.count == 4 {
            let gaps = zip(stamps.dropFirst(), stamps).map { $0 - $1 }
            #expect(gaps[1] > gaps[0] && gaps[2] > gaps[1], "gaps \(gaps)")
        }
        #expect(try s.stack.count("SELECT attempts FROM herald.jobs WHERE message->>'apns_token' = $1", [.text(limited)]) == 1)
        // 503 twice: retried, delivered on the third attempt, with the apns-id every attempt of
        // the job carries (the stand-in took the third; the id is the job's, not the attempt's).
        #expect(byToken[flaky]?.count == 1)
        #expect(byToken[flaky]?.first?.apnsID == APNsIdentifier.forJob(Int64(ids[flaky] ?? 0)))
        #expect(byToken[limited]?.first?.apnsID == APNsIdentifier.forJob(Int64(ids[limited] ?? 0)))
        #expect(try s.stack.count("SELECT attempts FROM herald.jobs WHERE message->>'apns_token' = $1", [.text(flaky)]) == 3)
        #expect(s.apns.apnsStatistics.byReason["ServiceUnavailable"] == 2)
        #expect(s.apns.apnsStatistics.byReason["TooManyRequests"] == 3)

        #expect(try s.stack.count("SELECT count(*) FROM herald.jobs WHERE state = 'completed'") == 300 + 200 + 2 + 2)
        #expect(!run.output.contains("PRIVATE KEY"))
    }

    /// A token APNs answered 410 for is pruned; a later job to it is never sent again: it ends
    /// as an FCM job to a token FCM pruned ends (discarded, saying the token was pruned earlier
    /// and who reported it), and the delivery events carry the APNs token as they carry FCM's.
    @Test func aPrunedTokenIsNotSentAgainAndEndsAsAnFCMJobToAPrunedTokenEnds() throws {
        let s = try Stand()
        defer { s.close() }
        try s.stack.connection.query("SELECT herald.set_queue_events('default', true)")
        let gone = Self.token("fa110410")
        let fine = Self.token("f1")
        let badToken = Self.token("fa110400")
        let fcmGone = "fail-unregistered-1"
        func enqueueFCM(_ token: String) throws -> Int {
            try s.stack.connection.query("SELECT herald.enqueue($1::jsonb)",
                                         [.text(#"{"token":"\#(token)","notification":{"title":"Hi"}}"#)]).int(0, 0) ?? -1
        }
        let first = try s.enqueue(gone)
        let completed = try s.enqueue(fine)
        let dead = try s.enqueue(badToken)
        _ = try enqueueFCM(fcmGone)
        let run = try s.work()
        #expect(run.status == 0, "\(run.output)")
        #expect(s.apns.apnsStatistics.byReason["Unregistered"] == 1)
        #expect(try s.stack.count("SELECT count(*) FROM herald.pruned_tokens WHERE token IN ($1, $2)", [.text(gone), .text(fcmGone)]) == 2)
        let requestsBefore = s.apns.apnsStatistics.requests

        // New jobs to both pruned tokens.
        let again = try s.enqueue(gone)
        let fcmAgain = try enqueueFCM(fcmGone)
        let second = try s.work()
        #expect(second.status == 0, "\(second.output)")
        #expect(s.apns.apnsStatistics.requests == requestsBefore, "the stand-in received a request for a pruned token")
        #expect(s.apns.apnsStatistics.byReason["Unregistered"] == 1)
        let ended = try s.stack.connection.query("SELECT id, state, coalesce(last_error, '') FROM herald.jobs WHERE id IN ($1, $2)",
                                                 [.int(again), .int(fcmAgain)])
        var states: [Int: (String, String)] = [:]
        for row in 0..<ended.rowCount { states[ended.int(row, 0) ?? 0] = (ended[row, 1] ?? "", ended[row, 2] ?? "") }
        let apnsEnd = try #require(states[again]), fcmEnd = try #require(states[fcmAgain])
        #expect(apnsEnd.0 == "discarded" && apnsEnd.0 == fcmEnd.0, "APNs \(apnsEnd), FCM \(fcmEnd)")
        // The same reason, with its own token and service.
        #expect(fcmEnd.1.contains("was pruned earlier (FCM reported it unregistered); not sent"), "\(fcmEnd.1)")
        let fcmShown = String(fcmGone.prefix(8)), apnsShown = String(gone.prefix(8))
        #expect(apnsEnd.1 == fcmEnd.1.replacingOccurrences(of: fcmShown, with: apnsShown)
                    .replacingOccurrences(of: String(fcmGone.suffix(4)), with: String(gone.suffix(4)))
                    .replacingOccurrences(of: "(FCM reported", with: "(APNs reported"), "\(apnsEnd.1)")

        // Delivery events name the APNs job's token: completed, pruned, dead and discarded.
        let events = try s.stack.connection.query("SELECT job_id, kind, token FROM herald.events WHERE job_id IN ($1, $2, $3, $4) ORDER BY job_id",
                                                  [.int(first), .int(completed), .int(dead), .int(again)])
        var byJob: [Int: (String, String?)] = [:]
        for row in 0..<events.rowCount { byJob[events.int(row, 0) ?? 0] = (events[row, 1] ?? "", events[row, 2]) }
        #expect(byJob[first]?.0 == "pruned" && byJob[first]?.1 == gone, "\(String(describing: byJob[first]))")
        #expect(byJob[completed]?.0 == "completed" && byJob[completed]?.1 == fine, "\(String(describing: byJob[completed]))")
        #expect(byJob[dead]?.0 == "dead" && byJob[dead]?.1 == badToken, "\(String(describing: byJob[dead]))")
        #expect(byJob[again]?.0 == "discarded" && byJob[again]?.1 == gone, "\(String(describing: byJob[again]))")
    }

    /// A campaign that skips stale tokens skips a stale APNs token as it skips an FCM one: the
    /// stand-in receives nothing for it, the job is discarded with the claim's STALE reason; the
    /// campaign's analytics label stays out of what Apple receives.
    @Test func aCampaignSkipsAStaleAPNsToken() throws {
        let s = try Stand()
        defer { s.close() }
        try s.stack.connection.query("SELECT herald.set_token_aging(skip_stale_for_campaigns => true)")
        let stale = Self.token("57", 1), fresh = Self.token("57", 2)
        try s.stack.connection.query("INSERT INTO herald.device_tokens (token, stale_at) VALUES ($1, now())", [.text(stale)])
        // With an analytics label, which FCM messages carry in fcm_options: an APNs request has
        // no such field, and the payload Apple receives is the job's own.
        let campaign = try s.stack.connection.query("SELECT herald.create_campaign('ios-news', project => 'shop', analytics_label => 'spring')").int(0, 0) ?? -1
        for token in [stale, fresh] {
            try s.stack.connection.query("""
                INSERT INTO herald.jobs (message, project, campaign_id)
                VALUES (jsonb_build_object('apns_token', $1::text, 'apns', '{"payload": {"aps": {"alert": "news"}}}'::jsonb), 'shop', $2)
                """, [.text(token), .int(campaign)])
        }
        let run = try s.work()
        #expect(run.status == 0, "\(run.output)")
        #expect(s.apns.apnsDeliveries().map(\.deviceToken) == [fresh])
        #expect(s.apns.apnsDeliveries().map(\.payload) == [try JSONValue.parse(#"{"aps": {"alert": "news"}}"#)])
        #expect(s.apns.apnsStatistics.requests == 1)
        let ended = try s.stack.connection.query("SELECT state, coalesce(last_error, '') FROM herald.jobs WHERE message->>'apns_token' = $1",
                                                 [.text(stale)])
        #expect(ended.rowCount == 1 && ended[0, 0] == "discarded" && (ended[0, 1] ?? "").hasPrefix("STALE:"),
                "\(ended.rowCount > 0 ? (ended[0, 0] ?? "") + " " + (ended[0, 1] ?? "") : "none")")
    }

    /// An app's max_rate holds for the whole pool: two processes share the app's bucket in
    /// herald.project_rates, so APNs receives no more than the rate (and the bucket's burst, a
    /// tenth of a second's worth) in any second; `herald stats` shows the rate on the app's line.
    @Test func anAppsMaxRateHoldsAcrossThePool() throws {
        let s = try Stand()
        defer { s.close() }
        try s.stack.connection.query("UPDATE herald.projects SET max_rate = 50 WHERE name = 'shop'")
        try s.enqueueAlerts(200, prefix: "a5")
        let run = try s.work(["--drain", "--processes", "2", "--poll-interval", "0.2"])
        #expect(run.status == 0, "\(run.output)")
        let times = s.apns.apnsDeliveries().map(\.receivedAtMilliseconds).sorted()
        #expect(times.count == 200 && Set(s.apns.apnsDeliveries().map(\.deviceToken)).count == 200)
        // Any second: at most 50 a second, the burst of 5 and a little for the time between a
        // claim and its requests' arrival.
        var busiest = 0
        var end = 0
        for start in times.indices {
            while end < times.count && times[end] < times[start] + 1000 { end += 1 }
            busiest = max(busiest, end - start)
        }
        #expect(busiest <= 60, "\(busiest) requests in one second")
        // And the drain as a whole: 195 jobs past the burst at 50 a second take about 3.9 s.
        if let first = times.first, let last = times.last {
            #expect(Double(last - first) / 1000 >= 3.5, "200 jobs in \(Double(last - first) / 1000) s")
        }
        // herald stats: the app's max rate and its rate now on its line, not as an FCM project.
        let stats = try HeraldProcess.run(["stats"], environment: s.environment, timeout: 60)
        #expect(stats.status == 0, "\(stats.output)")
        let line = stats.output.split(separator: "\n").first { $0.hasPrefix("shop ") }.map(String.init) ?? ""
        #expect(line.contains("(APNs app)") && line.components(separatedBy: "50/s").count == 3, "\(stats.output)")
        #expect(!stats.output.contains(APNsApp.rateBucket("shop")), "\(stats.output)")
    }

    /// A key that is missing, not a P-256 key, or named for another key ID pauses its own app
    /// with the reason naming the file (never a byte of a key); the other app and FCM go on.
    @Test func aBrokenKeyPausesOnlyItsAppNamingTheFile() throws {
        let s = try Stand()
        defer { s.close() }
        let missing = s.folder + "/AuthKey_MISSING000.p8"
        let notAKey = s.folder + "/not-a-key.p8"
        try Data("-----BEGIN PRIVATE KEY-----\nbm90IGEga2V5\n-----END PRIVATE KEY-----\n".utf8).write(to: URL(fileURLWithPath: notAKey))
        let otherID = s.folder + "/AuthKey_ZZZZZZZZZZ.p8"
        try FileManager.default.copyItem(atPath: s.keyPath, toPath: otherID)
        try s.register("gone", keyFile: missing, keyID: "MISSING000")
        try s.register("garbled", keyFile: notAKey)
        try s.register("other", keyFile: otherID)
        for app in ["shop", "gone", "garbled", "other"] {
            for n in 1...5 { try s.enqueue(Self.token("b0", n + app.count * 100), app: app) }
        }
        try s.stack.enqueue(20, prefix: "fcm-")
        let run = try s.work()
        #expect(run.status == 0, "\(run.output)")
        #expect(s.apns.apnsDeliveries().count == 5, "only shop's jobs were sent")
        #expect(s.stack.emulator.deliveredMessages().filter { $0.projectID == "e2e-project" }.count == 20)
        func reason(_ app: String) throws -> String {
            try s.stack.connection.query("SELECT coalesce(paused_reason, '') FROM herald.projects WHERE name = $1", [.text(app)])[0, 0] ?? ""
        }
        #expect(try reason("shop").isEmpty)
        let gone = try reason("gone"), garbled = try reason("garbled"), other = try reason("other")
        #expect(gone.hasPrefix("credentials: ") && gone.contains(missing) && gone.contains("does not exist"), "\(gone)")
        #expect(garbled.contains(notAKey) && garbled.contains("not an APNs signing key"), "\(garbled)")
        #expect(other.contains(otherID) && other.contains("ZZZZZZZZZZ") && other.contains(s.keyID), "\(other)")
        let key = try String(contentsOfFile: s.keyPath, encoding: .utf8)
        // The key's first line of base64 (the emulator writes a line of what it is for above the block).
        let keyLine = try #require(key.split(separator: "\n").first { !$0.hasPrefix("-----") && !$0.hasPrefix("Herald emulator") })
        for text in [gone, garbled, other, run.output] {
            #expect(!text.contains("PRIVATE KEY-----\n") && !text.contains(keyLine), "a key in a reason or the log")
        }
        #expect(try s.stack.count("SELECT count(*) FROM herald.jobs WHERE project IN ('gone', 'garbled', 'other') AND state = 'available'") == 15)
    }

    /// A provider token older than the stand-in takes (4 s here, Apple's hour) is answered
    /// ExpiredProviderToken: the worker makes a new one at once and the job is delivered without
    /// using an attempt.
    @Test func anExpiredProviderTokenIsRenewedAndTheJobDeliveredWithoutAnAttemptUsed() throws {
        var configuration = EmulatorConfiguration(host: "127.0.0.1", port: 0, threads: 1)
        configuration.apnsProviderTokenMaxAge = 4
        let s = try Stand(apnsConfiguration: configuration)
        defer { s.close() }
        let pool = try HeraldProcess(["work", "--processes", "1", "--poll-interval", "0.2"], environment: s.environment)
        try pool.start()
        defer { pool.signal(SIGTERM); _ = pool.wait(timeout: 60) }
        try s.enqueue(Self.token("c1"))
        #expect(waitUntil(timeout: 30) { s.apns.apnsDeliveries().count == 1 }, "\(pool.output)")
        // The token's age is what is tested: it grows past what the stand-in takes.
        Thread.sleep(forTimeInterval: 5)
        let second = try s.enqueue(Self.token("c2"))
        #expect(waitUntil(timeout: 30) { s.apns.apnsDeliveries().count == 2 }, "\(pool.output)")
        #expect(s.apns.apnsStatistics.byReason["ExpiredProviderToken"] ?? 0 >= 1)
        #expect(s.apns.apnsStatistics.providerTokensByKey[s.keyID] == 2)
        #expect(try s.stack.count("SELECT attempts FROM herald.jobs WHERE id = $1", [.int(second)]) == 1)
        #expect(try s.stack.count("SELECT jsonb_array_length(errors) FROM herald.jobs WHERE id = $1", [.int(second)]) == 0)
        #expect(waitUntil(timeout: 10) { (try? s.stack.count("SELECT count(*) FROM herald.jobs WHERE state = 'completed'")) == 2 })
    }

    /// A 403 that every job of an app would meet (a key APNs does not know: InvalidProviderToken)
    /// pauses that app with Apple's reason until an operator resumes it; its jobs wait unsent,
    /// no attempt used, and the other app's go out.
    @Test func aRefusedKeyPausesItsAppWithApplesReason() throws {
        let s = try Stand()
        defer { s.close() }
        // A key of the same team the stand-in never heard of.
        let stranger = try EmulatorServer(configuration: EmulatorConfiguration(host: "127.0.0.1", port: 0, threads: 1)).writeAPNsKey(folder: s.folder)
        try s.stack.connection.query("SELECT herald.add_apns_app('unknown-key', $1, $2, $3, 'com.example.shop')",
                                     [.text(stranger.path), .text(stranger.keyID), .text(s.teamID)])
        for n in 1...5 {
            try s.enqueue(Self.token("d1", n))
            try s.enqueue(Self.token("d2", n), app: "unknown-key")
        }
        let pool = try HeraldProcess(["work", "--processes", "1", "--poll-interval", "0.2"], environment: s.environment)
        try pool.start()
        defer { pool.signal(SIGTERM); _ = pool.wait(timeout: 60) }
        var reason = ""
        #expect(try waitUntil(timeout: 30) {
            reason = try s.stack.connection.query("SELECT coalesce(paused_reason, '') FROM herald.projects WHERE name = 'unknown-key'")[0, 0] ?? ""
            return !reason.isEmpty
        }, "\(pool.output)")
        #expect(reason.contains("InvalidProviderToken") && reason.contains("herald apns resume unknown-key"), "\(reason)")
        #expect(waitUntil(timeout: 30) { s.apns.apnsDeliveries().count == 5 }, "\(pool.output)")
        #expect(try waitUntil(timeout: 15) {
            try s.stack.count("SELECT count(*) FROM herald.jobs WHERE project = 'unknown-key' AND state = 'available' AND attempts = 0") == 5
        })
        #expect(s.apns.apnsDeliveries().allSatisfy { $0.deviceToken.hasPrefix("d1") })
        #expect(try s.stack.count("SELECT count(*) FROM herald.dead_letters") == 0)

        // Fixed at Apple's side (the stand-in now knows the key) and resumed: the same pool
        // delivers the app's jobs, each once.
        try s.apns.trustAPNsKey(pem: try String(contentsOfFile: stranger.path, encoding: .utf8), keyID: stranger.keyID, teamID: s.teamID)
        try s.stack.connection.query("SELECT herald.resume_project_sending('unknown-key')")
        #expect(waitUntil(timeout: 30) { s.apns.apnsDeliveries().count == 10 }, "\(pool.output)")
        #expect(Set(s.apns.apnsDeliveries().map(\.deviceToken)).count == 10)
    }

    /// A payload shaped like a Live Activity update enqueued without its push type goes out as the
    /// alert it was enqueued as, and the pool says so once for the app, naming the header to set.
    @Test func aLiveActivityShapedAlertIsWarnedAboutOncePerApp() throws {
        let s = try Stand()
        defer { s.close() }
        let activity = #"{"aps":{"event":"update","timestamp":1700000000,"content-state":{"score":"2-1"}}}"#
        for n in 1...3 { try s.enqueue(Self.token("f1", n), payload: activity) }
        try s.enqueue(Self.token("f2"))
        let run = try s.work()
        #expect(run.status == 0, "\(run.output)")
        #expect(waitUntil(timeout: 10) { s.apns.apnsDeliveries().count == 4 })
        #expect(s.apns.apnsDeliveries().allSatisfy { $0.pushType == "alert" && $0.topic == "com.example.shop" }, "sent as enqueued")
        let warnings = run.output.components(separatedBy: "looks like a Live Activity update").count - 1
        #expect(warnings == 1, "once for the app: \(run.output)")
        #expect(run.output.contains(#"apns-push-type "liveactivity""#) && run.output.contains("com.example.shop.push-type.liveactivity"), "\(run.output)")
    }

    /// The first day's mistakes, corrected where they show: an app added with a wrong team ID
    /// (Apple: InvalidProviderToken) and one with a wrong topic (TopicDisallowed) each pause with
    /// the cause that decided it, shown by herald stats, its JSON and herald apns list; herald apns
    /// update corrects them, and resume has the running pool send them at once, though it reads the
    /// registry only every hour here. An app whose jobs should not go out at all is removed with
    /// them: remove is refused while they wait, and --force dead-letters them, saying how many.
    @Test func aWrongTeamIDOrTopicIsCorrectedInPlaceAndResumedAtOnce() throws {
        let s = try Stand()
        defer { s.close() }
        try s.stack.connection.query("SELECT herald.add_apns_app('typo-team', $1, $2, 'WRONGTEAM1', 'com.example.shop')",
                                     [.text(s.keyPath), .text(s.keyID)])
        try s.stack.connection.query("SELECT herald.add_apns_app('typo-topic', $1, $2, $3, 'com.example.shopp')",
                                     [.text(s.keyPath), .text(s.keyID), .text(s.teamID)])
        for n in 1...4 {
            try s.enqueue(Self.token("e1", n), app: "typo-team")
            try s.enqueue(Self.token("e2", n), app: "typo-topic")
        }
        var environment = s.environment
        environment["HERALD_REGISTRY_POLL_SECONDS"] = "3600"
        let pool = try HeraldProcess(["work", "--processes", "1", "--poll-interval", "0.2"], environment: environment)
        try pool.start()
        defer { pool.signal(SIGTERM); _ = pool.wait(timeout: 60) }
        func cause(_ app: String) throws -> String {
            try s.stack.connection.query("SELECT coalesce(paused_cause, '') FROM herald.projects WHERE name = $1", [.text(app)])[0, 0] ?? ""
        }
        #expect(try waitUntil(timeout: 30) { try cause("typo-team") == "apns_auth" && cause("typo-topic") == "apns_topic" }, "\(pool.output)")
        let database = ["DATABASE_URL": s.stack.database.url]
        let stats = try HeraldProcess.run(["stats", "--json"], environment: database, timeout: 60)
        let projects = (try JSONValue.parse(stats.output))["projects"]?.arrayValue ?? []
        func statsCause(_ app: String) -> String? { projects.first { $0["project"]?.stringValue == app }?["pause_cause"]?.stringValue }
        #expect(statsCause("typo-team") == "apns_auth" && statsCause("typo-topic") == "apns_topic", "\(stats.output)")
        let text = try HeraldProcess.run(["stats"], environment: database, timeout: 60)
        #expect(text.output.contains("typo-team paused (apns_auth): APNs: InvalidProviderToken"), "\(text.output)")
        #expect(text.output.contains("typo-topic paused (apns_topic): APNs: TopicDisallowed"), "\(text.output)")
        #expect(text.output.contains("typo-team   (APNs app)        paused (apns_auth)"), "the STATE column names the cause: \(text.output)")
        let listed = try HeraldProcess.run(["apns", "list"], environment: database, timeout: 60)
        #expect(listed.output.contains("paused (apns_topic: APNs: TopicDisallowed"), "\(listed.output)")

        // Corrected and resumed: both apps' jobs go out within seconds, each once, with the
        // team and topic given now.
        let team = try HeraldProcess.run(["apns", "update", "typo-team", "--team-id", s.teamID], environment: database, timeout: 60)
        #expect(team.status == 0 && team.output.contains("team id WRONGTEAM1 -> \(s.teamID)") && team.output.contains("herald apns resume typo-team"),
                "\(team.output)")
        let topic = try HeraldProcess.run(["apns", "update", "typo-topic", "--topic", "com.example.shop"], environment: database, timeout: 60)
        #expect(topic.status == 0 && topic.output.contains("topic com.example.shopp -> com.example.shop"), "\(topic.output)")
        #expect(s.apns.apnsDeliveries().isEmpty, "nothing went out before the resume")
        for app in ["typo-team", "typo-topic"] {
            let resumed = try HeraldProcess.run(["apns", "resume", app], environment: database, timeout: 60)
            #expect(resumed.status == 0, "\(resumed.output)")
        }
        #expect(waitUntil(timeout: 20) { s.apns.apnsDeliveries().count == 8 }, "\(pool.output)")
        #expect(Set(s.apns.apnsDeliveries().map(\.deviceToken)).count == 8)
        #expect(s.apns.apnsDeliveries().allSatisfy { $0.teamID == s.teamID && $0.topic == "com.example.shop" })
        let logged = try s.stack.connection.query("SELECT details->'team_id'->>'from', details->'team_id'->>'to' FROM herald.admin_log WHERE action = 'update_apns_app'")
        #expect(logged.rowCount == 2 && logged[0, 0] == "WRONGTEAM1" && logged[0, 1] == s.teamID, "the audit log holds each change")

        // An app whose jobs must not go out: remove is refused while they wait, --force says how
        // many it dead-lettered.
        try s.stack.connection.query("SELECT herald.add_apns_app('retired', $1, $2, $3, 'com.example.shop')",
                                     [.text(s.keyPath), .text(s.keyID), .text(s.teamID)])
        try s.stack.connection.query("SELECT herald.pause_project_sending('retired', 'app withdrawn')")
        for n in 1...3 { try s.enqueue(Self.token("e3", n), app: "retired") }
        let refused = try HeraldProcess.run(["apns", "remove", "retired"], environment: database, timeout: 60)
        #expect(refused.status == 2 && refused.output.contains("has 3 pending jobs") && refused.output.contains("herald apns remove retired --force"),
                "\(refused.output)")
        let forced = try HeraldProcess.run(["apns", "remove", "retired", "--force"], environment: database, timeout: 60)
        #expect(forced.status == 0 && forced.output.contains("3 pending jobs dead-lettered with it"), "\(forced.output)")
        #expect(try s.stack.count("SELECT count(*) FROM herald.dead_letters WHERE project = 'retired' AND reason LIKE 'removed with APNs app retired%'") == 3)
        #expect(try s.stack.count("SELECT count(*) FROM herald.jobs WHERE project = 'retired'") == 0)
        #expect(try s.stack.count("SELECT count(*) FROM herald.admin_log WHERE action = 'remove_apns_app' AND (details->>'dead_lettered')::int = 3") == 1)
    }

    /// APNs not answering at all (nothing listens at the URL) opens the app's outage circuit: its
    /// jobs are put back without using their attempts, over and over, and none is dead-lettered.
    @Test func anUnreachableEndpointOpensTheAppsCircuitWithoutSpendingAttempts() throws {
        let s = try Stand()
        defer { s.close() }
        var environment = s.environment
        // A port nothing listens on: connections are refused.
        let closed = try startWorkerEmulator()
        environment["HERALD_APNS_URL"] = closed.baseURL
        closed.stop()
        for n in 1...30 { try s.enqueue(Self.token("e1", n)) }
        try s.stack.connection.query("UPDATE herald.jobs SET max_attempts = 3")
        let pool = try HeraldProcess(["work", "--processes", "1", "--poll-interval", "0.2"], environment: environment)
        try pool.start()
        defer { pool.signal(SIGTERM); _ = pool.wait(timeout: 60) }
        #expect(waitUntil(timeout: 30) { pool.output.contains("APNs unreachable for every request") }, "\(pool.output)")
        // The time is what is tested: long enough for a pool spending attempts (backoff from 1 s,
        // doubling) to have spent all three of each job; the circuit's probes go out every 0.5
        // to 4 s meanwhile.
        Thread.sleep(forTimeInterval: 8)
        #expect(try s.stack.count("SELECT count(*) FROM herald.dead_letters") == 0, "\(pool.output)")
        #expect(try s.stack.count("SELECT count(*) FROM herald.jobs WHERE attempts >= 3") == 0)
    }
}
