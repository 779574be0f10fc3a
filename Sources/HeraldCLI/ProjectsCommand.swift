import CommandOptions
import FCM
import Foundation
import HTTPClient
import JSON
import Logging
import Postgres
import Queue

/// `herald projects`: the registry of Firebase projects (herald.projects). Only where each key
/// is goes into the database (a path or env:VAR); the key is read here to check it and to learn
/// its project_id, and by `test` to fetch a token, and is never printed.
enum ProjectsCommand {
    static let options: [Option] = [
        Option(name: "credentials", value: "PATH|env:VAR",
               help: "add, update: where the service-account JSON key is: an absolute file path, or env:VAR, an environment variable holding the JSON. Only this reference is stored."),
        Option(name: "max-rate", value: "N", help: "add, update: messages per second for the project (more than 0); update takes none for the pool's --max-rate. Unset: the pool's --max-rate."),
        Option(name: "reason", value: "TEXT", help: "pause: why, shown by list and show."),
        Option(name: "android-app", value: "APP_ID", repeatable: true,
               help: "set: a Firebase Android app id of the project (Project settings, Your apps: 1:1234567890:android:0a1b2c...), whose delivery data FCM's Data API is asked for; repeat for several. Replaces the apps set before."),
        Option(name: "no-android-apps", help: "set: forget the project's Android apps (its delivery data is no longer fetched)."),
        Option(name: "force", help: "remove: dead-letter the project's pending jobs and remove it (without it, remove is refused while jobs are pending)."),
        Option(name: "json", help: "list, show: print JSON instead of a table."),
        Option(name: "fcm-url", env: "HERALD_FCM_URL", value: "URL",
               help: "test: FCM base URL; http:// (a local emulator) uses HTTP/1.1.", defaultText: "https://fcm.googleapis.com"),
        Option(name: "ca-file", env: "HERALD_CA_FILE", value: "FILE",
               help: "test: CA bundle for verifying FCM's TLS certificate (verification is always on)."),
        allowInsecureTransportOption,
    ] + DeadCommand.databaseOptions

    static let help = helpText(
        command: "projects", summary: "The registry of Firebase projects (herald.projects): add, list, show, test, pause, resume, remove.",
        usage: """
        add NAME --credentials PATH|env:VAR [--max-rate N]
               herald projects update NAME [--credentials PATH|env:VAR] [--max-rate N|none]
               herald projects list [--json]
               herald projects show NAME [--json]
               herald projects set NAME (--android-app APP_ID... | --no-android-apps)
               herald projects test NAME
               herald projects pause NAME [--reason TEXT]
               herald projects resume NAME
               herald projects remove NAME [--force]
        """,
        options: options,
        footer: """
        add reads the service-account key, checks it (project_id, client_email, private_key) and
        stores only where it is and its project_id; the key stays out of the database. NAME is 1 to
        63 lowercase letters, digits, - or _. One FCM project has one entry. test fetches an access
        token with the key and sends FCM one validate_only message (to a topic; nothing is
        delivered); exit status 1 when either is refused. update points the entry at another key
        (read and checked as add does; its project_id becomes the entry's) or changes its rate;
        running pools take it up at once, and at once after a resume. remove is refused while the
        project has pending jobs; --force dead-letters them with it and says how many. Every change
        is recorded in herald.admin_log. In SQL: herald.add_project(name, fcm_project_id,
        credentials, max_rate), herald.update_project(name, credentials, fcm_project_id, max_rate,
        clear_max_rate), herald.set_project_android_apps(name, android_apps), herald.pause_project_sending(name, reason),
        herald.resume_project_sending(name), herald.remove_project(name, force), the view
        herald.project_registry. set names the project's Android apps, whose delivery data (what
        reached the phones) herald work fetches once a day and herald delivery-data fetch fetches now.
        Jobs name their project (herald.jobs.project, herald.enqueue(..., project => NAME)). A running
        herald work (without --project) reads the registry every 10 s (HERALD_REGISTRY_POLL_SECONDS)
        and starts sending a project's jobs, with the key its entry points at, within that time; a pool
        started with herald work --project NAME works that project alone.
        """)

