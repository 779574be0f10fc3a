import CommandOptions
import FCM
import Foundation
import JSON
import Logging
import Postgres
import Queue
import Worker

/// `--fcm-data-url` (HERALD_FCM_DATA_URL): where FCM's Data API is, for `herald work`'s daily
/// fetch and `herald delivery-data fetch`.
let fcmDataURLOption = Option(name: "fcm-data-url", env: "HERALD_FCM_DATA_URL", value: "URL",
                              help: "FCM's Data API base URL, where each project's delivery data is fetched (the emulator's, for a local try).",
                              defaultText: FCMDataAPI.defaultBaseURL)

/// `herald delivery-data`: FCM's delivery data of the registry's projects (what reached the
/// Android devices, per app, day and analytics label), fetched now or looked at.
enum DeliveryDataCommand {
    static let options: [Option] = [
        Option(name: "project", value: "NAME", repeatable: true, help: "fetch: only this registry project (repeat for several).", defaultText: "every FCM project"),
        Option(name: "days", value: "N", help: "fetch: store only the last N days (older days stored before stay as they are).", defaultText: "every day FCM gives"),
        Option(name: "json", help: "status: print JSON instead of a table."),
        fcmDataURLOption,
        Option(name: "ca-file", env: "HERALD_CA_FILE", value: "FILE",
               help: "CA bundle for verifying the TLS certificates of FCM's Data API and the token endpoint (verification is always on)."),
        allowInsecureTransportOption,
        Option(name: "log-level", env: "HERALD_LOG_LEVEL", value: "LEVEL", help: "debug, info, warn or error.", defaultText: "info"),
        Option(name: "log-format", env: "HERALD_LOG_FORMAT", value: "FORMAT", help: "text or json.", defaultText: "text"),
    ] + DeadCommand.databaseOptions

    static let help = helpText(
        command: "delivery-data", summary: "FCM's delivery data of the registry's projects: what reached the Android devices, per app, day and analytics label.",
        usage: """
        fetch [--project NAME]... [--days N]
               herald delivery-data status [--json]
        """,
        options: options,
        footer: """
        fetch asks FCM's Data API (projects.androidApps.deliveryData.list) for each project's
        Android apps (herald projects set NAME --android-app ID) with the project's own key (OAuth
        scope cloud-platform; IAM permission fcmdata.deliverydata.list, in the role Firebase Cloud
        Messaging API Admin), reads every page and stores one row per app, day and label in
        herald.delivery_data, replacing the days FCM gave. A project without apps, or whose key may
        not read the data, is skipped with one line saying what is missing. Exit status 0 when
        every project asked was fetched (a project without apps is only noted unless named), 1
        otherwise. A running herald work fetches once a day by itself (its maintenance leader).
        status lists each FCM project's apps and last fetch. herald campaigns show ID and the
        dashboard's campaign page show a campaign's days beside what Herald sent.
        """)

    static func run(arguments: [String]) throws -> Int32 {
        let parsed = try parse(command: "delivery-data", arguments: arguments, options: options, positional: true)
        guard let action = parsed.positional.first, ["fetch", "status"].contains(action), parsed.positional.count == 1 else {
            throw UsageError("herald delivery-data: give an action: fetch or status; see herald delivery-data --help")
        }
        for flag in ["project", "days"] where parsed.values[flag] != nil && action != "fetch" {
            throw UsageError("herald delivery-data \(action): --\(flag) applies to fetch only")
        }
        if parsed.has("json") && action != "status" { throw UsageError("herald delivery-data \(action): --json applies to status only") }
        if action == "status" { return try status(parsed) }
        return try fetch(parsed)
    }

    static func fetch(_ parsed: ParsedOptions) throws -> Int32 {
        var days: Int?
        if parsed.values["days"] != nil { days = try parsed.int("days", default: 0, minimum: 1) }
        let log = try RunEnvironment.logger(parsed, prefix: "herald delivery-data")
        // Before any key is read or request made: a plain-http URL to another host is refused here.
        try RunEnvironment.checkTransport(parsed, log: log)
        let connection = try operationsDatabase(parsed)
        let named = parsed.all("project")
        var projects: [Project] = []
        if named.isEmpty {
            projects = try ProjectRegistry.list(connection)
            guard !projects.isEmpty else {
                print("no FCM projects registered; herald projects add NAME --credentials FILE registers one, herald projects set NAME --android-app ID names its apps")
                return 0
            }
        } else {
            for name in named {
                do { projects.append(try Project.load(connection, name: name)) } catch {
                    throw UsageError("herald delivery-data fetch: \(error)")
                }
            }
        }
        var settings = DeliveryDataSettings(baseURL: try parsed.httpURL("fcm-data-url") ?? FCMDataAPI.defaultBaseURL)
        settings.caFile = parsed.string("ca-file")
        settings.days = days
        // Read after checkTransport, which sets HERALD_ALLOW_INSECURE_TRANSPORT when allowed.
        settings.environment = ProcessInfo.processInfo.environment
        let fetcher = try DeliveryDataFetcher(settings: settings)
        var status: Int32 = 0
        for project in projects {
            let report = fetcher.fetch(connection, project: project)
            switch report.outcome {
            case .fetched:
                print(report.line)
            case .skipped where project.androidApps.isEmpty && named.isEmpty:
                // Fetching every project: one without apps is not asked, and says so.
                print(report.line)
            case .skipped, .failed:
                printError("herald delivery-data fetch: \(report.line)")
                status = 1
            }
        }
        return status
    }

    static func status(_ parsed: ParsedOptions) throws -> Int32 {
        let statuses = try DeliveryData.statuses(try operationsDatabase(parsed))
        if parsed.has("json") {
            print(JSONValue.array(statuses.map(\.json)).serialized)
            return 0
        }
        guard !statuses.isEmpty else {
            print("no FCM projects registered; herald projects add NAME --credentials FILE registers one")
            return 0
        }
        var rows = [["PROJECT", "ANDROID APPS", "LAST FETCH", "OUTCOME", "ROWS", "LATEST DAY"]]
        for s in statuses {
            rows.append([s.project, s.androidApps.isEmpty ? "-" : s.androidApps.joined(separator: ","), s.attemptedAt ?? "never",
                         s.outcome.map { $0 + (s.reason.map { ": " + $0 } ?? "") } ?? "-", String(s.rowsHeld), s.latestDay ?? "-"])
        }
        printColumns(rows)
        return 0
    }
}
