import CommandOptions
import Crypto
import FCM
import Foundation
import JSON
import Logging
import Postgres
import Queue

/// `herald apns`: the APNs apps of the project registry (herald.projects, service 'apns'). Only
/// where each .p8 key is goes into the database (a path or env:VAR); the key is read here to
/// check it is a P-256 PKCS#8 key, and is never printed.
enum APNsCommand {
    static let options: [Option] = [
        Option(name: "key-file", value: "PATH|env:VAR",
               help: "add, update: where the token-based .p8 key is: an absolute file path, or env:VAR, an environment variable holding the PEM text. Only this reference is stored."),
        Option(name: "key-id", value: "KID", help: "add, update: the key's 10-character id (as in AuthKey_KID.p8)."),
        Option(name: "team-id", value: "TEAM", help: "add, update: the 10-character Apple team id the key belongs to."),
        Option(name: "topic", value: "BUNDLE_ID", help: "add, update: the app's bundle id (the apns-topic of its alerts)."),
        Option(name: "sandbox", help: "add, update: send to Apple's development environment (api.sandbox.push.apple.com)."),
        Option(name: "production", help: "update: send to Apple's production environment (api.push.apple.com)."),
        Option(name: "max-rate", value: "N", help: "add, update: messages per second for the app (more than 0); update takes none for the pool's --max-rate. Unset: the pool's --max-rate."),
        Option(name: "reason", value: "TEXT", help: "pause: why, shown by list and show."),
        Option(name: "force", help: "remove: dead-letter the app's pending jobs and remove it (without it, remove is refused while jobs are pending)."),
        Option(name: "json", help: "list, show: print JSON instead of a table."),
    ] + DeadCommand.databaseOptions

    static let help = helpText(
        command: "apns", summary: "The APNs apps of the registry (herald.projects, service apns): add, list, show, test, pause, resume, remove.",
        usage: """
        add APP --key-file PATH|env:VAR --key-id KID --team-id TEAM --topic BUNDLE_ID [--sandbox] [--max-rate N]
               herald apns update APP [--key-file PATH|env:VAR] [--key-id KID] [--team-id TEAM] [--topic BUNDLE_ID]
                                      [--sandbox|--production] [--max-rate N|none]
               herald apns list [--json]
               herald apns show APP [--json]
               herald apns test APP
               herald apns pause APP [--reason TEXT]
               herald apns resume APP
               herald apns remove APP [--force]
        """,
        options: options,
        footer: """
        add reads the .p8 key, checks it is an unencrypted PKCS#8 key on P-256 (what ES256 signs
        with), and stores only where it is, with the key id, team id, topic and environment; the key
        stays out of the database. APP is 1 to 63 lowercase letters, digits, - or _, in the one
        namespace APNs apps share with FCM projects. test reads the key the entry points at and
        checks it the same way; it contacts nobody (exit status 1 when the key is unusable). update
        corrects what an app was added with (a wrong key id, team id or topic that Apple refused
        pauses the app: update it, then resume it; running pools take the corrected entry up at
        once). remove is refused while the app has pending jobs; --force dead-letters them with it
        and says how many. Every change is recorded in herald.admin_log. In SQL:
        herald.add_apns_app(name, key_file, key_id, team_id, topic, sandbox, max_rate),
        herald.update_apns_app(name, key_file, key_id, team_id, topic, sandbox, max_rate,
        clear_max_rate), herald.pause_project_sending(name, reason), herald.resume_project_sending(name),
        herald.remove_project(name, force), the view herald.apns_apps.
        Jobs name their app: herald.enqueue('{"apns_token": "...", "apns": {...}}', apns_app => APP),
        or leave it out when one app is registered.
        """)

    static func run(arguments: [String]) throws -> Int32 {
        let parsed = try parse(command: "apns", arguments: arguments, options: options, positional: true)
        return try RegistryActions(
            command: "apns", noun: "APNs app", shortNoun: "app", placeholder: "APP",
            actionOnlyFlags: ["key-file": "add,update", "key-id": "add,update", "team-id": "add,update", "topic": "add,update",
                              "sandbox": "add,update", "production": "update", "max-rate": "add,update", "reason": "pause", "force": "remove"],
            list: { parsed in
                let apps = try APNsApps.list(try operationsDatabase(parsed))
                if parsed.has("json") {
                    print(JSONValue.array(apps.map(\.json)).serialized)
                } else {
                    printList(apps)
                }
            },
            add: { try add($0, name: $1) }, update: { try update($0, name: $1) },
            show: { try show($0, name: $1) }, test: { try test($0, name: $1) },
            pause: { try APNsApps.pause($0, name: $1, reason: $2, source: $3) },
            resume: { try APNsApps.resume($0, name: $1, source: $2) },
            remove: { try APNsApps.remove($0, name: $1, force: $2, source: $3) }
        ).run(parsed)
    }