    static func run(arguments: [String]) throws -> Int32 {
        let parsed = try parse(command: "projects", arguments: arguments, options: options, positional: true)
        return try RegistryActions(
            command: "projects", noun: "project", shortNoun: "project", placeholder: "NAME",
            actionOnlyFlags: ["credentials": "add,update", "max-rate": "add,update", "reason": "pause", "force": "remove", "android-app": "set", "no-android-apps": "set"],
            list: { parsed in
                let projects = try ProjectRegistry.list(try operationsDatabase(parsed))
                if parsed.has("json") {
                    print(JSONValue.array(projects.map(\.json)).serialized)
                } else {
                    printList(projects)
                }
            },
            add: { try add($0, name: $1) }, update: { try update($0, name: $1) },
            show: { try show($0, name: $1) }, test: { try test($0, name: $1) },
            pause: { try ProjectRegistry.pause($0, name: $1, reason: $2, source: $3) },
            resume: { try ProjectRegistry.resume($0, name: $1, source: $2) },
            remove: { try ProjectRegistry.remove($0, name: $1, force: $2, source: $3) },
            set: { try set($0, name: $1) }
        ).run(parsed)
    }

    /// `set NAME --android-app ID...` or `--no-android-apps`: the apps FCM's Data API is asked about.
    static func set(_ parsed: ParsedOptions, name: String) throws -> Int32 {
        let apps = parsed.all("android-app")
        let clear = parsed.has("no-android-apps")
        guard apps.isEmpty == clear else {
            throw UsageError(clear ? "herald projects set: give --android-app APP_ID or --no-android-apps, not both"
                                   : "herald projects set: give --android-app APP_ID (repeat it for several apps) or --no-android-apps")
        }
        for app in apps where !FCMDataAPI.isAndroidAppID(app) {
            throw UsageError("herald projects set: --android-app \"\(app.prefix(100))\" is not a Firebase Android app id; give the App ID the Firebase console shows under Project settings, Your apps (e.g. 1:1234567890:android:0a1b2c3d4e5f6789)")
        }
        let stored = try ProjectRegistry.setAndroidApps(try operationsDatabase(parsed), name: name, apps: apps, source: shellSource())
        if stored.isEmpty {
            print("project \(name): no Android apps; its delivery data is no longer fetched")
        } else {
            print("project \(name): Android app\(stored.count == 1 ? "" : "s") \(stored.joined(separator: ", ")); herald work fetches their delivery data once a day, herald delivery-data fetch --project \(name) now")
        }
        return 0
    }

