import Crypto
import Emulator
import Foundation
import JSON
import Postgres
import Testing
import TestSupport

/// The project registry (herald.projects, issue 18's first part) as an operator meets it: the
/// `herald projects` command against a real PostgreSQL and the emulator, and the SQL functions.
/// Only where a key is may reach the database or the output, never the key.
@Suite struct ProjectRegistryTests {
    /// A folder for key files, removed by the caller.
    static func folder() throws -> String {
        let path = NSTemporaryDirectory() + "herald-projects-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    static func write(_ text: String, to path: String) throws {
        try text.write(toFile: path, atomically: true, encoding: .utf8)
    }

    /// `herald projects ARGS` against `database`, with `environment` added.
    static func projects(_ arguments: [String], _ database: FreshDatabase, environment: [String: String] = [:]) throws -> (status: Int32?, output: String) {
        try HeraldProcess.run(["projects"] + arguments, environment: ["DATABASE_URL": database.url].merging(environment) { $1 }, timeout: 60)
    }

    /// The lines of a PEM key's body: any of them in an output or a row means the key leaked.
    static func keyLines(_ json: String) throws -> [String] {
        let pem = try #require(try JSONValue.parse(json)["private_key"]?.stringValue)
        let lines = pem.split(separator: "\n").map(String.init).filter { !$0.hasPrefix("-----") && $0.count >= 40 }
        #expect(lines.count > 10, "a 2048-bit key has many body lines")
        return lines
    }

    /// Every text column of every row of herald.projects and herald.admin_log, as one text.
    static func storedText(_ c: PGConnection) throws -> String {
        let rows = try c.query("""
            SELECT coalesce(string_agg(row_to_json(p)::text, E'\\n'), '') FROM herald.projects p
            UNION ALL SELECT coalesce(string_agg(row_to_json(a)::text, E'\\n'), '') FROM herald.admin_log a
            """)
        return (0..<rows.rowCount).map { rows[$0, 0] ?? "" }.joined(separator: "\n")
    }

