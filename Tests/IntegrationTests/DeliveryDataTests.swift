import Emulator
import FCM
import Foundation
import JSON
import Postgres
import Queue
import Testing
import TestSupport
@testable import Worker

/// Two registry projects on the emulator, each with an Android app, and a day's and the next
/// day's campaigns sent by a real `herald work`: what FCM's Data API then reports of each label,
/// as the emulator was told to. `shop`'s key may read the data; `news`'s may not (the emulator
/// answers it 403 PERMISSION_DENIED). The emulator gives one entry a page, so every listing of
/// more than one entry goes past its first page.
struct DeliveryScenario {
    let stack: WorkerStack
    let keys: [String]
    static let shopApp = "1:1111:android:aa11"
    static let newsApp = "1:2222:android:bb22"
    /// FCM's days (America/Los_Angeles) of the database's clock: the first day is yesterday.
    let yesterday: String
    let today: String
    private(set) var campaigns: [String: Int] = [:]

    /// What the emulator reports of each label beside the count (FCM's own shape).
    static let springShares: JSONValue = ["messageOutcomePercents": ["delivered": 83.5, "pending": 16.5],
                                          "deliveryPerformancePercents": ["deliveredNoDelay": 60, "delayedDeviceOffline": 23.5]]
    static let summerShares: JSONValue = ["messageOutcomePercents": ["delivered": 90, "collapsed": 7.5, "droppedDeviceInactive": 2.5],
                                          "deliveryPerformancePercents": ["deliveredNoDelay": 88],
                                          "messageInsightPercents": ["priorityLowered": 4]]

    init() throws {
        stack = try WorkerStack()
        let c = stack.connection
        var keys: [String] = []
        for (name, fcm) in [("shop", "shop-fcm"), ("news", "news-fcm")] {
            let key = NSTemporaryDirectory() + "herald-\(name)-\(UUID().uuidString).json"
            try stack.emulator.writeServiceAccount(to: key, projectID: fcm)
            try c.query("SELECT herald.add_project($1, $2, $3)", [.text(name), .text(fcm), .text(key)])
            keys.append(key)
        }
        self.keys = keys
        yesterday = try c.query("SELECT to_char((now() AT TIME ZONE 'America/Los_Angeles')::date - 1, 'YYYY-MM-DD')")[0, 0]!
        today = try c.query("SELECT to_char((now() AT TIME ZONE 'America/Los_Angeles')::date, 'YYYY-MM-DD')")[0, 0]!
        stack.emulator.updateDeliveryData { options in
            options.pageSize = 1
            options.labelData["spring-sale"] = Self.springShares.objectValue!
            options.labelData["summer-sale"] = Self.summerShares.objectValue!
            options.denied = ["news-fcm"]
        }
    }

    var shell: [String: String] {
        var environment = ["DATABASE_URL": stack.database.url, "HERALD_FCM_DATA_URL": stack.emulator.baseURL]
        // The emulator serves HTTPS with a certificate of its own authority, as a user trusts theirs.
        if let caFile = stack.caFile { environment["HERALD_CA_FILE"] = caFile }
        return environment
    }

    func herald(_ arguments: [String]) throws -> (status: Int32?, output: String) {
        try HeraldProcess.run(arguments, environment: shell)
    }

    /// `n` jobs of campaign `name` (made on first use, for `project`, with `label`).
    mutating func enqueue(_ n: Int, campaign name: String, label: String, project: String) throws {
        let c = stack.connection
        if campaigns[name] == nil {
            campaigns[name] = try c.query("SELECT herald.create_campaign($1, analytics_label => $2, project => $3)",
                                          [.text(name), .text(label), .text(project)]).int(0, 0)
        }
        try c.query("""
            INSERT INTO herald.jobs (message, queue, campaign_id)
            SELECT jsonb_build_object('token', $1::text || '-' || g || '-' || $3::text, 'notification', jsonb_build_object('title', 'Hi')),
                   'campaigns', $2::bigint
            FROM generate_series(1, $4::int) AS g
            """, [.text(name), .int(campaigns[name]!), .text(UUID().uuidString.prefix(8).lowercased()), .int(n)])
    }

