import FCM
import Foundation
import JSON
import Postgres
import Queue
import Testing
import TestSupport

/// APNs apps in the project registry (herald.projects, service 'apns') as an operator and an
/// application meet them: `herald apns` and the SQL functions against a real PostgreSQL, APNs
/// jobs checked when they are written (herald.enqueue, INSERT ... SELECT), the one rule file read
/// alike by Swift and SQL, and the FCM side (pools, --project, herald projects) not seeing apps.
@Suite struct APNsRegistryTests {
    static let token = String(repeating: "0a1b2c3d", count: 8)  // 64 hex digits

    static func folder() throws -> String {
        let path = NSTemporaryDirectory() + "herald-apns-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    /// A private key made by the openssl command: `algorithm` EC with `curve`, or RSA.
    static func makeKey(_ path: String, curve: String? = "P-256") throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        process.arguments = curve.map { ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:\($0)", "-out", path] }
            ?? ["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", path]
        process.standardError = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw TestFailure("openssl genpkey failed for \(path)") }
    }

    static func apns(_ arguments: [String], _ database: FreshDatabase, environment: [String: String] = [:]) throws -> (status: Int32?, output: String) {
        try HeraldProcess.run(["apns"] + arguments, environment: ["DATABASE_URL": database.url].merging(environment) { $1 }, timeout: 60)
    }

    /// The PEM body lines of a key file: any of them in a row or an output means the key leaked.
    static func keyLines(_ path: String) throws -> [String] {
        try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n").map(String.init).filter { !$0.hasPrefix("-----") && $0.count >= 20 }
    }

    /// Every text of herald.projects and herald.admin_log, as one text.
    static func storedText(_ c: PGConnection) throws -> String {
        let rows = try c.query("""
            SELECT coalesce(string_agg(row_to_json(p)::text, E'\\n'), '') FROM herald.projects p
            UNION ALL SELECT coalesce(string_agg(row_to_json(a)::text, E'\\n'), '') FROM herald.admin_log a
            """)
        return (0..<rows.rowCount).map { rows[$0, 0] ?? "" }.joined(separator: "\n")
    }

    /// The message of the error `body` throws ("" when it throws none).
    static func refusal(_ body: () throws -> Void) -> String {
        do { try body() } catch { return "\(error)" }
        return ""
    }

    static func alert(token: String = token, pushType: String = "alert", aps: String = #"{"alert": {"title": "Hi"}}"#) -> String {
        #"{"apns_token": "\#(token)", "apns": {"headers": {"apns-push-type": "\#(pushType)"}, "payload": {"aps": \#(aps)}}}"#
    }

    static func addApp(_ c: PGConnection, _ name: String, topic: String = "com.example.shop") throws {
        try c.query("SELECT herald.add_apns_app($1, $2, 'ABC123DEFG', 'DEF123GHIJ', $3)",
                    [.text(name), .text("/secrets/AuthKey_ABC123DEFG.p8"), .text(topic)])
    }

