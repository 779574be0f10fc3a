import Foundation
import Postgres
import Queue
import Synchronization

/// FCM's delivery data, once a day (docs/campaigns.md, What reached the phones): the projects due
/// a fetch (herald.delivery_data_fetches: never asked, asked a day ago, failed an hour ago) are
/// listed on the leader's connection, and fetched on a thread and connection of their own, so
/// the store thread never waits for FCM. The days are in the database, so a new leader does not
/// fetch again what another fetched today. Each project is one log line: what was stored, or
/// why it was skipped (no Android app, or the permission its key lacks), or why it failed.
///
/// It also warns, once per campaign in the leading process, about each campaign that runs (or
/// sent today) with a label beyond the 100 FCM reports its project a day
/// (herald.campaign_label_budget): `herald.create_campaign` warned before it started, this is
/// the word when it starts.
final class DeliveryDataFetch: MaintenanceTask {
    let name = "delivery data"
    /// Seconds between two looks for due projects and started campaigns (the leader's upkeep
    /// interval: a look is two cheap statements; the fetch itself is once a day).
    let interval: Double
    let waitsForGrace = false
    let settings: DeliveryDataSettings
    let databaseURL: String
    let log: Logger

    /// The fetch in progress, if any, and the reports of those finished since the last run.
    private final class Progress: Sendable {
        struct State {
            var running = false
            var finished: [DeliveryDataFetcher.Report] = []
        }
        let state = Mutex(State())
    }
    private let progress = Progress()
    /// Campaigns already warned about (their label goes unreported), by id.
    private var warned: Set<Int> = []

    init(settings: DeliveryDataSettings, databaseURL: String, log: Logger, interval: Double = 60) {
        self.settings = settings
        self.databaseURL = databaseURL
        self.log = log
        self.interval = interval
    }

    func runOnce(_ run: MaintenanceRun) throws(PostgresError) -> MaintenanceResult {
        let finished = progress.state.withLock { state -> [DeliveryDataFetcher.Report]? in
            guard !state.running else { return nil }
            defer { state.finished = [] }
            return state.finished
        }
        var counts: [String: Int] = [:]
        for report in finished ?? [] {
            counts["delivery_data_rows", default: 0] += report.rows
            counts["delivery_data_\(report.outcome.rawValue)", default: 0] += 1
        }
        try warnAboutUnreportedCampaigns(run.connection)
        guard finished != nil else { return MaintenanceResult(counts: counts) }
        let due = try DeliveryData.dueProjects(run.connection, every: settings.every, retryFailedAfter: settings.retryFailedAfter)
        guard !due.isEmpty else { return MaintenanceResult(counts: counts) }
        // A project without apps is skipped here, at no cost; the others go to the thread. A
        // deployment where no project names an app is told nothing of it daily (debug lines).
        let anyApps = due.contains { !$0.androidApps.isEmpty }
        let skipped = due.filter { $0.androidApps.isEmpty }.map {
            DeliveryDataFetcher.Report(project: $0.name, outcome: .skipped, reason: DeliveryDataFetcher.noAppsReason($0.name))
        }
        // One statement however many projects (a registry of a thousand costs the store thread one).
        try DeliveryData.recordFetches(run.connection, skipped.map { DeliveryData.Fetch(project: $0.project, outcome: .skipped, reason: $0.reason) })
        for report in skipped {
            counts["delivery_data_skipped", default: 0] += 1
            if anyApps { log.warning(report.line) } else { log.debug(report.line) }
        }
        let names = due.filter { !$0.androidApps.isEmpty }.map(\.name)
        guard !names.isEmpty else { return MaintenanceResult(counts: counts) }
        progress.state.withLock { $0.running = true }
        let (progress, settings, databaseURL, log, interval) = (progress, settings, databaseURL, log, interval)
        let thread = Thread {
            let reports = Self.fetch(names, settings: settings, databaseURL: databaseURL, log: log, retryIn: interval)
            progress.state.withLock { state in
                state.running = false
                state.finished += reports
            }
        }
        thread.name = "herald-delivery-data"
        thread.start()
        return MaintenanceResult(counts: counts)
    }

    /// Fetches the projects named, on a connection of its own; logs each one's line.
    private static func fetch(_ names: [String], settings: DeliveryDataSettings, databaseURL: String, log: Logger,
                              retryIn interval: Double) -> [DeliveryDataFetcher.Report] {
        let connection: PGConnection
        let fetcher: DeliveryDataFetcher
        do {
            connection = try PGConnection(url: databaseURL)
            fetcher = try DeliveryDataFetcher(settings: settings)
        } catch {
            log.warning("delivery data: cannot start the fetch: \(error); tried again in \(Int(interval)) s")
            return []
        }
        var reports: [DeliveryDataFetcher.Report] = []
        for name in names {
            let project: Project
            do {
                guard let entry = try ProjectRegistry.entry(connection, name: name) else { continue }
                project = entry
            } catch {
                log.warning("delivery data: reading project \(name) failed: \(error)")
                break
            }
            let report = fetcher.fetch(connection, project: project)
            reports.append(report)
            switch report.outcome {
            case .fetched: log.info(report.line)
            case .skipped, .failed: log.warning(report.line)
            }
        }
        return reports
    }

    /// One warning per campaign that runs or sent today and whose label FCM will not report today.
    private func warnAboutUnreportedCampaigns(_ connection: PGConnection) throws(PostgresError) {
        for campaign in try DeliveryData.unreportedCampaigns(connection) where warned.insert(campaign.id).inserted {
            log.warning("campaign \(campaign.id) (\(campaign.name)) \(campaign.state): \(campaign.place.warning ?? "")")
        }
    }
}