    static func add(_ parsed: ParsedOptions, name: String) throws -> Int32 {
        guard let reference = parsed.string("credentials") else {
            throw UsageError("herald projects add: give --credentials PATH (the service-account JSON key file) or --credentials env:VAR (a variable holding it)")
        }
        var maxRate: Double?
        if let text = parsed.string("max-rate") {
            guard let value = Double(text), value.isFinite, value > 0 else {
                throw UsageError("herald projects add: --max-rate \"\(text.prefix(40))\" is not a rate; give messages per second more than 0, e.g. --max-rate 500 (leave it out to use the pool's --max-rate)")
            }
            maxRate = value
        }
        let account = try loadKey(reference, command: "herald projects add")
        // A key a pool could not use is not registered (the pool would pause the project).
        try RunEnvironment.checkTransport(parsed, log: logger, key: (account, reference))
        let added = try ProjectRegistry.add(try operationsDatabase(parsed), name: name, fcmProjectID: account.projectID,
                                            credentials: reference, maxRate: maxRate, source: shellSource())
        print("added project \(added.name): FCM project \(added.fcmProjectID), credentials \(added.credentials), max rate \(added.maxRate.map(CampaignsCommand.formatRate) ?? "the pool's --max-rate")")
        print("its jobs (project => '\(added.name)') are sent by any running herald work without --project, within 10 s (it reads the registry again); or by a pool of their own: herald work --project \(added.name)")
        return 0
    }

    /// `--max-rate` of update: a rate more than 0, or `none` for the pool's --max-rate.
    static func rateChange(_ text: String, command: String) throws(UsageError) -> Double?? {
        if text.lowercased() == "none" { return .some(nil) }
        guard let value = Double(text), value.isFinite, value > 0 else {
            throw UsageError("\(command): --max-rate \"\(text.prefix(40))\" is not a rate; give messages per second more than 0, e.g. --max-rate 500, or none for the pool's --max-rate")
        }
        return .some(value)
    }

    /// Points a project at another key (checked as add checks it; its project_id becomes the
    /// entry's) or changes its rate.
    static func update(_ parsed: ParsedOptions, name: String) throws -> Int32 {
        let reference = parsed.string("credentials")
        let maxRate = try parsed.string("max-rate").map { text throws(UsageError) in try rateChange(text, command: "herald projects update") }
        guard reference != nil || maxRate != nil else {
            throw UsageError("herald projects update \(name): give what to change: --credentials PATH|env:VAR, --max-rate N|none (see herald projects --help)")
        }
        var fcmProjectID: String? = nil
        if let reference {
            let account = try loadKey(reference, command: "herald projects update")
            try RunEnvironment.checkTransport(parsed, log: logger, key: (account, reference))
            fcmProjectID = account.projectID
        }
        let connection = try operationsDatabase(parsed)
        guard let before = try ProjectRegistry.entry(connection, name: name) else {
            if try APNsApps.service(connection, name: name) == "apns" {
                throw UsageError("herald projects update: \"\(name)\" is an APNs app, not an FCM project; herald apns update \(name) changes it")
            }
            throw AdminError(.notFound, "no project named \"\(name.prefix(100))\" in the registry")
        }
        let (after, changed) = try ProjectRegistry.update(connection, name: name, credentials: reference, fcmProjectID: fcmProjectID,
                                                          maxRate: maxRate ?? nil, source: shellSource())
        guard changed else {
            print("project \(name) already has these values; nothing changed")
            return 0
        }
        var what: [String] = []
        if before.credentials != after.credentials { what.append("credentials \(before.credentials) -> \(after.credentials)") }
        if before.fcmProjectID != after.fcmProjectID { what.append("FCM project \(before.fcmProjectID) -> \(after.fcmProjectID)") }
        if before.maxRate != after.maxRate {
            what.append("max rate \(before.maxRate.map(CampaignsCommand.formatRate) ?? "the pool's") -> \(after.maxRate.map(CampaignsCommand.formatRate) ?? "the pool's")")
        }
        print("updated project \(name): \(what.joined(separator: ", ")); running pools take it up at its next claim")
        if let reason = after.pausedReason {
            print("project \(name) is still paused (\(after.pauseCause ?? "operator"): \(reason)); once it is right: herald projects resume \(name)")
        }
        return 0
    }

    static func show(_ parsed: ParsedOptions, name: String) throws -> Int32 {
        guard let project = try ProjectRegistry.entry(try operationsDatabase(parsed), name: name) else {
            throw AdminError(.notFound, "no project named \"\(name.prefix(100))\" in the registry")
        }
        if parsed.has("json") {
            print(project.json.serialized)
            return 0
        }
        var rows = [["name:", project.name], ["fcm project:", project.fcmProjectID], ["credentials:", project.credentials],
                    ["max rate:", project.maxRate.map { CampaignsCommand.formatRate($0) + "/s" } ?? "the pool's --max-rate"],
                    ["state:", project.state],
                    ["android apps:", project.androidApps.isEmpty ? "none (herald projects set \(project.name) --android-app APP_ID)" : project.androidApps.joined(separator: ", ")]]
        if let reason = project.pausedReason { rows.append(["paused:", "\(project.pausedAt ?? "") by \(project.pauseCause ?? "operator") (\(reason))"]) }
        rows += [["created:", project.createdAt], ["updated:", project.updatedAt]]
        printColumns(rows)
        return 0
    }

    /// Loads the credentials of the project, fetches an access token and sends FCM one
    /// validate_only message; prints what worked or what failed, never the token or the key.
    static func test(_ parsed: ParsedOptions, name: String) throws -> Int32 {
        let fcmURL = try parsed.httpURL("fcm-url") ?? "https://fcm.googleapis.com"
        try RunEnvironment.checkTransport(parsed, log: logger)
        guard let project = try ProjectRegistry.entry(try operationsDatabase(parsed), name: name) else {
            throw AdminError(.notFound, "no project named \"\(name.prefix(100))\" in the registry")
        }
        let command = "herald projects test \(name)"
        let account: ServiceAccount
        do { account = try loadKey(project.credentials, command: command) } catch let error as UsageError {
            printError("\(error.description)\n  The pool could not send for this project either: fix the key (or herald projects remove and add it again).")
            return 1
        }
        // Before any client is made: nothing has been sent when this refuses.
        try RunEnvironment.checkTransport(parsed, log: logger, key: (account, project.credentials))
        guard account.projectID == project.fcmProjectID else {
            printError("\(command): the key at \(project.credentials) is for FCM project \(account.projectID), but \(name) is registered for \(project.fcmProjectID); put \(project.fcmProjectID)'s key there, or herald projects remove \(name) and add it again")
            return 1
        }
        var configuration = HTTPClientConfiguration()
        configuration.caFile = parsed.string("ca-file")
        let auth = AccessTokenProvider(account: account, caFile: configuration.caFile)
        let fcm = RunEnvironment.FCMConnection(account: account, auth: auth, client: try HTTPClient(configuration: configuration),
                                               endpoint: FCMEndpoint(baseURL: fcmURL, projectID: account.projectID))
        do { _ = try auth.authorizationHeader() } catch {
            printError("\(command): no access token for \(account.clientEmail) (credentials \(project.credentials)): \(error)\n  Check that the key is current (not deleted or rotated in the Google Cloud console) and belongs to \(project.fcmProjectID).")
            return 1
        }
        let message: JSONValue = ["topic": "herald-projects-test", "data": ["herald": "projects test"]]
        let body = FCMEndpoint.sendBody(messageJSON: Array(message.serialized.utf8), validateOnly: true)
        switch try SendCommand.send(body, over: fcm) {
        case .delivered(let messageName):
            print("project \(name): access token fetched for \(account.clientEmail); FCM project \(project.fcmProjectID) at \(fcmURL) accepted a validate_only message (\(messageName)); nothing was delivered")
            if project.pausedReason != nil { print("note: project \(name) is paused (\(project.pausedReason!)); herald projects resume \(name) enables it") }
            return 0
        case .reauthenticate(let text):
            printError("\(command): FCM refused the access token of \(account.clientEmail) (UNAUTHENTICATED: \(text))\n  Check that the service account may send with Firebase Cloud Messaging in \(project.fcmProjectID).")
        case .deadLetter(let code, let text), .pruneToken(let code, let text):
            let advice = code == "PERMISSION_DENIED" || code == "SENDER_ID_MISMATCH"
                ? "The service account \(account.clientEmail) may not send for \(project.fcmProjectID): give it the Firebase Cloud Messaging API Admin role, or use that project's key."
                : "FCM refused the test message itself."
            printError("\(command): FCM refused the validate_only message: \(code): \(text)\n  \(advice)")
        case .retry(let code, let text, _, _):
            printError("\(command): FCM did not take the validate_only message now: \(code): \(text)\n  Temporary: try again later.")
        }
        return 1
    }

    static let logger = Logger(level: .info, format: .text, prefix: "herald projects")

    /// Reads and checks the service-account key a reference names (Project.loadKey, the
    /// same reading a pool does); errors name the file or variable and never quote the key.
    static func loadKey(_ reference: String, command: String) throws -> ServiceAccount {
        let account: ServiceAccount
        do { account = try Project.loadKey(reference, environment: ProcessInfo.processInfo.environment) } catch {
            throw UsageError("\(command): \(error)")
        }
        if reference.hasPrefix("/"), let warning = KeyFilePermissions.warning(path: reference) { logger.warning(warning) }
        return account
    }

    static func printList(_ projects: [Project]) {
        guard !projects.isEmpty else {
            print("no projects registered; herald projects add NAME --credentials PATH registers one")
            return
        }
        var rows = [["NAME", "FCM PROJECT", "CREDENTIALS", "MAX RATE", "STATE"]]
        for p in projects {
            rows.append([p.name, p.fcmProjectID, p.credentials, p.maxRate.map(CampaignsCommand.formatRate) ?? "-",
                         p.pausedReason.map { "paused (\(p.pauseCause ?? "operator"): \($0))" } ?? "enabled"])
        }
        printColumns(rows)
    }
}
