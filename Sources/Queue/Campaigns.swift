import JSON
import Postgres

/// One row of herald.campaign_progress with the campaign's settings, as the shell, the pages
/// and the API show it. Every job of the campaign is in exactly one of pending, running,
/// completed, dead, discarded (pruned included) and cancelled.
public struct CampaignProgress: Sendable, Equatable {
    public var id: Int
    public var name: String
    /// scheduled, running, paused, cancelled or finished.
    public var state: String
    public var total: Int
    public var pending: Int
    public var running: Int
    public var completed: Int
    public var dead: Int
    public var discarded: Int
    public var cancelled: Int
    /// Jobs completed in the last minute.
    public var sentLastMinute: Int
    /// RFC 3339 timestamps (UTC).
    public var createdAt: String
    public var startedAt: String?
    public var finishedAt: String?
    /// When the pending jobs will have gone at the last minute's rate (nil: not running, or no rate yet).
    public var eta: String?
    public var etaSeconds: Double?
    public var maxPerSecond: Double?
    public var analyticsLabel: String?
    public var maxErrors: Int
    /// Why it is paused: by hand, or by itself after max_errors dead letters.
    public var pausedReason: String?
    /// The seconds `sentLastMinute` counts over: 60, or the time since the campaign's first
    /// claim when that is shorter (its rate and ETA are not diluted by a minute it did not run).
    public var rateWindow: Double = 60

    /// Jobs sent a second over `rateWindow`.
    public var ratePerSecond: Double { Double(sentLastMinute) / max(1, rateWindow) }
    /// How `sentLastMinute` reads: "in the last minute", or "in the 42 s since it started".
    public var sentWindowPhrase: String {
        rateWindow < 59.5 ? "in the \(Int(rateWindow.rounded())) s since it started" : "in the last minute"
    }

    /// Jobs that will not be sent again: completed, dead, discarded or cancelled.
    public var done: Int { completed + dead + discarded + cancelled }
    /// The part done, 0...1 (1 for a campaign with no jobs that is over).
    public var fractionDone: Double {
        total > 0 ? min(1, Double(done) / Double(total)) : (isOver ? 1 : 0)
    }
    /// Finished or cancelled: nothing of it will be claimed again.
    public var isOver: Bool { state == "finished" || state == "cancelled" }
    /// Which actions make sense now (the others are refused or change nothing).
    public var canPause: Bool { state == "scheduled" || state == "running" }
    public var canResume: Bool { state == "paused" }
    public var canCancel: Bool { !isOver }

    public var json: JSONValue {
        var object = JSONObject()
        object["id"] = JSONValue(id)
        object["name"] = .string(name)
        object["state"] = .string(state)
        for (key, value) in [("total", total), ("pending", pending), ("running", running), ("completed", completed),
                             ("dead", dead), ("discarded", discarded), ("cancelled", cancelled),
                             ("sent_last_minute", sentLastMinute)] {
            object[key] = JSONValue(value)
        }
        object["created_at"] = .string(createdAt)
        object["started_at"] = startedAt.map { .string($0) } ?? .null
        object["finished_at"] = finishedAt.map { .string($0) } ?? .null
        object["eta"] = eta.map { .string($0) } ?? .null
        object["max_per_second"] = maxPerSecond.map { .number(numberText($0)) } ?? .null
        object["analytics_label"] = analyticsLabel.map { .string($0) } ?? .null
        object["max_errors"] = JSONValue(maxErrors)
        object["paused_reason"] = pausedReason.map { .string($0) } ?? .null
        object["rate_window_seconds"] = .number(String(format: "%.1f", rateWindow))
        return .object(object)
    }
}

/// What a pause, resume or cancel did.
public struct CampaignChange: Sendable {
    /// The campaign afterwards.
    public var campaign: CampaignProgress
    /// False when it was in that state already (nothing was recorded in herald.admin_log).
    public var changed: Bool
    /// For a cancel: how many jobs not yet claimed became `cancelled`.
    public var cancelledJobs: Int
}