    /// Sends what is enqueued with a real pool, to the end.
    func send() throws {
        let run = try stack.work(["--drain", "--processes", "1", "--poll-interval", "0.2"])
        #expect(run.status == 0, "\(run.output)")
    }

    /// The first day's sends and the second's: spring (6) and the first 4 of summer yesterday,
    /// the other 5 of summer and autumn (7) today; news's letters (3) yesterday. Herald counts in
    /// the database's days, so what it sent "yesterday" is moved there once sent, as the emulator
    /// is told the day.
    mutating func sendTwoDays() throws {
        stack.emulator.updateDeliveryData { $0.day = DeliveryDataDay(yesterday) }
        try enqueue(6, campaign: "spring", label: "spring-sale", project: "shop")
        try enqueue(4, campaign: "summer", label: "summer-sale", project: "shop")
        try enqueue(3, campaign: "letters", label: "letters", project: "news")
        try send()
        try stack.connection.query("UPDATE herald.campaign_days SET day = $1::date WHERE day = $2::date", [.text(yesterday), .text(today)])
        stack.emulator.updateDeliveryData { $0.day = DeliveryDataDay(today) }
        try enqueue(5, campaign: "summer", label: "summer-sale", project: "shop")
        try enqueue(7, campaign: "autumn", label: "autumn-sale", project: "shop")
        try send()
    }

    func close() {
        stack.close()
        for key in keys { try? FileManager.default.removeItem(atPath: key) }
    }
}

@Suite(.serialized) struct DeliveryDataTests {
    @Test(.timeLimit(.minutes(10))) func threeCampaignsOverTwoDaysAreFetchedAndShownBesideWhatHeraldSent() throws {
        var scenario = try DeliveryScenario()
        defer { scenario.close() }
        let c = scenario.stack.connection
        try scenario.sendTwoDays()
        // The apps named once the days are sent, so the pools' leaders had nothing to fetch before.
        let set = try scenario.herald(["projects", "set", "shop", "--android-app", DeliveryScenario.shopApp])
        #expect(set.status == 0 && set.output.contains("Android app \(DeliveryScenario.shopApp)"), "\(set.output)")
        #expect(try scenario.herald(["projects", "set", "news", "--android-app", DeliveryScenario.newsApp]).status == 0)
        #expect(try c.query("SELECT sum(sent) FROM herald.campaign_days").int(0, 0) == 25, "every job sent is counted once")

        let fetch = try scenario.herald(["delivery-data", "fetch"])
        #expect(fetch.status == 1, "a project skipped makes the fetch's status 1: \(fetch.output)")
        #expect(fetch.output.contains("delivery data of project shop: 1 app, 4 pages, 4 rows stored"), "\(fetch.output)")
        let newsLines = fetch.output.split(separator: "\n").filter { $0.contains("news") }
        #expect(newsLines.count == 1, "one line for the project without access: \(fetch.output)")
        #expect(newsLines.first?.contains("delivery data of project news skipped") == true
                && newsLines.first?.contains("lacks the IAM permission fcmdata.deliverydata.list on project news-fcm") == true
                && newsLines.first?.contains("Firebase Cloud Messaging API Admin") == true, "\(fetch.output)")
        let emulated = scenario.stack.emulator.deliveryData
        #expect(emulated["list_requests"]?.intValue == 4, "one page each of the 4 entries: \(emulated)")
        #expect(emulated["refusals"]?.intValue == 1)

