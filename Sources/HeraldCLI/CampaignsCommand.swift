import CommandOptions
import Foundation
import Logging
import JSON
import Postgres
import Queue

enum CampaignsCommand {
    static let options: [Option] = [
        Option(name: "json", help: "list, show: print JSON (the API's fields) instead of a table."),
        Option(name: "watch", help: "show: redraw in place every --interval until the campaign is finished or cancelled (with --json: one object per line)."),
        Option(name: "interval", value: "SECONDS", help: "With --watch: seconds between redraws.", defaultText: "2"),
        Option(name: "limit", value: "N", help: "list: at most N campaigns, newest first.", defaultText: "200"),
    ] + DeadCommand.databaseOptions

    static let help = helpText(
        command: "campaigns", summary: "Watch and steer campaigns (herald.campaigns, herald.campaign_progress).",
        usage: """
        list [--json] [--limit N]
               herald campaigns show ID [--watch [--interval SECONDS]] [--json]
               herald campaigns pause ID
               herald campaigns resume ID
               herald campaigns cancel ID
        """,
        options: options,
        footer: """
        A campaign is created in SQL: herald.create_campaign(name, max_per_second, analytics_label,
        max_errors), then filled with INSERT INTO herald.jobs (..., campaign_id) SELECT .... show draws
        a progress bar with the counts, the rate of the last minute and the ETA. pause holds its jobs
        back on every pool (requests in flight finish); resume lets them go again; cancel turns the
        jobs not yet claimed into cancelled ones and prints how many. A cancelled campaign cannot be
        resumed. Every change is recorded in herald.admin_log with who ran it.
        """)

    static func run(arguments: [String]) throws -> Int32 {
        let parsed = try parse(command: "campaigns", arguments: arguments, options: options, positional: true)
        let actions = ["list", "show", "pause", "resume", "cancel"]
        guard let action = parsed.positional.first, actions.contains(action) else {
            throw UsageError("herald campaigns: give an action: list, show ID, pause ID, resume ID or cancel ID; see herald campaigns --help")
        }
        let rest = Array(parsed.positional.dropFirst())
        if parsed.has("watch") && action != "show" { throw UsageError("herald campaigns \(action): --watch applies to show only") }
        if action == "list" {
            guard rest.isEmpty else { throw UsageError("herald campaigns list: takes no id; use herald campaigns show ID") }
            let limit = try parsed.int("limit", default: 200, minimum: 1)
            let connection = try operationsDatabase(parsed)
            let campaigns = try Campaigns.list(connection, limit: limit)
            if parsed.has("json") {
                print(JSONValue.array(campaigns.map(\.json)).serialized)
            } else {
                printList(campaigns)
            }
            return 0
        }
        guard rest.count == 1 else {
            throw UsageError("herald campaigns \(action): give one campaign id (herald campaigns list shows them)")
        }
        guard let id = Int(rest[0]), id > 0 else {
            throw UsageError("herald campaigns \(action): \"\(rest[0])\" is not a campaign id; give the whole number in the ID column of herald campaigns list")
        }
        let connection = try operationsDatabase(parsed)
        switch action {
        case "show":
            let interval = try parsed.seconds("interval", default: 2)
            guard interval >= 0.1 else { throw UsageError("herald campaigns show: --interval must be at least 0.1 seconds") }
            guard parsed.has("watch") else {
                let campaign = try find(connection, id, action)
                let delivery = try DeliveryData.campaign(connection, campaign)
                if parsed.has("json") {
                    guard case .object(var object) = campaign.json else { return 0 }
                    object["delivery"] = delivery?.json ?? .null
                    print(JSONValue.object(object).serialized)
                } else {
                    print((render(campaign) + (delivery.map(renderDelivery) ?? [])).joined(separator: "\n"))
                }
                return 0
            }
            while true {
                let campaign = try find(connection, id, action)
                let frame: String
                if parsed.has("json") {
                    // For scripts: one JSON object per line, no terminal codes.
                    frame = campaign.json.serialized + "\n"
                } else {
                    // As herald stats --watch: cursor home, each line cleared to its end, the rest below cleared.
                    frame = "\u{1B}[H" + render(campaign).map { $0 + "\u{1B}[K" }.joined(separator: "\n") + "\n\u{1B}[J"
                }
                guard StandardStreams.write(frame, to: 1) else { return 0 }
                if campaign.isOver { return 0 }
                Thread.sleep(forTimeInterval: interval)
            }
        default:
            let source = shellSource()
            let change = try steering(action) {
                switch action {
                case "pause": return try Campaigns.pause(connection, id: id, source: source)
                case "resume": return try Campaigns.resume(connection, id: id, source: source)
                default: return try Campaigns.cancel(connection, id: id, source: source)
                }
            }
            let campaign = change.campaign
            let title = "campaign \(campaign.id) (\(campaign.name))"
            switch action {
            case "pause":
                print(change.changed ? "paused \(title)" : "\(title) was paused already")
            case "resume":
                print(change.changed ? "resumed \(title); it is \(campaign.state)" : "\(title) is \(campaign.state), not paused; nothing to resume")
            default:
                print("cancelled \(title): \(change.cancelledJobs) job\(change.cancelledJobs == 1 ? "" : "s") cancelled"
                      + (campaign.running > 0 ? ", \(campaign.running) in flight finishing" : ""))
            }
            return 0
        }
    }