/// The SQL of watching and steering campaigns (herald.campaign_progress, herald.pause_campaign,
/// resume_campaign, cancel_campaign). Every action that changed something is recorded in
/// herald.admin_log in the same transaction as the change; a refused one changes nothing.
public enum Campaigns {
    /// The rows of campaigns_list.sql, campaign.sql and campaigns_labelled.sql, which share their columns.
    static func rows(_ result: PGResult) -> [CampaignProgress] {
        (0..<result.rowCount).map { row in
            CampaignProgress(
                id: result.int(row, 0) ?? 0, name: result[row, 1] ?? "", state: result[row, 2] ?? "",
                total: result.int(row, 3) ?? 0, pending: result.int(row, 4) ?? 0, running: result.int(row, 5) ?? 0,
                completed: result.int(row, 6) ?? 0, dead: result.int(row, 7) ?? 0, discarded: result.int(row, 8) ?? 0,
                cancelled: result.int(row, 9) ?? 0, sentLastMinute: result.int(row, 10) ?? 0, createdAt: result[row, 11] ?? "",
                startedAt: result[row, 12], finishedAt: result[row, 13], eta: result[row, 14], etaSeconds: result.double(row, 15),
                maxPerSecond: result.double(row, 16), analyticsLabel: result[row, 17], maxErrors: result.int(row, 18) ?? 0,
                pausedReason: result[row, 19], rateWindow: result.double(row, 20) ?? 60)
        }
    }

    /// The newest campaigns first, at most `limit`.
    public static func list(_ connection: PGConnection, limit: Int = 200) throws(PostgresError) -> [CampaignProgress] {
        rows(try connection.query(SQL.campaignsList, [.int(max(0, limit))]))
    }

    public static func get(_ connection: PGConnection, id: Int) throws(PostgresError) -> CampaignProgress? {
        rows(try connection.query(SQL.campaign, [.int(id)])).first
    }

    /// The campaigns /metrics labels by name: those not finished or cancelled more than a day
    /// ago, unfinished ones first, then the newest, at most `limit`; and how many more there were.
    public static func labelled(_ connection: PGConnection, limit: Int) throws(PostgresError) -> (shown: [CampaignProgress], left: Int) {
        let shown = rows(try connection.query(SQL.campaignsLabelled, [.int(max(0, limit))]))
        let all = try connection.query(SQL.campaignsLabelledCount).int(0, 0) ?? 0
        return (shown, max(0, all - shown.count))
    }

    /// No job of the campaign is claimed until it is resumed; requests in flight finish.
    public static func pause(_ connection: PGConnection, id: Int, source: String) throws -> CampaignChange {
        try act(connection, id: id, function: "pause_campaign", source: source)
    }

    /// Claims go on; max_errors counts dead letters afresh. A cancelled campaign is refused.
    public static func resume(_ connection: PGConnection, id: Int, source: String) throws -> CampaignChange {
        try act(connection, id: id, function: "resume_campaign", source: source)
    }

    /// Jobs not yet claimed become `cancelled` (`cancelledJobs` says how many); requests in
    /// flight finish; the campaign takes no new jobs.
    public static func cancel(_ connection: PGConnection, id: Int, source: String) throws -> CampaignChange {
        try act(connection, id: id, function: "cancel_campaign", source: source)
    }

    static func act(_ connection: PGConnection, id: Int, function: String, source: String) throws -> CampaignChange {
        try connection.transaction {
            let before = try connection.query(SQL.campaignLock, [.int(id)])
            let sql: String
            switch function {
            case "pause_campaign": sql = SQL.pauseCampaign
            case "resume_campaign": sql = SQL.resumeCampaign
            default: sql = SQL.cancelCampaign
            }
            let result = try AdminError.translating { try connection.query(sql, [.int(id)]) }
            let cancelledJobs = function == "cancel_campaign" ? (result.int(0, 0) ?? 0) : 0
            let stateBefore = before[0, 0] ?? ""
            guard let after = try get(connection, id: id) else {
                throw AdminError(.notFound, "no campaign with id \(id)")
            }
            let stateAfter = try connection.query(SQL.campaignState, [.int(id)])[0, 0] ?? ""
            let changed = stateAfter != stateBefore || cancelledJobs > 0
            if changed {
                var details = JSONObject()
                details["campaign"] = .string(before[0, 1] ?? "")
                details["from"] = .string(stateBefore)
                details["to"] = .string(stateAfter)
                if function == "cancel_campaign" { details["cancelled_jobs"] = JSONValue(cancelledJobs) }
                try AdminLog.record(connection, action: function, ids: [id], details: .object(details), source: source)
            }
            return CampaignChange(campaign: after, changed: changed, cancelledJobs: cancelledJobs)
        }
    }
}
