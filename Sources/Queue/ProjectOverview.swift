import JSON
import Postgres

/// One line of the per-project view of `herald stats`, the dashboard's overview and its JSON
/// API: a registry project (or the jobs of no project) with its pending work, dead letters,
/// operator's pause and the adapted rate FCM's quota answers left it.
public struct ProjectOverview: Sendable, Equatable {
    /// The registry name; nil for the jobs of no project (sent with the pools' own key).
    public var name: String?
    /// The FCM project id of the registry entry; nil for the jobs of no project.
    public var fcmProjectID: String?
    /// Due jobs waiting to be claimed; jobs whose run_at is ahead count as scheduled.
    public var available = 0
    public var scheduled = 0
    public var running = 0
    public var dead = 0
    /// Seconds the oldest due available job has waited past its run_at; nil with none due.
    public var oldestAvailableAge: Double?
    /// Set while an operator (or a refused key, or Apple's refusal of an app) has paused the
    /// project: why.
    public var pausedReason: String?
    /// What decided that pause, as herald.projects.paused_cause records it (nil: not recorded).
    public var pausedCause: String?
    /// The entry's max_rate (nil: the pools' --max-rate).
    public var maxRate: Double?
    /// The FCM project's rate and quota pause (herald.project_rates, herald.project_pauses); nil
    /// when nothing was sent for it yet, or for the jobs of no project (their FCM project is the
    /// pools' key's, which the database does not know). An APNs app's: its own bucket's
    /// (`APNsApp.rateBucket`).
    public var rate: FCMProjectRate?
    /// An APNs app of the registry (it has no FCM project).
    public var apnsApp = false

    public init(name: String?) { self.name = name }

    /// `enabled`, or `paused` while an operator's (or a refused key's) pause holds.
    public var state: String { pausedReason == nil ? "enabled" : "paused" }

    /// Why the registry project's due jobs wait, while they do, by what decided it:
    /// `credentials` (its key could not be used), `operator` (herald projects pause, herald apns
    /// pause), `quota` (FCM answered QUOTA_EXCEEDED) or `fcm_unreachable` (FCM did not answer),
    /// or for an APNs app `apns_auth` (Apple refused its provider token: key, key id, team id or
    /// environment), `apns_topic` (TopicDisallowed), `apns_url` (the URL is not Apple's provider
    /// API) or `apns_unreachable` (its endpoint did not answer); nil while its jobs go, and for
    /// the jobs of no project (their pauses are the pools' key's, not the database's to know).
    public var pauseCause: String? {
        guard name != nil else { return nil }
        if let cause = Project.pauseCause(recorded: pausedCause, reason: pausedReason) { return cause }
        guard rate?.pausedFor != nil else { return nil }
        if rate?.reason?.hasPrefix("FCM_UNREACHABLE") == true { return "fcm_unreachable" }
        if rate?.reason?.hasPrefix("APNS_UNREACHABLE") == true { return "apns_unreachable" }
        return "quota"
    }

    /// The due jobs the project's pause holds back (0 while it is not paused): left out of their
    /// queue's oldest-available age, which measures the pools, and counted here instead.
    public var pausedJobs: Int { pauseCause == nil ? 0 : available }
    /// Seconds the oldest of `pausedJobs` has waited past its run_at; nil when it holds none.
    public var pausedOldestAge: Double? { pauseCause == nil || available == 0 ? nil : oldestAvailableAge }

    public var json: JSONValue {
        var object = JSONObject()
        object["project"] = name.map { .string($0) } ?? .null
        object["fcm_project_id"] = fcmProjectID.map { .string($0) } ?? .null
        object["state"] = .string(state)
        object["paused_reason"] = pausedReason.map { .string($0) } ?? .null
        object["available"] = JSONValue(available)
        object["scheduled"] = JSONValue(scheduled)
        object["running"] = JSONValue(running)
        object["dead"] = JSONValue(dead)
        object["max_rate"] = maxRate.map { JSONValue.number(numberText($0, decimals: 3)) } ?? .null
        object["rate"] = rate?.rate.map { JSONValue.number(numberText($0, decimals: 3)) } ?? .null
        object["quota_paused_seconds"] = rate?.pausedFor.map { JSONValue.number(String(format: "%.3f", $0)) } ?? .null
        object["pause_cause"] = pauseCause.map { .string($0) } ?? .null
        object["paused_jobs"] = JSONValue(pausedJobs)
        object["paused_oldest_age_seconds"] = pausedOldestAge.map { JSONValue.number(String(format: "%.3f", $0)) } ?? .null
        return .object(object)
    }

    /// The jobs of no project first, then every registry entry by name, and any project name
    /// jobs or dead letters still carry that the registry no longer has (its pending work kept).
    /// Empty on a schema without projects (before migration 190).
    /// `rates`: `FCMProjectRates.overview` when the caller has read it already (nil: read here).
    public static func read(_ connection: PGConnection, rates known: [FCMProjectRate]? = nil) throws(PostgresError) -> [ProjectOverview] {
        guard try connection.query(SQL.jobsHaveProject).bool(0, 0) ?? false else { return [] }
        var byName: [String: ProjectOverview] = ["": ProjectOverview(name: nil)]
        var order = [""]
        for entry in try ProjectRegistry.list(connection) {
            var line = ProjectOverview(name: entry.name)
            line.fcmProjectID = entry.fcmProjectID
            line.pausedReason = entry.pausedReason
            line.pausedCause = entry.pausedCause
            line.maxRate = entry.maxRate
            byName[entry.name] = line
            order.append(entry.name)
        }
        // APNs apps are registry entries too (no FCM project id), among the FCM projects by name.
        let apps = try connection.query(SQL.apnsAppsExist).bool(0, 0) ?? false ? try APNsApps.list(connection) : []
        for app in apps {
            var line = ProjectOverview(name: app.name)
            line.pausedReason = app.pausedReason
            line.pausedCause = app.pausedCause
            line.maxRate = app.maxRate
            line.apnsApp = true
            byName[app.name] = line
            order.append(app.name)
        }
        if !apps.isEmpty { order = [""] + order.dropFirst().sorted() }
        let counts = try connection.query(SQL.projectJobCounts)
        for row in 0..<counts.rowCount {
            let name = counts[row, 0] ?? ""
            if byName[name] == nil {
                byName[name] = ProjectOverview(name: name)
                order.append(name)
            }
            let n = counts.int(row, 2) ?? 0
            switch counts[row, 1] {
            case "available":
                byName[name]!.available += n
                if let age = counts.double(row, 3) { byName[name]!.oldestAvailableAge = max(0, age) }
            case "scheduled": byName[name]!.scheduled += n
            case "running": byName[name]!.running += n
            default: byName[name]!.dead += n
            }
        }
        let all: [FCMProjectRate]
        if let known { all = known } else { all = try FCMProjectRates.overview(connection) }
        let rates = Dictionary(all.map { ($0.fcmProject, $0) }, uniquingKeysWith: { first, _ in first })
        return order.map { name in
            var line = byName[name]!
            if let id = line.fcmProjectID { line.rate = rates[id] }
            if line.apnsApp, let name = line.name { line.rate = rates[APNsApp.rateBucket(name)] }
            return line
        }
    }
}
