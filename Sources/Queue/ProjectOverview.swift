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
    /// Set while an operator (or a refused key) has paused the project: why.
    public var pausedReason: String?
    /// The entry's max_rate (nil: the pools' --max-rate).
    public var maxRate: Double?
    /// The FCM project's rate and quota pause (herald.project_rates, herald.project_pauses); nil
    /// when nothing was sent for it yet, or for the jobs of no project (their FCM project is the
    /// pools' key's, which the database does not know).
    public var rate: ProjectRate?

    public init(name: String?) { self.name = name }

    /// `enabled`, or `paused` while an operator's (or a refused key's) pause holds.
    public var state: String { pausedReason == nil ? "enabled" : "paused" }

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
        return .object(object)
    }

    /// The jobs of no project first, then every registry entry by name, and any project name
    /// jobs or dead letters still carry that the registry no longer has (its pending work kept).
    /// Empty on a schema without projects (before migration 190).
    /// `rates`: `ProjectRate.all` when the caller has read it already (nil: read here).
    public static func read(_ connection: PGConnection, rates known: [ProjectRate]? = nil) throws(PostgresError) -> [ProjectOverview] {
        guard try connection.query(SQL.jobsHaveProject).bool(0, 0) ?? false else { return [] }
        var byName: [String: ProjectOverview] = ["": ProjectOverview(name: nil)]
        var order = [""]
        for entry in try ProjectRegistry.list(connection) {
            var line = ProjectOverview(name: entry.name)
            line.fcmProjectID = entry.fcmProjectID
            line.pausedReason = entry.pausedReason
            line.maxRate = entry.maxRate
            byName[entry.name] = line
            order.append(entry.name)
        }
        let counts = try connection.query(SQL.projectJobCounts)
        for row in 0..<counts.rowCount {
            let name = counts[row, 0] ?? ""
            if byName[name] == nil {
                byName[name] = ProjectOverview(name: name)
                order.append(name)
            }
            let n = counts.int(row, 2) ?? 0
            switch counts[row, 1] {
            case "available": byName[name]!.available += n
            case "scheduled": byName[name]!.scheduled += n
            case "running": byName[name]!.running += n
            default: byName[name]!.dead += n
            }
        }
        let all: [ProjectRate]
        if let known { all = known } else { all = try ProjectRate.all(connection) }
        let rates = Dictionary(all.map { ($0.projectID, $0) }, uniquingKeysWith: { first, _ in first })
        return order.map { name in
            var line = byName[name]!
            if let id = line.fcmProjectID { line.rate = rates[id] }
            return line
        }
    }
}