    static func find(_ connection: PGConnection, _ id: Int, _ action: String) throws -> CampaignProgress {
        guard let campaign = try Campaigns.get(connection, id: id) else {
            throw UsageError("herald campaigns \(action): no campaign with id \(id); herald campaigns list shows the ids")
        }
        return campaign
    }

    /// Runs `body`, turning a refusal of the database into an error that names the command and
    /// the value, without PostgreSQL's context lines.
    static func steering<T>(_ action: String, _ body: () throws -> T) throws -> T {
        do { return try body() } catch let error as AdminError {
            let hint = error.kind == .notFound ? "; herald campaigns list shows the ids" : ""
            throw UsageError("herald campaigns \(action): \(error.description)\(hint)")
        }
    }

    static func printList(_ campaigns: [CampaignProgress]) {
        guard !campaigns.isEmpty else {
            print("no campaigns; create one in SQL with herald.create_campaign(name)")
            return
        }
        var rows = [["ID", "NAME", "STATE", "DONE", "TOTAL", "PENDING", "RUNNING", "COMPLETED", "DEAD", "DISCARDED", "CANCELLED", "SENT/MIN", "ETA"]]
        for c in campaigns {
            rows.append([String(c.id), c.name, c.state, String(format: "%.1f%%", c.fractionDone * 100), String(c.total), String(c.pending),
                         String(c.running), String(c.completed), String(c.dead), String(c.discarded), String(c.cancelled),
                         String(c.sentLastMinute), c.etaSeconds.map { durationText($0) } ?? "-"])
        }
        printColumns(rows)
    }

    /// The progress bar and the figures under it.
    static func render(_ c: CampaignProgress, width: Int = 40) -> [String] {
        var settings: [String] = []
        if let rate = c.maxPerSecond { settings.append("at most \(formatRate(rate))/s") }
        if let label = c.analyticsLabel { settings.append("label \(label)") }
        settings.append("max_errors \(c.maxErrors)")
        let filled = Int((c.fractionDone * Double(width)).rounded(.down))
        let bar = "[" + String(repeating: "#", count: filled) + String(repeating: ".", count: width - filled) + "]"
        var lines = [
            "campaign \(c.id)  \(c.name)  \(c.state)  (\(settings.joined(separator: ", ")))",
            "\(bar) \(String(format: "%5.1f%%", c.fractionDone * 100))  \(c.done) of \(c.total) done",
            "pending \(c.pending)  running \(c.running)  completed \(c.completed)  dead \(c.dead)  discarded \(c.discarded)  cancelled \(c.cancelled)",
        ]
        var rate = "rate: \(c.sentLastMinute) sent \(c.sentWindowPhrase) (\(formatRate(c.ratePerSecond))/s)"
        if let eta = c.eta, let seconds = c.etaSeconds {
            rate += "  ETA \(eta) (in \(durationText(seconds)))"
        } else if !c.isOver && c.pending + c.running > 0 {
            rate += c.state == "running" ? "  ETA: none yet (nothing sent in the last minute)" : "  ETA: none while \(c.state)"
        }
        lines.append(rate)
        var times = "created \(c.createdAt)"
        if let started = c.startedAt { times += "  started \(started)" }
        if let finished = c.finishedAt { times += "  \(c.state == "cancelled" ? "cancelled" : "finished") \(finished)" }
        lines.append(times)
        if let reason = c.pausedReason, c.state == "paused" { lines.append("paused: \(reason)") }
        return lines
    }

    /// What reached the phones: per day, what Herald sent beside what FCM's Data API reports of
    /// the campaign's label (or why FCM's numbers cannot be had), and the label's warning.
    static func renderDelivery(_ d: CampaignDelivery) -> [String] {
        var lines = ["", "what reached the phones (FCM's Data API: Android devices that share usage statistics; days end at midnight America/Los_Angeles):"]
        if let warning = d.labelPlace?.warning { lines.append("WARNING: \(warning)") }
        if let why = d.unavailable {
            lines.append("  FCM's numbers: none, \(why)")
        } else if let note = d.fetchNote {
            lines.append("  \(note)")
        }
        guard !d.days.isEmpty else {
            lines.append("  nothing sent yet")
            return lines
        }
        func share(_ value: Double?) -> String { value.map { String(format: "%.1f%%", $0) } ?? "-" }
        var rows = [["  DAY", "SENT", "FCM ACCEPTED", "DELIVERED", "PENDING", "COLLAPSED", "DROPPED", "NO DELAY", "FCM'S NUMBERS"]]
        for day in d.days {
            guard day.reported else {
                rows.append(["  " + day.day, String(day.sent), "-", "-", "-", "-", "-", "-", d.missingDayNote])
                continue
            }
            var source = "fetched \(day.fcmFetchedAt ?? "")"
            if day.fcmApps > 1 { source += " (\(day.fcmApps) apps)" }
            if day.campaignsWithLabel > 1 { source += "; label shared by \(day.campaignsWithLabel) campaigns that day" }
            rows.append(["  " + day.day, String(day.sent), day.fcmAccepted.map(String.init) ?? "-", share(day.shares["delivered"]),
                         share(day.shares["pending"]), share(day.shares["collapsed"]), share(day.dropped),
                         share(day.shares["delivered_no_delay"]), source])
        }
        lines += formatColumns(rows)
        return lines
    }

    static func formatRate(_ rate: Double) -> String {
        rate == rate.rounded() ? String(Int(rate)) : String(format: "%.1f", rate)
    }

}