    @Test func addListShowPauseResumeRemoveFromTheShell() throws {
        let database = try TestDatabase.fresh()
        defer { database.drop() }
        let emulator = try startEmulator()
        defer { emulator.stop() }
        let keys = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: keys) }
        try emulator.writeServiceAccount(to: keys + "/shop.json", projectID: "shop-prod-1234")
        let envKey = try emulator.serviceAccountJSON(projectID: "news-prod-77")

        let added = try Self.projects(["add", "shop", "--credentials", keys + "/shop.json", "--max-rate", "250"], database)
        #expect(added.status == 0, "\(added.output)")
        #expect(added.output.contains("added project shop: FCM project shop-prod-1234"), "\(added.output)")
        #expect(added.output.contains("herald work --project shop"), "\(added.output)")
        let fromEnv = try Self.projects(["add", "news", "--credentials", "env:HERALD_TEST_NEWS_KEY"], database,
                                        environment: ["HERALD_TEST_NEWS_KEY": envKey])
        #expect(fromEnv.status == 0, "\(fromEnv.output)")

        // list: one row per project, column by column.
        let table = try Self.projects(["list"], database)
        #expect(table.status == 0, "\(table.output)")
        let lines = table.output.split(separator: "\n").map { $0.split(separator: " ", omittingEmptySubsequences: true).map(String.init) }
        #expect(lines.first == ["NAME", "FCM", "PROJECT", "CREDENTIALS", "MAX", "RATE", "STATE"], "\(table.output)")
        #expect(lines.dropFirst().map(\.first) == ["news", "shop"], "by name: \(table.output)")
        #expect(lines.contains(["shop", "shop-prod-1234", keys + "/shop.json", "250", "enabled"]), "\(table.output)")
        #expect(lines.contains(["news", "news-prod-77", "env:HERALD_TEST_NEWS_KEY", "-", "enabled"]), "\(table.output)")
        let json = try JSONValue.parse(try Self.projects(["list", "--json"], database).output.trimmingCharacters(in: .whitespacesAndNewlines))
        let shop = try #require(json.arrayValue?.first { $0["name"]?.stringValue == "shop" })
        #expect(shop["fcm_project_id"]?.stringValue == "shop-prod-1234" && shop["max_rate"]?.intValue == 250
                && shop["state"]?.stringValue == "enabled" && shop["credentials"]?.stringValue == keys + "/shop.json", "\(shop)")

        // pause with a reason, seen by list, show and SQL; twice is no change.
        let paused = try Self.projects(["pause", "shop", "--reason", "rotating keys"], database)
        #expect(paused.status == 0 && paused.output.contains("paused project shop"), "\(paused.output)")
        #expect(try Self.projects(["list"], database).output.contains("paused (operator: rotating keys)"))
        let shown = try Self.projects(["show", "shop"], database)
        #expect(shown.status == 0 && shown.output.contains("state:") && shown.output.contains("paused") && shown.output.contains("rotating keys"), "\(shown.output)")
        let c = try database.connect()
        #expect(try c.query("SELECT state, paused_reason FROM herald.project_registry WHERE name = 'shop'")[0, 1] == "rotating keys")
        #expect(try Self.projects(["pause", "shop"], database).output.contains("was paused already"))
        let showJSON = try JSONValue.parse(try Self.projects(["show", "shop", "--json"], database).output.trimmingCharacters(in: .whitespacesAndNewlines))
        #expect(showJSON["state"]?.stringValue == "paused" && showJSON["paused_reason"]?.stringValue == "rotating keys", "\(showJSON)")

        let resumed = try Self.projects(["resume", "shop"], database)
        #expect(resumed.status == 0 && resumed.output.contains("resumed project shop"), "\(resumed.output)")
        #expect(try c.query("SELECT state FROM herald.project_registry WHERE name = 'shop'")[0, 0] == "enabled")
        #expect(try Self.projects(["resume", "shop"], database).output.contains("was not paused"))

        // update: another key (read and checked; its FCM project becomes the entry's), the rate
        // back to the pool's; nothing given is refused naming what may be.
        try emulator.writeServiceAccount(to: keys + "/shop-new.json", projectID: "shop-prod-5678")
        let updated = try Self.projects(["update", "shop", "--credentials", keys + "/shop-new.json", "--max-rate", "none"], database)
        #expect(updated.status == 0 && updated.output.contains("credentials \(keys)/shop.json -> \(keys)/shop-new.json")
                && updated.output.contains("FCM project shop-prod-1234 -> shop-prod-5678") && updated.output.contains("max rate 250 -> the pool's"),
                "\(updated.output)")
        #expect(try c.query("SELECT fcm_project_id, credentials, max_rate IS NULL FROM herald.project_registry WHERE name = 'shop'")[0, 0] == "shop-prod-5678")
        let nothing = try Self.projects(["update", "shop"], database)
        #expect(nothing.status == 2 && nothing.output.contains("--credentials") && nothing.output.contains("--max-rate"), "\(nothing.output)")
        let missing = try Self.projects(["update", "shop", "--credentials", keys + "/gone.json"], database)
        #expect(missing.status == 2 && missing.output.contains("gone.json"), "a key that cannot be read changes nothing: \(missing.output)")
        #expect(try c.query("SELECT credentials FROM herald.project_registry WHERE name = 'shop'")[0, 0] == keys + "/shop-new.json")
        let logged = try c.query("SELECT details->'fcm_project_id'->>'to' FROM herald.admin_log WHERE action = 'update_project'")
        #expect(logged.rowCount == 1 && logged[0, 0] == "shop-prod-5678")

        // remove: refused while jobs wait, --force dead-letters them and says how many.
        try c.query("SELECT herald.enqueue('{\"token\": \"t1\"}', project => 'shop')")
        let busy = try Self.projects(["remove", "shop"], database)
        #expect(busy.status == 2 && busy.output.contains("has 1 pending jobs") && busy.output.contains("herald projects remove shop --force"), "\(busy.output)")
        let removed = try Self.projects(["remove", "shop", "--force"], database)
        #expect(removed.status == 0 && removed.output.contains("removed project shop") && removed.output.contains("1 pending job dead-lettered"), "\(removed.output)")
        #expect(try c.query("SELECT count(*) FROM herald.dead_letters WHERE project = 'shop' AND reason LIKE 'removed with project shop%'")[0, 0] == "1")
        #expect(FileManager.default.fileExists(atPath: keys + "/shop.json"), "the key file is left where it is")
        #expect(try Self.projects(["remove", "news"], database).status == 0)
        #expect(try Self.projects(["list"], database).output.contains("no projects registered"))
        // Every change is in the admin log, from the shell.
        let actions = try c.query("SELECT string_agg(action, ',' ORDER BY id) FROM herald.admin_log WHERE source LIKE 'shell %'")[0, 0]
        #expect(actions == "add_project,add_project,pause_project_sending,resume_project_sending,update_project,remove_project,remove_project")
    }

    @Test func badInputIsRefusedNamingTheValueAndNothingIsStored() throws {
        let database = try TestDatabase.fresh()
        defer { database.drop() }
        let emulator = try startEmulator()
        defer { emulator.stop() }
        let keys = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: keys) }
        try emulator.writeServiceAccount(to: keys + "/shop.json", projectID: "shop-prod-1234")
        let key = try JSONValue.parse(try String(contentsOfFile: keys + "/shop.json", encoding: .utf8))
        var noProject = try #require(key.objectValue)
        noProject["project_id"] = nil
        try Self.write(JSONValue.object(noProject).serialized, to: keys + "/no-project.json")
        try Self.write("project_id = shop\n", to: keys + "/not-json.json")

        func refused(_ arguments: [String], environment: [String: String] = [:], saying expected: [String]) throws {
            let run = try Self.projects(arguments, database, environment: environment)
            #expect(run.status == 2, "herald projects \(arguments.joined(separator: " ")): \(run.output)")
            for text in expected { #expect(run.output.contains(text), "herald projects \(arguments.joined(separator: " ")) says \(text): \(run.output)") }
        }
        for action in ["show", "test", "pause", "resume", "remove"] {
            try refused([action, "nope"], saying: ["no project named \"nope\"", "herald projects list"])
        }
        try refused(["add", "shop", "--credentials", keys + "/missing.json"], saying: [keys + "/missing.json", "does not exist"])
        try refused(["add", "shop", "--credentials", keys + "/not-json.json"], saying: [keys + "/not-json.json", "not JSON"])
        try refused(["add", "shop", "--credentials", keys + "/no-project.json"], saying: [keys + "/no-project.json", "\"project_id\" is missing"])
        try refused(["add", "shop", "--credentials", "env:HERALD_TEST_UNSET_KEY"], saying: ["HERALD_TEST_UNSET_KEY is not set"])
        try refused(["add", "shop", "--credentials", "env:HERALD_TEST_EMPTY_KEY"], environment: ["HERALD_TEST_EMPTY_KEY": "{\"type\": \"service_account\"}"],
                    saying: ["HERALD_TEST_EMPTY_KEY", "\"project_id\" is missing"])
        try refused(["add", "shop", "--credentials", "keys/shop.json"], saying: ["neither an absolute path nor env:VAR"])
        try refused(["add", "Shop Prod", "--credentials", keys + "/shop.json"], saying: ["project name \"Shop Prod\" is not a short slug", "give 1 to 63 lowercase letters"])
        try refused(["add", "shop", "--credentials", keys + "/shop.json", "--max-rate", "0"], saying: ["--max-rate \"0\" is not a rate"])
        try refused(["add", "shop"], saying: ["give --credentials"])
        let noDatabase = try HeraldProcess.run(["projects", "list"], environment: [:], timeout: 60)
        #expect(noDatabase.status == 2 && noDatabase.output.contains("set DATABASE_URL (or --database-url)"), "\(noDatabase.output)")
        #expect(try database.connect().query("SELECT count(*) FROM herald.projects").int(0, 0) == 0, "nothing was stored")

        // One FCM project, one entry: the second name is refused, naming both and the project.
        #expect(try Self.projects(["add", "shop", "--credentials", keys + "/shop.json"], database).status == 0)
        try refused(["add", "shop-again", "--credentials", keys + "/shop.json"],
                    saying: ["FCM project \"shop-prod-1234\" is registered already as \"shop\"", "\"shop-again\""])
        try refused(["add", "shop", "--credentials", keys + "/shop.json"], saying: ["a project named \"shop\" is registered already"])
        #expect(try database.connect().query("SELECT count(*) FROM herald.projects").int(0, 0) == 1)
    }

    @Test func theSQLFunctionsRefuseWhatTheCommandRefusesAndTheTableRefusesAKey() throws {
        let database = try TestDatabase.fresh()
        defer { database.drop() }
        let c = try database.connect()
        let pem = try RSAPrivateKey.generate().pemPKCS8
        let keyDocument: JSONValue = ["type": "service_account", "project_id": "p1", "client_email": "a@p1.iam.gserviceaccount.com",
                                      "private_key": .string(pem)]
        let keyJSON = keyDocument.serialized
        func refusal(_ sql: String, _ values: [PGValue?] = []) -> PostgresError? {
            do { _ = try c.query(sql, values); return nil } catch { return error }
        }

        try c.query("SELECT herald.add_project('shop', 'shop-prod', '/secrets/shop.json', 100)")
        try c.query("SELECT herald.add_project('news', 'news-prod', 'env:NEWS_KEY')")
        // A key given where its place belongs: refused, and the message does not repeat it.
        for value in [keyJSON, pem, "{\"private_key\": \"x\"}", "relative/key.json", "env:1BAD", "/a\nb"] {
            let error = try #require(refusal("SELECT herald.add_project('other', 'other-prod', $1)", [.text(value)]), "\(value.prefix(30)) is refused")
            #expect(error.sqlState == "22023")
            #expect(error.message.contains("never hold the key"), "\(error.message)")
            #expect(!error.message.contains(pem.split(separator: "\n")[1]) && !error.message.contains(value), "the value is not repeated: \(error.message)")
        }
        // A hand-written INSERT meets the constraint itself.
        for value in [keyJSON, pem, "-----BEGIN PRIVATE KEY-----", "./key.json"] {
            let error = try #require(refusal("INSERT INTO herald.projects (name, fcm_project_id, credentials) VALUES ('raw', 'raw-prod', $1)", [.text(value)]))
            #expect(error.sqlState == "23514" && error.message.contains("projects_credentials_reference"), "\(error.message)")
        }
        let duplicate = try #require(refusal("SELECT herald.add_project('shop-two', 'shop-prod', '/secrets/shop2.json')"))
        #expect(duplicate.message.contains("FCM project \"shop-prod\" is registered already as \"shop\"") && duplicate.message.contains("\"shop-two\""), "\(duplicate.message)")
        #expect(refusal("SELECT herald.add_project('x', 'x-prod', '/k.json', 0)")?.message.contains("max_rate must be more than 0") == true)
        #expect(refusal("SELECT herald.add_project('Bad Name', 'x-prod', '/k.json')")?.message.contains("\"Bad Name\" is not a short slug") == true)
        for function in ["pause_project_sending", "resume_project_sending", "remove_project"] {
            let error = try #require(refusal("SELECT herald.\(function)('nope')"))
            #expect(error.sqlState == "P0002" && error.message.contains("herald.\(function): no project named \"nope\""), "\(error.message)")
        }
        #expect(try c.query("SELECT herald.pause_project_sending('shop', 'key rotation')").bool(0, 0) == true)
        #expect(try c.query("SELECT herald.pause_project_sending('shop')").bool(0, 0) == false)
        #expect(try c.query("SELECT state, paused_reason FROM herald.project_registry WHERE name = 'shop'")[0, 1] == "key rotation")
        #expect(try c.query("SELECT herald.resume_project_sending('shop')").bool(0, 0) == true)
        #expect(try c.query("SELECT herald.resume_project_sending('shop')").bool(0, 0) == false)
        try c.query("SELECT herald.remove_project('news')")
        #expect(try c.query("SELECT string_agg(name || ':' || state, ',') FROM herald.project_registry")[0, 0] == "shop:enabled")
    }

    @Test func theKeyNeverReachesTheOutputOrTheDatabase() throws {
        let database = try TestDatabase.fresh()
        defer { database.drop() }
        let emulator = try startEmulator()
        defer { emulator.stop() }
        let keys = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: keys) }
        let json = try emulator.serviceAccountJSON(projectID: "shop-prod-1234")
        try Self.write(json, to: keys + "/shop.json")
        // A key whose private_key is no PEM but text anyone would recognise in an output.
        let marker = "HERALD-RECOGNISABLE-KEY-MATERIAL-4f1c"
        var broken = try #require(try JSONValue.parse(json).objectValue)
        broken["private_key"] = .string("-----BEGIN PRIVATE KEY-----\n\(marker)\n-----END PRIVATE KEY-----\n")
        try Self.write(JSONValue.object(broken).serialized, to: keys + "/broken.json")
        let envJSON = try emulator.serviceAccountJSON(projectID: "news-prod-77")
        let secretLines = try Self.keyLines(json) + Self.keyLines(envJSON)
        let env = ["DATABASE_URL": database.url, "HERALD_TEST_NEWS_KEY": envJSON, "HERALD_FCM_URL": emulator.baseURL]

        var outputs: [String] = []
        for arguments in [["add", "shop", "--credentials", keys + "/shop.json"], ["add", "news", "--credentials", "env:HERALD_TEST_NEWS_KEY"],
                          ["add", "broken", "--credentials", keys + "/broken.json"], ["add", "pasted", "--credentials", json],
                          ["add", "pem", "--credentials", String(describing: try #require(try JSONValue.parse(json)["private_key"]?.stringValue))],
                          ["list"], ["list", "--json"], ["show", "shop"], ["show", "shop", "--json"], ["test", "shop"], ["test", "news"]] {
            let run = try HeraldProcess.run(["projects"] + arguments, environment: env, timeout: 60)
            outputs.append(run.output)
        }
        #expect(outputs[2].contains("\"private_key\" is not a PEM RSA private key"), "\(outputs[2])")
        #expect(outputs[3].contains("looks like a key itself") && outputs[4].contains("looks like a key itself"), "\(outputs[3])\n\(outputs[4])")
        #expect(outputs[0].contains("added project shop") && outputs[1].contains("added project news"), "\(outputs[0])\n\(outputs[1])")
        #expect(outputs[9].contains("accepted a validate_only message"), "\(outputs[9])")
        #expect(outputs[10].contains("FCM project news-prod-77") && outputs[10].contains("accepted a validate_only message"), "\(outputs[10])")
        let all = outputs.joined(separator: "\n")
        #expect(!all.contains(marker), "the broken key's text is not printed")
        #expect(!all.contains("ya29."), "no access token is printed")
        for line in secretLines { #expect(!all.contains(line), "a line of the private key was printed") }
        let stored = try Self.storedText(try database.connect())
        #expect(stored.contains("shop-prod-1234") && stored.contains("env:HERALD_TEST_NEWS_KEY"), "the scan reads the rows: \(stored.prefix(300))")
        #expect(!stored.contains(marker) && !stored.contains("PRIVATE KEY"))
        for line in secretLines { #expect(!stored.contains(line), "a line of the private key is stored") }
    }

    @Test func testSendsOneValidateOnlyMessageAndSaysWhyWhenRefused() throws {
        let database = try TestDatabase.fresh()
        defer { database.drop() }
        let emulator = try startEmulator()
        defer { emulator.stop() }
        let keys = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: keys) }
        try emulator.writeServiceAccount(to: keys + "/shop.json", projectID: "shop-prod-1234")
        let env = ["HERALD_FCM_URL": emulator.baseURL]
        #expect(try Self.projects(["add", "shop", "--credentials", keys + "/shop.json"], database).status == 0)
        func validateOnly() -> Int { emulator.statistics["validate_only"]?.intValue ?? -1 }
        func delivered() -> Int { emulator.statistics["delivered"]?.intValue ?? -1 }

        let passed = try Self.projects(["test", "shop"], database, environment: env)
        #expect(passed.status == 0, "\(passed.output)")
        #expect(passed.output.contains("FCM project shop-prod-1234") && passed.output.contains("accepted a validate_only message"), "\(passed.output)")
        // At FCM's side: one validate_only request, nothing delivered.
        #expect(validateOnly() == 1 && delivered() == 0, "\(emulator.statistics)")

        // The same account with a key the emulator never issued: the token is refused, nothing is sent.
        var forged = try #require(try JSONValue.parse(try String(contentsOfFile: keys + "/shop.json", encoding: .utf8)).objectValue)
        forged["private_key"] = .string(try RSAPrivateKey.generate().pemPKCS8)
        try Self.write(JSONValue.object(forged).serialized, to: keys + "/shop.json")
        let refused = try Self.projects(["test", "shop"], database, environment: env)
        #expect(refused.status == 1, "\(refused.output)")
        #expect(refused.output.contains("no access token") && refused.output.contains("Invalid JWT Signature"), "\(refused.output)")
        #expect(validateOnly() == 1, "no message was sent without a token")

        // The file now holds another project's key: refused before anything is sent, naming both.
        try emulator.writeServiceAccount(to: keys + "/shop.json", projectID: "other-prod-9")
        let other = try Self.projects(["test", "shop"], database, environment: env)
        #expect(other.status == 1, "\(other.output)")
        #expect(other.output.contains("is for FCM project other-prod-9, but shop is registered for shop-prod-1234"), "\(other.output)")

        // The key file gone: the failure names it.
        try FileManager.default.removeItem(atPath: keys + "/shop.json")
        let gone = try Self.projects(["test", "shop"], database, environment: env)
        #expect(gone.status == 1 && gone.output.contains(keys + "/shop.json") && gone.output.contains("does not exist"), "\(gone.output)")
        #expect(validateOnly() == 1)
    }
}