    static func add(_ parsed: ParsedOptions, name: String) throws -> Int32 {
        var missing: [String] = []
        for flag in ["key-file", "key-id", "team-id", "topic"] where parsed.string(flag) == nil { missing.append("--\(flag)") }
        guard missing.isEmpty, let reference = parsed.string("key-file"), let keyID = parsed.string("key-id"),
              let teamID = parsed.string("team-id"), let topic = parsed.string("topic") else {
            throw UsageError("herald apns add: give \(missing.joined(separator: ", ")) (see herald apns --help): where the .p8 key is, its key id, your team id and the app's bundle id")
        }
        var maxRate: Double?
        if let text = parsed.string("max-rate") {
            guard let value = Double(text), value.isFinite, value > 0 else {
                throw UsageError("herald apns add: --max-rate \"\(text.prefix(40))\" is not a rate; give messages per second more than 0, e.g. --max-rate 500 (leave it out to use the pool's --max-rate)")
            }
            maxRate = value
        }
        // A key a pool could not sign with is not registered (the pool would pause the app).
        try checkKey(reference, keyID: keyID, command: "herald apns add")
        let added = try APNsApps.add(try operationsDatabase(parsed), name: name, keyFile: reference, keyID: keyID, teamID: teamID,
                                     topic: topic, sandbox: parsed.has("sandbox"), maxRate: maxRate, source: shellSource())
        print("added APNs app \(added.name): topic \(added.topic), key \(added.keyID) of team \(added.teamID) at \(added.keyFile), \(added.sandbox ? "sandbox" : "production") (\(added.baseURL)), max rate \(added.maxRate.map(CampaignsCommand.formatRate) ?? "the pool's --max-rate")")
        print("its jobs: herald.enqueue('{\"apns_token\": \"...\", \"apns\": {\"payload\": {\"aps\": {...}}}}', apns_app => '\(added.name)')")
        return 0
    }

    /// Corrects an app's entry: each flag given replaces its value; the key (a new file, or the
    /// old file under a new key id) is checked as add checks it before anything changes.
    static func update(_ parsed: ParsedOptions, name: String) throws -> Int32 {
        if parsed.has("sandbox") && parsed.has("production") {
            throw UsageError("herald apns update: give --sandbox or --production, not both")
        }
        var change = APNsApps.Change(keyFile: parsed.string("key-file"), keyID: parsed.string("key-id"), teamID: parsed.string("team-id"),
                                     topic: parsed.string("topic"),
                                     sandbox: parsed.has("sandbox") ? true : parsed.has("production") ? false : nil)
        if let text = parsed.string("max-rate") {
            change.maxRate = try ProjectsCommand.rateChange(text, command: "herald apns update")
        }
        guard !change.isEmpty else {
            throw UsageError("herald apns update \(name): give what to change: --key-file, --key-id, --team-id, --topic, --sandbox or --production, --max-rate (see herald apns --help)")
        }
        let connection = try operationsDatabase(parsed)
        guard let before = try APNsApps.entry(connection, name: name) else {
            try APNsApps.requireApp(connection, name: name)
            return 1
        }
        if change.keyFile != nil || change.keyID != nil {
            try checkKey(change.keyFile ?? before.keyFile, keyID: change.keyID ?? before.keyID, command: "herald apns update")
        }
        let (after, changed) = try APNsApps.update(connection, name: name, change, source: shellSource())
        guard changed else {
            print("APNs app \(name) already has these values; nothing changed")
            return 0
        }
        var what: [String] = []
        func note(_ field: String, _ old: String, _ new: String) { if old != new { what.append("\(field) \(old) -> \(new)") } }
        note("key file", before.keyFile, after.keyFile)
        note("key id", before.keyID, after.keyID)
        note("team id", before.teamID, after.teamID)
        note("topic", before.topic, after.topic)
        note("environment", before.sandbox ? "sandbox" : "production", after.sandbox ? "sandbox" : "production")
        note("max rate", before.maxRate.map(CampaignsCommand.formatRate) ?? "the pool's", after.maxRate.map(CampaignsCommand.formatRate) ?? "the pool's")
        print("updated APNs app \(name): \(what.joined(separator: ", ")); running pools take it up at its next claim")
        if let reason = after.pausedReason {
            print("APNs app \(name) is still paused (\(after.pauseCause ?? "operator"): \(reason)); once it is right: herald apns resume \(name)")
        }
        return 0
    }

    static func show(_ parsed: ParsedOptions, name: String) throws -> Int32 {
        let connection = try operationsDatabase(parsed)
        guard let app = try APNsApps.entry(connection, name: name) else {
            try APNsApps.requireApp(connection, name: name)
            return 1
        }
        if parsed.has("json") {
            print(app.json.serialized)
            return 0
        }
        var rows = [["name:", app.name], ["topic:", app.topic], ["key id:", app.keyID], ["team id:", app.teamID],
                    ["key file:", app.keyFile], ["environment:", "\(app.sandbox ? "sandbox" : "production") (\(app.baseURL))"],
                    ["max rate:", app.maxRate.map { CampaignsCommand.formatRate($0) + "/s" } ?? "the pool's --max-rate"],
                    ["state:", app.state]]
        if let reason = app.pausedReason { rows.append(["paused:", "\(app.pausedAt ?? "") by \(app.pauseCause ?? "operator") (\(reason))"]) }
        rows += [["created:", app.createdAt], ["updated:", app.updatedAt]]
        printColumns(rows)
        return 0
    }

    /// Reads the key the app's entry points at, as a pool would, and checks it; contacts nobody.
    static func test(_ parsed: ParsedOptions, name: String) throws -> Int32 {
        let connection = try operationsDatabase(parsed)
        guard let app = try APNsApps.entry(connection, name: name) else {
            try APNsApps.requireApp(connection, name: name)
            return 1
        }
        do { try checkKey(app.keyFile, keyID: app.keyID, command: "herald apns test \(name)") } catch let error as UsageError {
            printError("\(error.description)\n  A pool could not sign for this app either: fix the key (or herald apns remove and add it again).")
            return 1
        }
        print("APNs app \(name): the key at \(app.keyFile) is a P-256 PKCS#8 key, usable for ES256 tokens of key \(app.keyID), team \(app.teamID); Apple was not contacted (a pool's first send to \(app.baseURL) shows whether Apple takes it)")
        if let reason = app.pausedReason { print("note: APNs app \(name) is paused (\(reason)); herald apns resume \(name) enables it") }
        return 0
    }

    /// Reads and checks the .p8 key `reference` names (an absolute path or env:VAR); errors name
    /// the file or variable and never quote the key.
    static func checkKey(_ reference: String, keyID: String, command: String) throws {
        if reference.contains("-----") || reference.contains("\n") || reference.contains("{") {
            throw UsageError("\(command): --key-file holds what looks like a key itself (\(reference.count) characters, not shown); give where the key is instead: the path of the .p8 file, or env:VAR naming a variable that holds it")
        }
        let pem: [UInt8]
        if reference.hasPrefix("env:") {
            let variable = String(reference.dropFirst(4))
            guard let value = ProcessInfo.processInfo.environment[variable], !value.isEmpty else {
                throw UsageError("\(command): key env:\(variable.prefix(60)): the environment variable is not set or empty; set it to the .p8 key's PEM text (in the pool's environment too)")
            }
            pem = Array(value.utf8)
        } else {
            guard reference.hasPrefix("/") else {
                throw UsageError("\(command): key file \"\(reference.prefix(200))\" is not an absolute path; the pool may run elsewhere, so give e.g. \(URL(fileURLWithPath: reference).standardizedFileURL.path)")
            }
            guard let data = FileManager.default.contents(atPath: reference) else {
                throw UsageError("\(command): key file \(reference) cannot be read (missing, or not readable by this user); give the path of the .p8 key Apple issued")
            }
            pem = Array(data)
            if let warning = KeyFilePermissions.warning(path: reference) { logger.warning(warning) }
        }
        if let problem = APNsKeyCheck.problem(pem: pem) {
            throw UsageError("\(command): key \(reference): \(problem)")
        }
        // Apple names the file after the key: AuthKey_KID.p8. Another id is a mix-up caught now.
        let file = URL(fileURLWithPath: reference).lastPathComponent
        if file.hasPrefix("AuthKey_"), file.hasSuffix(".p8") {
            let fileKeyID = String(file.dropFirst("AuthKey_".count).dropLast(".p8".count))
            if fileKeyID != keyID {
                throw UsageError("\(command): key file \(file) is named for key \(fileKeyID), but the key id given is \(keyID); give --key-id \(fileKeyID), or the file of key \(keyID)")
            }
        }
    }

    static let logger = Logger(level: .info, format: .text, prefix: "herald apns")

    static func printList(_ apps: [APNsApp]) {
        guard !apps.isEmpty else {
            print("no APNs apps registered; herald apns add APP --key-file PATH --key-id KID --team-id TEAM --topic BUNDLE_ID registers one")
            return
        }
        var rows = [["NAME", "TOPIC", "KEY ID", "TEAM ID", "KEY FILE", "ENVIRONMENT", "MAX RATE", "STATE"]]
        for a in apps {
            rows.append([a.name, a.topic, a.keyID, a.teamID, a.keyFile, a.sandbox ? "sandbox" : "production",
                         a.maxRate.map(CampaignsCommand.formatRate) ?? "-", a.pausedReason.map { "paused (\(a.pauseCause ?? "operator"): \($0))" } ?? "enabled"])
        }
        printColumns(rows)
    }
}