    @Test func addListShowTestPauseResumeRemoveFromTheShellStoringOnlyWhereTheKeyIs() throws {
        let database = try TestDatabase.fresh()
        defer { database.drop() }
        let keys = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: keys) }
        let keyPath = keys + "/AuthKey_ABC123DEFG.p8"
        try Self.makeKey(keyPath)

        let added = try Self.apns(["add", "shop-ios", "--key-file", keyPath, "--key-id", "ABC123DEFG", "--team-id", "DEF123GHIJ",
                                   "--topic", "com.example.shop", "--sandbox", "--max-rate", "300"], database)
        #expect(added.status == 0, "\(added.output)")
        #expect(added.output.contains("added APNs app shop-ios: topic com.example.shop, key ABC123DEFG of team DEF123GHIJ"), "\(added.output)")
        #expect(added.output.contains("sandbox (https://api.sandbox.push.apple.com)"), "\(added.output)")
        let pem = try String(contentsOfFile: keyPath, encoding: .utf8)
        let news = try Self.apns(["add", "news-ios", "--key-file", "env:HERALD_TEST_APNS_KEY", "--key-id", "XYZ987WVUT",
                                  "--team-id", "DEF123GHIJ", "--topic", "com.example.news"], database,
                                 environment: ["HERALD_TEST_APNS_KEY": pem])
        #expect(news.status == 0 && news.output.contains("production (https://api.push.apple.com)"), "\(news.output)")

        let table = try Self.apns(["list"], database)
        let lines = table.output.split(separator: "\n").map { $0.split(separator: " ", omittingEmptySubsequences: true).map(String.init) }
        #expect(lines.first == ["NAME", "TOPIC", "KEY", "ID", "TEAM", "ID", "KEY", "FILE", "ENVIRONMENT", "MAX", "RATE", "STATE"], "\(table.output)")
        #expect(lines.dropFirst().map(\.first) == ["news-ios", "shop-ios"], "by name: \(table.output)")
        #expect(lines.contains(["shop-ios", "com.example.shop", "ABC123DEFG", "DEF123GHIJ", keyPath, "sandbox", "300", "enabled"]), "\(table.output)")
        #expect(lines.contains(["news-ios", "com.example.news", "XYZ987WVUT", "DEF123GHIJ", "env:HERALD_TEST_APNS_KEY", "production", "-", "enabled"]),
                "\(table.output)")
        let json = try JSONValue.parse(try Self.apns(["show", "shop-ios", "--json"], database).output.trimmingCharacters(in: .whitespacesAndNewlines))
        #expect(json["key_file"]?.stringValue == keyPath && json["environment"]?.stringValue == "sandbox"
                && json["topic"]?.stringValue == "com.example.shop" && json["max_rate"]?.intValue == 300, "\(json)")

        let tested = try Self.apns(["test", "shop-ios"], database)
        #expect(tested.status == 0 && tested.output.contains("is a P-256 PKCS#8 key") && tested.output.contains("Apple was not contacted"), "\(tested.output)")

        let paused = try Self.apns(["pause", "shop-ios", "--reason", "rotating keys"], database)
        #expect(paused.status == 0 && paused.output.contains("paused APNs app shop-ios"), "\(paused.output)")
        let c = try database.connect()
        #expect(try c.query("SELECT state, paused_reason FROM herald.apns_apps WHERE name = 'shop-ios'")[0, 1] == "rotating keys")
        #expect(try Self.apns(["show", "shop-ios"], database).output.contains("rotating keys"))
        #expect(try Self.apns(["pause", "shop-ios"], database).output.contains("was paused already"))
        let resumed = try Self.apns(["resume", "shop-ios"], database)
        #expect(resumed.status == 0 && resumed.output.contains("resumed APNs app shop-ios"), "\(resumed.output)")
        #expect(try c.query("SELECT state FROM herald.apns_apps WHERE name = 'shop-ios'")[0, 0] == "enabled")

        // Neither the key's text nor any line of it is stored or printed.
        let stored = try Self.storedText(c)
        for line in try Self.keyLines(keyPath) {
            #expect(!stored.contains(line) && !table.output.contains(line) && !added.output.contains(line) && !news.output.contains(line))
        }
        #expect(stored.contains(keyPath), "where the key is, is stored")

        let removed = try Self.apns(["remove", "shop-ios"], database)
        #expect(removed.status == 0 && removed.output.contains("removed APNs app shop-ios"), "\(removed.output)")
        #expect(FileManager.default.fileExists(atPath: keyPath), "the key file is left where it is")
        #expect(try Self.apns(["remove", "news-ios"], database).status == 0)
        #expect(try Self.apns(["list"], database).output.contains("no APNs apps registered"))
        let actions = try c.query("SELECT string_agg(action, ',' ORDER BY id) FROM herald.admin_log WHERE source LIKE 'shell %'")[0, 0]
        #expect(actions == "add_apns_app,add_apns_app,pause_apns_app,resume_apns_app,remove_apns_app,remove_apns_app")
    }

    @Test func aKeyFileThatIsNotAP256PKCS8KeyIsRefusedNamingItAndNothingIsStored() throws {
        let database = try TestDatabase.fresh()
        defer { database.drop() }
        let keys = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: keys) }
        try Self.makeKey(keys + "/p384.p8", curve: "P-384")
        try Self.makeKey(keys + "/rsa.p8", curve: nil)
        try Self.makeKey(keys + "/AuthKey_ZZZ999YYYY.p8")
        try "not a key\n".write(toFile: keys + "/text.p8", atomically: true, encoding: .utf8)
        let good = ["--key-id", "ABC123DEFG", "--team-id", "DEF123GHIJ", "--topic", "com.example.shop"]

        func refused(_ arguments: [String], environment: [String: String] = [:], saying expected: [String]) throws {
            let run = try Self.apns(arguments, database, environment: environment)
            #expect(run.status == 2, "herald apns \(arguments.joined(separator: " ")): \(run.output)")
            for text in expected { #expect(run.output.contains(text), "says \(text): \(run.output)") }
        }
        try refused(["add", "shop-ios", "--key-file", keys + "/missing.p8"] + good, saying: [keys + "/missing.p8", "cannot be read"])
        try refused(["add", "shop-ios", "--key-file", keys + "/p384.p8"] + good, saying: [keys + "/p384.p8", "not P-256"])
        try refused(["add", "shop-ios", "--key-file", keys + "/rsa.p8"] + good, saying: [keys + "/rsa.p8", "not an elliptic-curve key"])
        try refused(["add", "shop-ios", "--key-file", keys + "/text.p8"] + good, saying: [keys + "/text.p8", "not a PEM PKCS#8 private key"])
        try refused(["add", "shop-ios", "--key-file", keys + "/AuthKey_ZZZ999YYYY.p8"] + good, saying: ["named for key ZZZ999YYYY", "--key-id ZZZ999YYYY"])
        try refused(["add", "shop-ios", "--key-file", "AuthKey.p8"] + good, saying: ["not an absolute path"])
        try refused(["add", "shop-ios", "--key-file", "env:HERALD_TEST_UNSET_P8"] + good, saying: ["HERALD_TEST_UNSET_P8", "not set"])
        try refused(["add", "shop-ios", "--key-file", keys + "/p384.p8"], saying: ["--key-id", "--team-id", "--topic"])
        let pasted = try String(contentsOfFile: keys + "/p384.p8", encoding: .utf8)
        let run = try Self.apns(["add", "shop-ios", "--key-file", pasted] + good, database)
        #expect(run.status == 2 && run.output.contains("looks like a key itself"), "\(run.output)")
        for line in try Self.keyLines(keys + "/p384.p8") { #expect(!run.output.contains(line), "the pasted key is not repeated") }
        // A good key with values of the wrong shape: the SQL function's words, naming the value.
        try Self.makeKey(keys + "/AuthKey_ABC123DEFG.p8")
        try refused(["add", "shop-ios", "--key-file", keys + "/AuthKey_ABC123DEFG.p8", "--key-id", "ABC123DEFG", "--team-id", "team",
                     "--topic", "com.example.shop"], saying: ["team_id \"team\" is not an Apple team id"])
        for action in ["show", "test", "pause", "resume", "remove"] {
            try refused([action, "nope"], saying: ["no APNs app named \"nope\"", "herald apns list"])
        }
        let c = try database.connect()
        #expect(try c.query("SELECT count(*) FROM herald.projects")[0, 0] == "0")
        #expect(try Self.storedText(c).isEmpty || !(try Self.storedText(c).contains("BEGIN")))
    }

    @Test func theSQLFunctionsRefuseBadValuesInWordsAndNeverStoreAKey() throws {
        let database = try TestDatabase.fresh()
        defer { database.drop() }
        let c = try database.connect()
        try Self.addApp(c, "shop-ios")
        #expect(try c.query("SELECT key_file, key_id, team_id, topic, sandbox, state FROM herald.apns_apps")[0, 3] == "com.example.shop")
        #expect(try c.query("SELECT service, fcm_project_id IS NULL FROM herald.project_registry WHERE name = 'shop-ios'")[0, 0] == "apns")

        func refused(_ sql: String, _ parameters: [PGValue?], saying expected: String) {
            let message = Self.refusal { try c.query(sql, parameters) }
            #expect(message.contains(expected), "\(sql): \(message)")
        }
        let add = "SELECT herald.add_apns_app($1, $2, $3, $4, $5)"
        refused(add, [.text("shop-ios"), .text("/k.p8"), .text("ABC123DEFG"), .text("DEF123GHIJ"), .text("com.x")],
                saying: "an APNs app named \"shop-ios\" is registered already")
        try c.query("SELECT herald.add_project('shop', 'shop-prod-1', '/k.json')")
        refused(add, [.text("shop"), .text("/k.p8"), .text("ABC123DEFG"), .text("DEF123GHIJ"), .text("com.x")],
                saying: "an FCM project named \"shop\" is registered already")
        refused(add, [.text("Shop iOS"), .text("/k.p8"), .text("ABC123DEFG"), .text("DEF123GHIJ"), .text("com.x")], saying: "not a short slug")
        refused(add, [.text("a"), .text("/k.p8"), .text("abc"), .text("DEF123GHIJ"), .text("com.x")], saying: "key_id \"abc\" is not an APNs key id")
        refused(add, [.text("a"), .text("/k.p8"), .text("ABC123DEFG"), .text("DEF123GHIJ"), .text("com example")], saying: "topic \"com example\" is not a bundle id")
        refused(add, [.text("a"), .text("/k.p8"), nil, .text("DEF123GHIJ"), .text("com.x")], saying: "got null for key_id")
        let pasted = "-----BEGIN PRIVATE KEY-----\nMIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg\n-----END PRIVATE KEY-----"
        let message = Self.refusal { try c.query(add, [.text("a"), .text(pasted), .text("ABC123DEFG"), .text("DEF123GHIJ"), .text("com.x")]) }
        #expect(message.contains("never hold the key") && !message.contains("MIGHAgEA"), "\(message)")
        // Even a hand-written INSERT cannot store a key (PostgreSQL's own DETAIL line shows the
        // refused row to the session that wrote it; the database keeps nothing), nor an app
        // without its fields.
        do {
            try c.query("INSERT INTO herald.projects (name, service, credentials, apns_key_id, apns_team_id, apns_topic, apns_sandbox) VALUES ('b', 'apns', $1, 'ABC123DEFG', 'DEF123GHIJ', 'com.x', false)", [.text(pasted)])
            Issue.record("a key was accepted as credentials")
        } catch {
            #expect(error.sqlState == "23514" && (error.serverMessage ?? "").contains("projects_credentials_reference"), "\(error)")
        }
        #expect(Self.refusal { try c.query("INSERT INTO herald.projects (name, service, credentials) VALUES ('b', 'apns', '/k.p8')") }
            .contains("projects_service_fields"))
        #expect(try c.query("SELECT count(*) FROM herald.projects WHERE credentials LIKE '%BEGIN%'")[0, 0] == "0")

        // Pause, resume and remove are the registry's own functions; remove waits for pending jobs.
        try c.query("SELECT herald.pause_project_sending('shop-ios', 'maintenance')")
        #expect(try c.query("SELECT state FROM herald.apns_apps")[0, 0] == "paused")
        try c.query("SELECT herald.resume_project_sending('shop-ios')")
        #expect(try c.query("SELECT state FROM herald.apns_apps")[0, 0] == "enabled")
        try c.query("SELECT herald.enqueue($1::jsonb, apns_app => 'shop-ios')", [.text(Self.alert())])
        #expect(Self.refusal { try c.query("SELECT herald.remove_project('shop-ios')") }.contains("has 1 pending jobs"))
        try c.query("DELETE FROM herald.jobs")
        try c.query("SELECT herald.remove_project('shop-ios')")
        #expect(try c.query("SELECT count(*) FROM herald.apns_apps")[0, 0] == "0")
    }

    @Test func keylessPoolsAndProjectsListSeeFCMProjectsOnlyAndProjectChecksAnAppsKey() throws {
        let database = try TestDatabase.fresh()
        defer { database.drop() }
        let c = try database.connect()
        try Self.addApp(c, "shop-ios")
        // A pool without a key of its own works the registry's entries: an APNs-only deployment
        // starts without FCM credentials, its start-up line carrying the app (never "none yet"),
        // and no worker reads the .p8 key as a service account (the app is not paused).
        let alone = try HeraldProcess.run(["work", "--drain", "--processes", "1", "--database-url", database.url], environment: [:], timeout: 60)
        #expect(alone.status == 0 && alone.output.contains("APNs app shop-ios") && !alone.output.contains("none yet"), "\(alone.output)")
        #expect(alone.output.contains("APNs jobs to each app's own (https://api.push.apple.com"), "names APNs's endpoint: \(alone.output)")
        #expect(try c.query("SELECT paused_reason IS NULL FROM herald.projects WHERE name = 'shop-ios'")[0, 0] == "t")
        try c.query("SELECT herald.add_project('shop', 'shop-prod-1', '/k.json')")
        // What a pool's supervisor and its registry poll read, and herald projects list/show.
        #expect(try ProjectRegistry.list(c).map(\.name) == ["shop"])
        #expect(try ProjectRegistry.entry(c, name: "shop-ios") == nil)
        #expect(try APNsApps.list(c).map(\.name) == ["shop-ios"])
        let load = Self.refusal { _ = try Project.load(c, name: "shop-ios") }
        #expect(load.contains("\"shop-ios\" is an APNs app, not an FCM project"), "\(load)")
        // The overview (herald stats, the dashboard) shows both, by name.
        #expect(try ProjectOverview.read(c).map(\.name) == [nil, "shop", "shop-ios"])
        let listed = try HeraldProcess.run(["projects", "list"], environment: ["DATABASE_URL": database.url], timeout: 60)
        #expect(listed.status == 0 && listed.output.contains("shop") && !listed.output.contains("shop-ios"), "\(listed.output)")
        // `--project APP` works the app; its key is checked at start, as a project's is: one
        // that cannot be read stops start-up naming the file, and pauses nothing.
        let work = try HeraldProcess.run(["work", "--project", "shop-ios", "--database-url", database.url], environment: [:], timeout: 60)
        #expect(work.status == 2 && work.output.contains("--project shop-ios (APNs app): key file /secrets/AuthKey_ABC123DEFG.p8 cannot be read"),
                "\(work.output)")
        #expect(try c.query("SELECT paused_reason IS NULL FROM herald.projects WHERE name = 'shop-ios'")[0, 0] == "t")
        let pause = try HeraldProcess.run(["apns", "pause", "shop"], environment: ["DATABASE_URL": database.url], timeout: 60)
        #expect(pause.status == 2 && pause.output.contains("\"shop\" is an FCM project, not an APNs app"), "\(pause.output)")
        #expect(try c.query("SELECT paused_reason IS NULL FROM herald.projects WHERE name = 'shop'")[0, 0] == "t")
    }

    @Test func enqueueAddressesAnAppAndRefusesOneNobodyRegistered() throws {
        let database = try TestDatabase.fresh()
        defer { database.drop() }
        let c = try database.connect()
        let enqueue = "SELECT herald.enqueue($1::jsonb, apns_app => $2)"
        // No app at all: refused, saying how to register one.
        #expect(Self.refusal { try c.query("SELECT herald.enqueue($1::jsonb)", [.text(Self.alert())]) }
            .contains("none is registered"))
        try Self.addApp(c, "shop-ios")
        // One app: it is the default.
        let id = try #require(try c.query("SELECT herald.enqueue($1::jsonb)", [.text(Self.alert())]).int(0, 0))
        #expect(try c.query("SELECT project FROM herald.jobs WHERE id = $1", [.int(id)])[0, 0] == "shop-ios")
        let named = try #require(try c.query(enqueue, [.text(Self.alert()), .text("shop-ios")]).int(0, 0))
        #expect(try c.query("SELECT project FROM herald.jobs WHERE id = $1", [.int(named)])[0, 0] == "shop-ios")
        // An app nobody registered, named.
        let unknown = Self.refusal { try c.query(enqueue, [.text(Self.alert()), .text("shop-ipad")]) }
        #expect(unknown.contains("apns_app \"shop-ipad\": no APNs app of that name is registered"), "\(unknown)")
        // Two apps: the app must be named.
        try Self.addApp(c, "news-ios", topic: "com.example.news")
        let several = Self.refusal { try c.query("SELECT herald.enqueue($1::jsonb)", [.text(Self.alert())]) }
        #expect(several.contains("must name its app when several are registered (news-ios, shop-ios)"), "\(several)")
        // Services do not mix: an FCM message for an app, an APNs message for an FCM project.
        try c.query("SELECT herald.add_project('shop', 'shop-prod-1', '/k.json')")
        #expect(Self.refusal { try c.query(enqueue, [.text(#"{"token": "t1", "notification": {"title": "x"}}"#), .text("shop-ios")]) }
            .contains("is for an APNs message (with apns_token), and this message has none"))
        #expect(Self.refusal { try c.query("SELECT herald.enqueue($1::jsonb, project => 'shop-ios')", [.text(#"{"token": "t1"}"#)]) }
            .contains("\"shop-ios\" is an APNs app; its jobs are APNs messages"))
        #expect(Self.refusal { try c.query("SELECT herald.enqueue($1::jsonb, project => 'shop')", [.text(Self.alert())]) }
            .contains("\"shop\" is an FCM project, not an APNs app"))
        #expect(Self.refusal { try c.query(enqueue, [.text(Self.alert()), .text("shop")]) }.contains("no APNs app of that name"))
        // FCM jobs are untouched.
        try c.query("SELECT herald.enqueue($1::jsonb, project => 'shop')", [.text(#"{"token": "t1", "notification": {"title": "x"}}"#)])
        try c.query("SELECT herald.enqueue($1::jsonb)", [.text(#"{"token": "t2"}"#)])
        #expect(try c.query("SELECT count(*) FROM herald.jobs")[0, 0] == "4")
    }

    @Test func anINSERTSelectIsCheckedAsEnqueueIs() throws {
        let database = try TestDatabase.fresh()
        defer { database.drop() }
        let c = try database.connect()
        try Self.addApp(c, "shop-ios")
        try c.query("""
            INSERT INTO herald.jobs (message)
            SELECT jsonb_build_object('apns_token', repeat(to_hex(i), 64), 'apns',
                                      jsonb_build_object('payload', jsonb_build_object('aps', jsonb_build_object('alert', 'n' || i))))
            FROM generate_series(10, 14) AS i
            """)
        #expect(try c.query("SELECT count(*) FILTER (WHERE project = 'shop-ios'), count(*) FROM herald.jobs")[0, 0] == "5")
        // One bad row refuses the statement, naming the field; nothing of it is inserted.
        let bad = Self.refusal {
            try c.query("""
                INSERT INTO herald.jobs (message)
                SELECT jsonb_build_object('apns_token', CASE WHEN i = 3 THEN 'xyz' ELSE repeat('ab', 32) END, 'apns',
                                          jsonb_build_object('payload', jsonb_build_object('aps', jsonb_build_object('alert', 'hi'))))
                FROM generate_series(1, 5) AS i
                """)
        }
        #expect(bad.contains("message.apns_token: must be an even number of hex digits (0-9, a-f), 64 to 200"), "\(bad)")
        let unknown = Self.refusal {
            try c.query("INSERT INTO herald.jobs (message, project) VALUES ($1::jsonb, 'shop-ipad')", [.text(Self.alert())])
        }
        #expect(unknown.contains("no APNs app named \"shop-ipad\""), "\(unknown)")
        #expect(try c.query("SELECT count(*) FROM herald.jobs")[0, 0] == "5")
        // An UPDATE of the message is checked too.
        #expect(Self.refusal { try c.query("UPDATE herald.jobs SET message = message - 'apns'") }.contains("message.apns: required"))
    }

    /// Each rule refuses at enqueue naming its field.
    @Test(arguments: [
        (#"["apns_token"]"#, "message: expected an object, got array"),
        (#"{"apns_token": "\#(token)", "token": "fcm-token", "apns": {"payload": {"aps": {}}}}"#, "message.token: an APNs message (with apns_token) is sent to Apple directly"),
        (#"{"apns_token": 42, "apns": {"payload": {"aps": {}}}}"#, "message.apns_token: expected a string of hex digits, got number"),
        (#"{"apns_token": "abc", "apns": {"payload": {"aps": {}}}}"#, "message.apns_token: must be an even number of hex digits (0-9, a-f), 64 to 200, and nothing else (the device token's bytes, two digits each); got 3 characters"),
        (#"{"apns_token": "\#(String(repeating: "g", count: 64))", "apns": {"payload": {"aps": {}}}}"#, "message.apns_token: must be an even number of hex digits"),
        // What the worker could not put in a request's path is refused here, not dead-lettered there.
        (#"{"apns_token": "\#(String(repeating: "a", count: 65))", "apns": {"payload": {"aps": {}}}}"#, "message.apns_token: must be an even number of hex digits (0-9, a-f), 64 to 200, and nothing else (the device token's bytes, two digits each); got 65 characters"),
        (#"{"apns_token": "\#(String(repeating: "a", count: 202))", "apns": {"payload": {"aps": {}}}}"#, "message.apns_token: must be an even number of hex digits (0-9, a-f), 64 to 200, and nothing else (the device token's bytes, two digits each); got 202 characters"),
        (#"{"apns_token": "\#(token)"}"#, "message.apns: required: an object with payload (and headers)"),
        (#"{"apns_token": "\#(token)", "apns": {"payload": {"aps": {}}, "fcm_options": {}}}"#, "message.apns.fcm_options: not a field of an APNs message's apns block; give headers, payload"),
        (#"{"apns_token": "\#(token)", "apns": {"headers": {"apns-expiration": 0}, "payload": {"aps": {}}}}"#, "message.apns.headers.apns-expiration: expected a string, got number"),
        (alert(pushType: "banner"), #"message.apns.headers.apns-push-type: "banner" is not a push type Herald knows; give one of alert, background, location, voip, complication, liveactivity"#),
        (alert(pushType: "mdm"), #"message.apns.headers.apns-push-type: Herald does not send push type "mdm" yet: it needs certificate-based authentication, and Herald connects with provider tokens; give one of alert, background"#),
        (alert(pushType: "fileprovider"), #"message.apns.headers.apns-push-type: Herald does not send push type "fileprovider" yet: its apns-topic suffix is not yet checked"#),
        (alert(pushType: "pushtotalk"), #"message.apns.headers.apns-push-type: Herald does not send push type "pushtotalk" yet: its apns-topic suffix is not yet checked"#),
        (#"{"apns_token": "\#(token)", "apns": {"headers": {"x-custom": "1"}, "payload": {"aps": {}}}}"#,
         "message.apns.headers.x-custom: not a header a message sets (Herald sets apns-topic and the rest); give apns-push-type, apns-priority, apns-expiration, apns-collapse-id, apns-id"),
        (#"{"apns_token": "\#(token)", "apns": {"headers": {"apns-topic": "com.example.shop"}, "payload": {"aps": {}}}}"#, "message.apns.headers.apns-topic: not a header a message sets"),
        (#"{"apns_token": "\#(token)", "apns": {"headers": {"apns-id": "job-7"}, "payload": {"aps": {}}}}"#,
         #"message.apns.headers.apns-id: expected a UUID such as 123e4567-e89b-12d3-a456-426614174000, or leave it out; got "job-7""#),
        (#"{"apns_token": "\#(token)", "apns": {"headers": {"apns-expiration": "-1"}, "payload": {"aps": {}}}}"#,
         #"message.apns.headers.apns-expiration: expected whole seconds since 1970 (0: deliver now or never), 1 to 18 digits; got "-1""#),
        (#"{"apns_token": "\#(token)", "apns": {"headers": {"apns-collapse-id": "\#(String(repeating: "é", count: 33))"}, "payload": {"aps": {}}}}"#,
         "message.apns.headers.apns-collapse-id: must be 1 to 64 bytes; got 66"),
        (#"{"apns_token": "\#(token)", "apns": {"headers": {"apns-priority": "7"}, "payload": {"aps": {}}}}"#, #"message.apns.headers.apns-priority: "7" is not one of 1, 5, 10"#),
        (#"{"apns_token": "\#(token)", "apns": {"headers": {"apns-push-type": "background", "apns-priority": "10"}, "payload": {"aps": {"content-available": 1}}}}"#,
         #"message.apns.headers.apns-priority: "10" is not allowed for push type background; give one of 1, 5"#),
        (#"{"apns_token": "\#(token)", "apns": {"headers": {}}}"#, "message.apns.payload: required: an object with aps"),
        (#"{"apns_token": "\#(token)", "apns": {"payload": {"data": 1}}}"#, "message.apns.payload.aps: required"),
        (#"{"apns_token": "\#(token)", "apns": {"payload": {"aps": "hi"}}}"#, "message.apns.payload.aps: expected an object, got string"),
        (alert(pushType: "liveactivity", aps: #"{"content-state": {}}"#), "message.apns.payload.aps.event: required for push type liveactivity"),
        (alert(pushType: "liveactivity", aps: #"{"event": "update"}"#), "message.apns.payload.aps.timestamp: required for push type liveactivity"),
        (alert(pushType: "liveactivity", aps: #"{"event": "pause", "timestamp": 1700000000}"#), #"message.apns.payload.aps.event: "pause" is not one of start, update, end"#),
        (alert(pushType: "liveactivity", aps: #"{"event": "end", "timestamp": 1.5}"#), "message.apns.payload.aps.timestamp: expected a whole number, got number"),
        (alert(aps: #"{"alert": "\#(String(repeating: "x", count: 4077))"}"#), "message.apns.payload: 4097 bytes as JSON, over APNs' limit of 4096 bytes for push type alert"),
        (alert(pushType: "voip", aps: #"{"alert": "\#(String(repeating: "x", count: 5101))"}"#), "message.apns.payload: 5121 bytes as JSON, over APNs' limit of 5120 bytes for push type voip"),
    ])
    func eachRuleRefusesAtEnqueueNamingTheField(message: String, expected: String) throws {
        let database = try TestDatabase.fresh()
        defer { database.drop() }
        let c = try database.connect()
        try Self.addApp(c, "shop-ios")
        let refused = Self.refusal { try c.query("SELECT herald.enqueue($1::jsonb, apns_app => 'shop-ios')", [.text(message)]) }
        #expect(refused.contains(expected), "\(refused)")
        #expect(try c.query("SELECT count(*) FROM herald.jobs")[0, 0] == "0")
        // The Swift rules a worker checks a claimed job with say the same.
        let issues = APNsMessageRules.standard.validate(try JSONValue.parse(message)).map(\.description)
        #expect(issues.contains { $0.hasPrefix(expected) || $0.contains(expected) }, "\(issues)")
    }

    /// What may be sent is taken: at the limits, each push type, Live Activities whole.
    @Test func messagesAtTheLimitsAreTaken() throws {
        let database = try TestDatabase.fresh()
        defer { database.drop() }
        let c = try database.connect()
        try Self.addApp(c, "shop-ios")
        var accepted = [
            Self.alert(aps: #"{"alert": "\#(String(repeating: "x", count: 4076))"}"#),
            Self.alert(pushType: "voip", aps: #"{"alert": "\#(String(repeating: "x", count: 5100))"}"#),
            Self.alert(pushType: "liveactivity", aps: #"{"event": "update", "timestamp": 1700000000, "content-state": {"eta": 5}}"#),
            #"{"apns_token": "\#(String(repeating: "AB", count: 50))", "apns": {"payload": {"aps": {"badge": 1}}}}"#,
            #"{"apns_token": "\#(Self.token)", "apns": {"headers": {"apns-push-type": "background", "apns-priority": "5"}, "payload": {"aps": {"content-available": 1}}}}"#,
            #"{"apns_token": "\#(Self.token)", "apns": {"headers": {"apns-id": "123E4567-E89B-12D3-A456-426614174000", "apns-expiration": "\#(String(repeating: "9", count: 18))", "apns-collapse-id": "\#(String(repeating: "é", count: 32))", "apns-priority": "1"}, "payload": {"aps": {}}}}"#,
            #"{"apns_token": "\#(Self.token)", "apns": {"headers": {"apns-expiration": "0", "apns-collapse-id": "c"}, "payload": {"aps": {}}}}"#,
        ]
        for name in APNsMessageRules.standard.pushTypes.map(\.name) where name != "liveactivity" {
            accepted.append(Self.alert(pushType: name))
        }
        for message in accepted {
            #expect(Self.refusal { try c.query("SELECT herald.enqueue($1::jsonb)", [.text(message)]) } == "", "\(message.prefix(200))")
            #expect(APNsMessageRules.standard.validate(try JSONValue.parse(message)).isEmpty, "\(message.prefix(200))")
        }
    }

    /// A message a thousand times too large is refused by the door's byte count (SQLSTATE
    /// 54000), as an FCM message is, not walked for the APNs rules first; nothing is stored.
    @Test func aMessageFarOverTheDoorIsRefusedByItsSize() throws {
        let database = try TestDatabase.fresh()
        defer { database.drop() }
        let c = try database.connect()
        try Self.addApp(c, "shop-ios")
        let huge = Self.alert(aps: #"{"alert": "\#(String(repeating: "x", count: 4_000_000))"}"#)
        let refused = Self.refusal { try c.query("SELECT herald.enqueue($1::jsonb)", [.text(huge)]) }
        #expect(refused.contains("over the limit of 32768 bytes for a send job"), "\(refused.prefix(300))")
        #expect(try c.query("SELECT count(*) FROM herald.jobs").int(0, 0) == 0)
    }

    /// Swift's rules and herald.validate_apns_message give the same issues, in the same order
    /// and words, over a table of cases (several issues at once, escapes and multi-byte text in
    /// measured payloads, odd member names, values cut for display).
    @Test func swiftAndSQLAgreeOnATableOfCases() throws {
        let database = try TestDatabase.fresh()
        defer { database.drop() }
        let c = try database.connect()
        let long = String(repeating: "é", count: 70)
        let cases: [String] = [
            Self.alert(),
            "null", "\"text\"", "42", "{}",
            #"{"apns_token": "\#(Self.token)", "topic": "news", "condition": "'a' in topics", "fid": null, "apns": {"payload": {"aps": {}}}}"#,
            #"{"apns_token": "zz", "apns": {"z-field": 1, "a field": 2, "headers": [], "payload": []}}"#,
            #"{"apns_token": "\#(Self.token)", "apns": {"headers": {"apns-push-type": "\#(long)", "apns-priority": 10, "x\"y": true}, "payload": {"aps": {"event": 3, "timestamp": "now"}}}}"#,
            #"{"apns_token": "\#(Self.token)", "apns": {"headers": {"apns-push-type": null, "apns-priority": "1"}, "payload": {"aps": null}}}"#,
            #"{"apns_token": "\#(Self.token)", "apns": {"headers": {"apns-push-type": 5}, "payload": {"aps": {}}}}"#,
            Self.alert(pushType: "liveactivity", aps: #"{"event": "\#(long)"}"#),
            Self.alert(pushType: "liveactivity", aps: #"{"event": "start", "timestamp": -3, "attributes": {"n": [1, 2.5, true, false, null, {"k": "v"}]}}"#),
            Self.alert(aps: #"{"alert": "é\n\"\\\t\u0008\u000c\u0001 \#(String(repeating: "y", count: 4060))", "list": [1, [2, []], {}], "n": {"a": {"b": null}}}"#),
            Self.alert(pushType: "voip", aps: #"{"alert": {"title": "\#(String(repeating: "€", count: 1700))", "loc-args": ["a", "b"]}}"#),
            Self.alert(pushType: "background", aps: #"{"content-available": 1, "\u0008key\u000c": "\#(String(repeating: "z", count: 4080))"}"#),
            // Headers: unknown names (one null, not judged), bounds, and push types not sent yet.
            #"{"apns_token": "\#(Self.token)", "apns": {"headers": {"x-custom": 1, "apns-topic": "a.b", "z": null, "apns-id": "\#(long)", "apns-expiration": "12a", "apns-collapse-id": "", "apns-push-type": "mdm"}, "payload": {"aps": {}}}}"#,
            #"{"apns_token": "\#(Self.token)", "apns": {"headers": {"apns-expiration": "\#(String(repeating: "1", count: 19))", "apns-collapse-id": "\#(String(repeating: "é", count: 33))", "apns-push-type": "fileprovider", "apns-priority": "7"}, "payload": {"aps": {}}}}"#,
            #"{"apns_token": "\#(Self.token)", "apns": {"headers": {"apns-id": "123e4567-e89b-12d3-a456-42661417400g", "apns-push-type": "widgets"}, "payload": {"aps": {}}}}"#,
            #"{"apns_token": "\#(Self.token)", "apns": {"headers": {"apns-id": "123E4567-E89B-12D3-A456-426614174000", "apns-expiration": "0", "apns-collapse-id": "\#(String(repeating: "é", count: 32))", "apns-push-type": "background", "apns-priority": "1"}, "payload": {"aps": {"content-available": 1}}}}"#,
        ]
        var refused = 0
        for text in cases {
            let swift = APNsMessageRules.standard.validate(try JSONValue.parse(text)).map(\.description)
            if !swift.isEmpty { refused += 1 }
            let rows = try c.query("SELECT i FROM unnest(herald.validate_apns_message($1::jsonb)) WITH ORDINALITY AS u(i, o) ORDER BY o", [.text(text)])
            let sql = (0..<rows.rowCount).map { rows[$0, 0] ?? "" }
            #expect(swift == sql, "\(text.prefix(120)):\nswift \(swift)\nsql   \(sql)")
        }
        // Three cases may be sent (the first, the Live Activity start, the background push with
        // every header at its bounds); every other is refused.
        #expect(refused == cases.count - 3)
        // The rules the database holds are the binary's, loaded by herald migrate.
        let stored = try JSONValue.parse(try #require(try c.query("SELECT definition::text FROM herald.apns_rules")[0, 0]))
        #expect(stored == (try JSONValue.parse(APNsMessageRules.json)))
    }
}