        // What is stored is what the emulator was told.
        let stored = try c.query("""
            SELECT analytics_label, to_char(day, 'YYYY-MM-DD'), messages_accepted, delivered, pending, collapsed, dropped_device_inactive,
                   delivered_no_delay, priority_lowered
            FROM herald.delivery_data WHERE project = 'shop' AND app_id = $1 ORDER BY day, analytics_label
            """, [.text(DeliveryScenario.shopApp)])
        let rows = (0..<stored.rowCount).map { r in (0..<9).map { stored[r, $0] ?? "null" }.joined(separator: " ") }
        #expect(rows == [
            "spring-sale \(scenario.yesterday) 6 83.5 16.5 null null 60 null",
            "summer-sale \(scenario.yesterday) 4 90 null 7.5 2.5 88 4",
            "autumn-sale \(scenario.today) 7 100 null null null 100 null",
            "summer-sale \(scenario.today) 5 90 null 7.5 2.5 88 4",
        ], "\(rows)")
        #expect(try c.query("SELECT count(*) FROM herald.delivery_data WHERE project = 'news'").int(0, 0) == 0)
        let fetches = try c.query("SELECT project, outcome, reason FROM herald.delivery_data_fetches ORDER BY project")
        #expect(fetches[0, 0] == "news" && fetches[0, 1] == "skipped" && fetches[0, 2]?.contains("fcmdata.deliverydata.list") == true)
        #expect(fetches[1, 0] == "shop" && fetches[1, 1] == "fetched")

        // herald campaigns show: summer's two days, each beside FCM's figures of its label.
        let summer = try #require(scenario.campaigns["summer"])
        let show = try scenario.herald(["campaigns", "show", String(summer)])
        #expect(show.status == 0, "\(show.output)")
        let lines = show.output.split(separator: "\n").map(String.init)
        let first = try #require(lines.first { $0.hasPrefix("  \(scenario.yesterday)") }, "\(show.output)")
        let second = try #require(lines.first { $0.hasPrefix("  \(scenario.today)") }, "\(show.output)")
        func cells(_ line: String) -> [String] { line.split(separator: " ").map(String.init) }
        #expect(Array(cells(first).prefix(8)) == [scenario.yesterday, "4", "4", "90.0%", "-", "7.5%", "2.5%", "88.0%"], "\(first)")
        #expect(Array(cells(second).prefix(8)) == [scenario.today, "5", "5", "90.0%", "-", "7.5%", "2.5%", "88.0%"], "\(second)")
        #expect(first.contains("fetched 20"), "the time FCM's numbers were fetched: \(first)")
        #expect(show.output.contains("days end at midnight America/Los_Angeles"))

        let spring = try #require(scenario.campaigns["spring"])
        let springShow = try scenario.herald(["campaigns", "show", String(spring), "--json"])
        let json = try JSONValue.parse(Array(springShow.output.utf8))
        let days = json["delivery"]?["days"]?.arrayValue ?? []
        #expect(days.count == 1 && days[0]["day"]?.stringValue == scenario.yesterday && days[0]["sent"]?.intValue == 6
                && days[0]["fcm_accepted"]?.intValue == 6 && days[0]["delivered"]?.doubleValue == 83.5
                && days[0]["pending"]?.doubleValue == 16.5 && days[0]["delayed_device_offline"]?.doubleValue == 23.5, "\(springShow.output)")

        // news's campaign: sent, and why FCM's numbers are missing.
        let letters = try scenario.herald(["campaigns", "show", String(try #require(scenario.campaigns["letters"]))])
        #expect(letters.output.contains("the last fetch") && letters.output.contains("skipped project news")
                && letters.output.contains("fcmdata.deliverydata.list"), "\(letters.output)")
        let lettersDay = try #require(letters.output.split(separator: "\n").first { $0.hasPrefix("  \(scenario.yesterday)") })
        #expect(cells(String(lettersDay)).prefix(3) == [scenario.yesterday, "3", "-"], "sent 3, nothing from FCM: \(lettersDay)")

        // The view applications read, as a reader role.
        try c.query("DROP ROLE IF EXISTS delivery_reader")
        try c.query("CREATE ROLE delivery_reader")
        defer { _ = try? c.query("DROP OWNED BY delivery_reader"); _ = try? c.query("DROP ROLE IF EXISTS delivery_reader") }
        try c.query("SELECT herald.grant_role('delivery_reader', 'reader')")
        try c.query("SET ROLE delivery_reader")
        let view = try c.query("""
            SELECT day::text, sent, fcm_accepted, delivered FROM herald.campaign_delivery WHERE campaign_id = $1 ORDER BY day
            """, [.int(summer)])
        let readable = try c.query("SELECT count(*) FROM herald.delivery_data").int(0, 0)
        try c.query("RESET ROLE")
        #expect(view.rowCount == 2 && view[0, 0] == scenario.yesterday && view[0, 1] == "4" && view[0, 2] == "4" && view[0, 3] == "90"
                && view[1, 1] == "5", "a reader reads the campaigns' view")
        #expect(readable == 4)
    }

    @Test func pagesAreAllReadAndARevisedDayReplacesItsRows() throws {
        var scenario = try DeliveryScenario()
        defer { scenario.close() }
        let c = scenario.stack.connection
        try scenario.enqueue(3, campaign: "a", label: "label-a", project: "shop")
        try scenario.enqueue(2, campaign: "b", label: "label-b", project: "shop")
        try scenario.enqueue(2, campaign: "c", label: "label-c", project: "shop")
        try scenario.send()
        // Named after the first sends: later pools' leaders find shop fetched today, not due.
        _ = try ProjectRegistry.setAndroidApps(c, name: "shop", apps: [DeliveryScenario.shopApp], source: "test")
        var settings = DeliveryDataSettings(baseURL: scenario.stack.emulator.baseURL)
        settings.caFile = scenario.stack.caFile
        let fetcher = try DeliveryDataFetcher(settings: settings)
        let shop = try #require(try ProjectRegistry.entry(c, name: "shop"))
        var report = fetcher.fetch(c, project: shop)
        #expect(report.outcome == .fetched && report.pages == 3 && report.rows == 3 && report.revised == 0, "\(report)")
        #expect(report.latestDay?.description == scenario.today)

        // FCM revises the day: b's shares change.
        let before = try c.query("SELECT fetched_at FROM herald.delivery_data WHERE analytics_label = 'label-b'")[0, 0]
        scenario.stack.emulator.updateDeliveryData { $0.labelData["label-b"] = JSONObject(["messageOutcomePercents": ["delivered": 40, "pending": 60]]) }
        report = fetcher.fetch(c, project: shop)
        #expect(report.outcome == .fetched && report.rows == 3 && report.revised == 1 && report.removed == 0, "\(report)")
        #expect(report.line.contains("(1 revised by FCM)"), "\(report.line)")
        let revised = try c.query("SELECT delivered, pending, fetched_at FROM herald.delivery_data WHERE analytics_label = 'label-b'")
        #expect(revised[0, 0] == "40" && revised[0, 1] == "60" && revised[0, 2] != before)

        // FCM no longer reports c for the day: its row goes; a's count follows what FCM says now.
        scenario.stack.emulator.reset()
        try scenario.enqueue(1, campaign: "a", label: "label-a", project: "shop")
        try scenario.enqueue(1, campaign: "b", label: "label-b", project: "shop")
        try scenario.send()
        report = fetcher.fetch(c, project: shop)
        #expect(report.rows == 2 && report.removed == 1 && report.revised == 2, "\(report)")
        let left = try c.query("SELECT analytics_label, messages_accepted FROM herald.delivery_data ORDER BY analytics_label")
        #expect(left.rowCount == 2 && left[0, 0] == "label-a" && left[0, 1] == "1" && left[1, 0] == "label-b")

        // --days: a day older than the window is not stored.
        scenario.stack.emulator.updateDeliveryData { $0.day = DeliveryDataDay(year: 2020, month: 1, day: 2) }
        try scenario.enqueue(1, campaign: "old", label: "label-old", project: "shop")
        try scenario.send()
        settings.days = 3
        report = try DeliveryDataFetcher(settings: settings).fetch(c, project: shop)
        #expect(report.outcome == .fetched && report.rows == 2, "\(report)")
        #expect(try c.query("SELECT count(*) FROM herald.delivery_data WHERE day < '2021-01-01'").int(0, 0) == 0)
        settings.days = nil
        report = try DeliveryDataFetcher(settings: settings).fetch(c, project: shop)
        let old = try c.query("SELECT count(*) FROM herald.delivery_data WHERE day = '2020-01-02'").int(0, 0)
        #expect(report.rows == 3 && old == 1, "\(report)")
    }

    @Test func aProjectWithoutAppsOrAccessIsSkippedWithItsReasonAndTheOthersAreFetched() throws {
        var scenario = try DeliveryScenario()
        defer { scenario.close() }
        let c = scenario.stack.connection
        try scenario.enqueue(2, campaign: "a", label: "label-a", project: "shop")
        try scenario.send()
        // Neither project names an app yet.
        var fetch = try scenario.herald(["delivery-data", "fetch"])
        #expect(fetch.status == 0, "fetching every project, one without apps is noted, not an error: \(fetch.output)")
        #expect(fetch.output.contains("delivery data of project shop skipped: it names no Android app to ask FCM about; herald projects set shop --android-app APP_ID"),
                "\(fetch.output)")
        fetch = try scenario.herald(["delivery-data", "fetch", "--project", "shop"])
        #expect(fetch.status == 1, "a project named that cannot be fetched: \(fetch.output)")

        _ = try ProjectRegistry.setAndroidApps(c, name: "shop", apps: [DeliveryScenario.shopApp], source: "test")
        _ = try ProjectRegistry.setAndroidApps(c, name: "news", apps: [DeliveryScenario.newsApp], source: "test")
        // The Data API not enabled in news's project: named, with where to enable it.
        scenario.stack.emulator.updateDeliveryData { $0.disabled = ["news-fcm"] }
        fetch = try scenario.herald(["delivery-data", "fetch"])
        #expect(fetch.status == 1)
        #expect(fetch.output.contains("delivery data of project shop: 1 app, 1 page, 1 row stored"), "\(fetch.output)")
        #expect(fetch.output.contains("delivery data of project news skipped: the Firebase Cloud Messaging Data API (fcmdata.googleapis.com) is not enabled in Google Cloud project news-fcm; enable it (https://console.developers.google.com/apis/api/fcmdata.googleapis.com/overview?project=news-fcm)"),
                "\(fetch.output)")
        #expect(!fetch.output.contains("ya29."), "no access token in what is printed")
        let status = try scenario.herald(["delivery-data", "status"])
        #expect(status.status == 0 && status.output.contains("skipped: the Firebase Cloud Messaging Data API") && status.output.contains(DeliveryScenario.shopApp),
                "\(status.output)")
        let cleared = try scenario.herald(["projects", "set", "news", "--no-android-apps"])
        let news = try ProjectRegistry.entry(c, name: "news")
        #expect(cleared.status == 0 && news?.androidApps == [], "\(cleared.output)")
        let refused = try scenario.herald(["projects", "set", "shop", "--android-app", "com.example.shop"])
        #expect(refused.status != 0 && refused.output.contains("\"com.example.shop\" is not a Firebase Android app id"), "\(refused.output)")
        #expect(try AdminLog.recent(c, limit: 10).filter { $0.action == "set_project_android_apps" }.count == 3)

        // An APNs app's campaign: what Herald sent, and that Apple has no such API.
        try c.query("SELECT herald.add_apns_app('shop-ios', '/secrets/AuthKey_ABC123DEFG.p8', 'ABC123DEFG', 'DEF123GHIJ', 'com.example.shop')")
        let ios = try #require(try c.query("SELECT herald.create_campaign('ios-sale', analytics_label => 'ios-sale', project => 'shop-ios')").int(0, 0))
        try c.query("INSERT INTO herald.campaign_days (campaign_id, day, sent) VALUES ($1, $2::date, 12)", [.int(ios), .text(scenario.today)])
        let show = try scenario.herald(["campaigns", "show", String(ios)])
        #expect(show.output.contains("FCM's numbers: none, APNs has no delivery data API (nor has Web Push): only what Herald sent is known")
                && show.output.split(separator: "\n").contains { $0.hasPrefix("  \(scenario.today)") && $0.split(separator: " ").dropFirst().first == "12" },
                "\(show.output)")
        let apps = try scenario.herald(["projects", "set", "shop-ios", "--android-app", DeliveryScenario.shopApp])
        #expect(apps.status != 0 && apps.output.contains("is an APNs app; Apple has no delivery data API"), "\(apps.output)")
    }

    @Test func theLeaderFetchesOnceADayWhicheverProcessLeads() throws {
        var scenario = try DeliveryScenario()
        defer { scenario.close() }
        let c = scenario.stack.connection
        try scenario.enqueue(3, campaign: "a", label: "label-a", project: "shop")
        try scenario.send()
        _ = try ProjectRegistry.setAndroidApps(c, name: "shop", apps: [DeliveryScenario.shopApp], source: "test")
        // The drain's leader recorded both projects as without apps: due again only tomorrow.
        try c.query("DELETE FROM herald.delivery_data_fetches")

        // A pool's leader fetches by itself: news's refusal is one warning line, shop's data stored.
        var environment = scenario.stack.environment
        environment["HERALD_FCM_DATA_URL"] = scenario.stack.emulator.baseURL
        _ = try ProjectRegistry.setAndroidApps(c, name: "news", apps: [DeliveryScenario.newsApp], source: "test")
        let pool = try HeraldProcess(["work", "--processes", "1", "--poll-interval", "0.2"], environment: environment)
        try pool.start()
        defer { pool.signal(SIGTERM); _ = pool.wait(timeout: 60) }
        #expect(waitUntil(timeout: 60) { (try? c.query("SELECT count(*) FROM herald.delivery_data_fetches").int(0, 0)) == 2 }, "\(pool.output)")
        #expect(waitUntil(timeout: 10) { pool.output.contains("delivery data of project news skipped") }, "\(pool.output)")
        #expect(try c.query("SELECT messages_accepted FROM herald.delivery_data WHERE project = 'shop'")[0, 0] == "3")
        #expect(pool.output.contains("delivery data of project shop: 1 app, 1 page, 1 row stored"), "\(pool.output)")
        #expect(pool.output.components(separatedBy: "delivery data of project news").count == 2, "one line for news: \(pool.output)")
        pool.signal(SIGTERM)
        #expect(pool.wait(timeout: 60) == 0)

        // Another leader (this process) the same day: nothing is due, nothing asked.
        let asked = scenario.stack.emulator.deliveryData["list_requests"]?.intValue ?? 0
        let lines = LogLines()
        let log = Logger(level: .debug, format: .text, prefix: "test") { lines.append($0) }
        var settings = DeliveryDataSettings(baseURL: scenario.stack.emulator.baseURL)
        settings.caFile = scenario.stack.caFile
        settings.environment = ProcessInfo.processInfo.environment
        let task = DeliveryDataFetch(settings: settings, databaseURL: scenario.stack.database.url, log: log)
        _ = try task.runOnce(MaintenanceRun(connection: c))
        _ = try task.runOnce(MaintenanceRun(connection: c))
        #expect(scenario.stack.emulator.deliveryData["list_requests"]?.intValue == asked, "fetched today already")

        // A day later it is due again: fetched on the task's own thread, reported at the next run.
        try c.query("UPDATE herald.delivery_data_fetches SET attempted_at = attempted_at - interval '25 hours'")
        _ = try task.runOnce(MaintenanceRun(connection: c))
        #expect(waitUntil(timeout: 30) { (try? c.query("SELECT count(*) FROM herald.delivery_data_fetches WHERE attempted_at > now() - interval '1 hour'").int(0, 0)) == 2 })
        var counts: [String: Int] = [:]
        #expect(waitUntil(timeout: 30) {
            counts = (try? task.runOnce(MaintenanceRun(connection: c)).counts) ?? [:]
            return counts["delivery_data_fetched"] != nil
        })
        #expect(counts["delivery_data_fetched"] == 1 && counts["delivery_data_skipped"] == 1 && counts["delivery_data_rows"] == 1, "\(counts)")
        #expect(scenario.stack.emulator.deliveryData["list_requests"]?.intValue == asked + 1)
        #expect(lines.all.contains { $0.contains("delivery data of project shop: 1 app") })
    }

    @Test func aDaysHundredAndFirstLabelIsWarnedAboutBeforeTheCampaignStarts() throws {
        let scenario = try DeliveryScenario()
        defer { scenario.close() }
        let c = scenario.stack.connection
        try c.query("SELECT herald.create_campaign('c-' || g, analytics_label => 'label-' || g, project => 'shop') FROM generate_series(1, 100) AS g")
        // A busy morning: the hundred sent earlier today (as record_outcomes.sql counts a send).
        try c.query("INSERT INTO herald.campaign_days (campaign_id, day, sent) SELECT id, $1::date, 1000 FROM herald.campaigns", [.text(scenario.today)])
        // A label of its own for the pool's project, and a reused one for shop: neither is a 101st.
        try c.query("SELECT herald.create_campaign('elsewhere', analytics_label => 'label-elsewhere')")
        try c.query("SELECT herald.create_campaign('again', analytics_label => 'label-7', project => 'shop')")
        #expect(try c.query("SELECT count(*) FROM herald.campaign_label_budget WHERE NOT reported").int(0, 0) == 0)

        let psql = Process()
        psql.executableURL = URL(fileURLWithPath: "/usr/bin/psql")
        psql.arguments = [scenario.stack.database.url, "-X", "-q", "-v", "ON_ERROR_STOP=1", "-c",
                          "SELECT herald.create_campaign('one-too-many', analytics_label => 'label-101', project => 'shop')"]
        let pipe = Pipe()
        psql.standardOutput = pipe
        psql.standardError = pipe
        try psql.run()
        let said = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        psql.waitUntilExit()
        #expect(psql.terminationStatus == 0, "a warning, not a refusal: \(said)")
        #expect(said.contains("WARNING:  herald.create_campaign: campaign \"one-too-many\" uses analytics label \"label-101\", number 101 of the distinct labels of project shop today (\(scenario.today)")
                && said.contains("so these campaigns go unreported: one-too-many (label-101)"), "\(said)")
        let id = try #require(try c.query("SELECT id FROM herald.campaigns WHERE name = 'one-too-many'").int(0, 0))
        #expect(try c.query("SELECT state FROM herald.campaigns WHERE id = $1", [.int(id)])[0, 0] == "scheduled", "not started yet")
        let show = try scenario.herald(["campaigns", "show", String(id)])
        #expect(show.output.contains("WARNING: its label is number 101 of the 101 distinct analytics labels of its FCM project today (\(scenario.today)")
                && show.output.contains("the campaigns unreported today: one-too-many (label-101)"), "\(show.output)")
        let earlier = try scenario.herald(["campaigns", "show", String(try c.query("SELECT id FROM herald.campaigns WHERE name = 'c-100'").int(0, 0)!)])
        #expect(!earlier.output.contains("WARNING"), "the 100th label is reported: \(earlier.output)")

        // When it starts, the maintenance leader says so, once.
        try c.query(#"INSERT INTO herald.jobs (message, queue, campaign_id) VALUES ('{"token": "device-1", "notification": {"title": "Hi"}}', 'campaigns', $1)"#,
                    [.int(id)])
        let pool = try HeraldProcess(["work", "--processes", "1", "--poll-interval", "0.2", "--lease", "4"], environment: scenario.stack.environment)
        try pool.start()
        defer { pool.signal(SIGTERM); _ = pool.wait(timeout: 60) }
        let line = "campaign \(id) (one-too-many) "
        #expect(waitUntil(timeout: 60) { pool.output.contains(line) }, "\(pool.output)")
        #expect(pool.output.contains("its label is number 101 of the 101 distinct analytics labels of its FCM project today"), "\(pool.output)")
        pool.signal(SIGTERM)
        #expect(pool.wait(timeout: 60) == 0)
        let lines = LogLines()
        let task = DeliveryDataFetch(settings: DeliveryDataSettings(baseURL: scenario.stack.emulator.baseURL), databaseURL: scenario.stack.database.url,
                                     log: Logger(level: .info, format: .text, prefix: "test") { lines.append($0) })
        for _ in 1...3 { _ = try task.runOnce(MaintenanceRun(connection: c)) }
        #expect(lines.all.filter { $0.contains(line) }.count == 1, "one warning per campaign however many passes: \(lines.all)")
    }
}

/// Lines a test's logger wrote, from any thread.
final class LogLines: @unchecked Sendable {
    private let lock = NSLock()
    private var lines: [String] = []
    func append(_ line: String) { lock.lock(); lines.append(line); lock.unlock() }
    var all: [String] { lock.lock(); defer { lock.unlock() }; return lines }
}
