import Foundation
import HTTPServer
import JSON
import Postgres
import Queue

/// `/campaigns`: a progress bar per campaign with Pause, Resume and Cancel; the JSON API for
/// scripts; and the campaign gauges of /metrics.
enum CampaignPages {
    /// Campaigns the page and `GET /api/campaigns` show by default, newest first.
    static let listLimit = 100
    /// Campaigns labelled by name on /metrics at most (bounded cardinality).
    static let metricsLimit = 50

    /// A refusal of the SQL functions as the answer it deserves: 404 for an unknown id, 409 for
    /// a state that forbids the action, 400 for a malformed value.
    static func steering<T>(_ body: () throws -> T) throws -> T {
        do { return try body() } catch let error as AdminError {
            switch error.kind {
            case .notFound: throw DashboardError(404, error.description)
            case .conflict: throw DashboardError(409, error.description)
            case .badInput: throw DashboardError(400, error.description)
            }
        }
    }

    static func change(_ request: DashboardRequest, _ action: String) throws -> CampaignChange {
        let id = request.id("id")
        return try steering {
            try request.database { connection in
                switch action {
                case "pause": return try Campaigns.pause(connection, id: id, source: request.source)
                case "resume": return try Campaigns.resume(connection, id: id, source: request.source)
                default: return try Campaigns.cancel(connection, id: id, source: request.source)
                }
            }
        }
    }

    // MARK: page

    /// The bar's parts in the order drawn; what is left of the bar is pending.
    static let segmentColours: [(name: String, colour: String)] = [
        ("completed", "#3b6fd8"), ("dead", "#d8453b"), ("discarded", "#8a93a6"), ("cancelled", "#c9ced8"), ("running", "#8fb0ee"),
    ]

    static func page(_ request: DashboardRequest) throws -> HTTPServerResponse {
        let dashboard = request.dashboard
        let campaigns = try request.database { try Campaigns.list($0, limit: listLimit) }
        var body = notice(request.http) ?? ""
        let swatches = segmentColours.map { "<span class=\"swatch\" style=\"background:\($0.colour)\"></span> \($0.name)" }
        body += "<p class=\"legend\">\(swatches.joined(separator: " ")); the rest is pending. Pause holds a campaign back on every pool;"
            + " Cancel turns its pending jobs into cancelled ones and cannot be undone.</p>"
        if campaigns.isEmpty {
            body += "<p>No campaigns yet. Create one in SQL with <code>herald.create_campaign(name)</code> and fill it with <code>INSERT INTO herald.jobs (..., campaign_id) SELECT ...</code>.</p>"
        }
        for campaign in campaigns {
            body += card(campaign, request: request)
        }
        if campaigns.count == listLimit {
            body += "<p class=\"legend\">The newest \(listLimit) campaigns; <code>herald campaigns list --limit N</code> shows more.</p>"
        }
        return .html(200, HTML.layout(title: "Campaigns", current: "/campaigns", body: body, dashboard: dashboard, session: request.session))
    }

    /// One campaign: its name and state, a stacked bar (completed, dead, discarded, cancelled,
    /// running, pending), the counts, rate and ETA, and the buttons its state allows.
    static func card(_ c: CampaignProgress, request: DashboardRequest) -> String {
        let counts = [c.completed, c.dead, c.discarded, c.cancelled, c.running]
        var segments = ""
        if c.total > 0 {
            for ((name, colour), count) in zip(segmentColours, counts) where count > 0 {
                let width = Double(count) / Double(c.total) * 100
                segments += "<span class=\"seg \(name)\" style=\"width:\(String(format: "%.3f", width))%;background:\(colour)\" title=\"\(count) \(name)\"></span>"
            }
        }
        var figures = "\(c.pending) pending · \(c.running) running · \(c.completed) completed · \(c.dead) dead · \(c.discarded) discarded · \(c.cancelled) cancelled"
        figures += " · \(c.sentLastMinute) sent \(c.sentWindowPhrase)"
        if let eta = c.eta, let seconds = c.etaSeconds { figures += " · ETA \(eta) (in \(HTML.formatAge(seconds)))" }
        var settings: [String] = []
        if let rate = c.maxPerSecond { settings.append("at most \(numberText(rate))/s") }
        if let label = c.analyticsLabel { settings.append("label \(label)") }
        settings.append("max_errors \(c.maxErrors)")
        var buttons = ""
        if c.canPause {
            buttons += HTML.actionButton("Pause", action: "/campaigns/\(c.id)/pause", session: request.session, dashboard: request.dashboard)
        }
        if c.canResume {
            buttons += " " + HTML.actionButton("Resume", action: "/campaigns/\(c.id)/resume", session: request.session, dashboard: request.dashboard)
        }
        if c.canCancel {
            buttons += " " + HTML.actionButton("Cancel", action: "/campaigns/\(c.id)/cancel", session: request.session,
                                               dashboard: request.dashboard, danger: true)
        }
        let reason = c.state == "paused" ? c.pausedReason.map { "<div class=\"reason\">\(HTML.escape($0))</div>" } ?? "" : ""
        return """
            <div class="letter campaign" id="campaign-\(c.id)">
            <div class="meta">Campaign \(c.id) · <strong><a href="/campaigns/\(c.id)">\(HTML.escape(c.name))</a></strong> · <span class="state">\(HTML.escape(c.state))</span> · \(HTML.escape(settings.joined(separator: ", "))) · created \(HTML.escape(c.createdAt))</div>
            \(reason)
            <div class="bar" role="progressbar" aria-valuemin="0" aria-valuemax="\(c.total)" aria-valuenow="\(c.done)">\(segments)</div>
            <div><strong>\(String(format: "%.1f", c.fractionDone * 100)) %</strong> · \(c.done) of \(c.total) done</div>
            <div class="meta figures">\(HTML.escape(figures))</div>
            \(buttons)
            </div>
            """
    }

    /// `/campaigns/:id`: the campaign's card and, per day, what Herald sent beside what FCM's
    /// Data API reports reached the Android devices (or why FCM's numbers cannot be had).
    static func detail(_ request: DashboardRequest) throws -> HTTPServerResponse {
        let id = request.id("id")
        let found = try request.database { connection -> (CampaignProgress, CampaignDelivery?)? in
            guard let campaign = try Campaigns.get(connection, id: id) else { return nil }
            return (campaign, try DeliveryData.campaign(connection, campaign))
        }
        guard let (campaign, delivery) = found else { throw DashboardError(404, "no campaign with id \(id)") }
        var body = card(campaign, request: request)
        if let delivery { body += deliverySection(delivery) }
        body += "<p class=\"legend\"><a href=\"/campaigns\">All campaigns</a> · <code>herald campaigns show \(campaign.id)</code> shows the same.</p>"
        return .html(200, HTML.layout(title: "Campaign \(campaign.id) · \(campaign.name)", current: "/campaigns", body: body, dashboard: request.dashboard, session: request.session))
    }

    /// The shares of a day's bar, in the order drawn; what is left is unaccounted for by FCM.
    static let deliveryColours: [(column: String, name: String, colour: String)] = [
        ("delivered", "delivered", "#3b6fd8"), ("pending", "pending", "#8fb0ee"), ("collapsed", "collapsed", "#8a93a6"), ("dropped", "dropped", "#d8453b"),
    ]

    static func deliverySection(_ d: CampaignDelivery) -> String {
        var html = "<h2 id=\"delivery\">What reached the phones</h2>"
        html += "<p class=\"legend\">Per day, what Herald sent (accepted by the provider) beside what FCM's Data API reports of the campaign's analytics label"
            + "\(d.analyticsLabel.map { " <code>\(HTML.escape($0))</code>" } ?? "") in its project's Android apps: messages FCM accepted for devices that share usage statistics,"
            + " and their shares delivered, pending, collapsed and dropped. Days end at midnight America/Los_Angeles, as FCM's; FCM reports a day a day or more later.</p>"
        if let warning = d.labelPlace?.warning { html += "<p class=\"warning\" id=\"label-warning\">\(HTML.escape(warning))</p>" }
        if let why = d.unavailable {
            html += "<p class=\"banner\" id=\"delivery-unavailable\">FCM's numbers: none, \(HTML.escape(why)).</p>"
        } else if let note = d.fetchNote {
            html += "<p class=\"warning\" id=\"delivery-note\">\(HTML.escape(note))</p>"
        }
        guard !d.days.isEmpty else { return html + "<p>Nothing sent yet.</p>" }
        func share(_ value: Double?) -> String { value.map { String(format: "%.1f %%", $0) } ?? "–" }
        html += "<table id=\"delivery-days\"><thead><tr><th>Day</th><th>Sent</th><th>FCM accepted</th><th>Delivered</th><th>Pending</th><th>Collapsed</th><th>Dropped</th><th>Delivered without delay</th><th></th><th>FCM's numbers</th></tr></thead><tbody>"
        for day in d.days {
            html += "<tr id=\"day-\(HTML.escape(day.day))\"><td style=\"white-space:nowrap\">\(HTML.escape(day.day))</td><td class=\"sent\">\(day.sent)</td>"
            guard day.reported else {
                let why = d.unavailable == nil ? d.missingDayNote : "–"
                html += "<td class=\"accepted\">–</td><td>–</td><td>–</td><td>–</td><td>–</td><td>–</td><td></td><td class=\"source\">\(HTML.escape(why))</td></tr>"
                continue
            }
            let shares = ["delivered": day.shares["delivered"], "pending": day.shares["pending"], "collapsed": day.shares["collapsed"], "dropped": day.dropped]
            var bar = ""
            for part in deliveryColours {
                guard let value = shares[part.column] ?? nil, value > 0 else { continue }
                bar += "<span class=\"seg \(part.name)\" style=\"width:\(String(format: "%.3f", min(100, value)))%;background:\(part.colour)\" title=\"\(String(format: "%.1f", value)) % \(part.name)\"></span>"
            }
            var source = "fetched \(day.fcmFetchedAt ?? "")"
            if day.fcmApps > 1 { source += " from \(day.fcmApps) apps" }
            if day.campaignsWithLabel > 1 { source += "; the label is shared by \(day.campaignsWithLabel) campaigns that day: the figures are theirs together" }
            html += "<td class=\"accepted\">\(day.fcmAccepted.map(String.init) ?? "–")</td><td class=\"delivered\">\(share(day.shares["delivered"]))</td>"
                + "<td class=\"pending\">\(share(day.shares["pending"]))</td><td class=\"collapsed\">\(share(day.shares["collapsed"]))</td>"
                + "<td class=\"dropped\">\(share(day.dropped))</td><td class=\"no-delay\">\(share(day.shares["delivered_no_delay"]))</td>"
                + "<td><div class=\"bar\" style=\"width:12em\">\(bar)</div></td><td class=\"source\">\(HTML.escape(source))</td></tr>"
        }
        return html + "</tbody></table>"
    }

    /// `GET /api/campaigns/:id/delivery`: the same as JSON (`herald campaigns show ID --json`'s `delivery`).
    static func apiDelivery(_ request: DashboardRequest) throws -> HTTPServerResponse {
        let id = request.id("id")
        let delivery = try request.database { connection -> CampaignDelivery? in
            guard let campaign = try Campaigns.get(connection, id: id) else { return nil }
            return try DeliveryData.campaign(connection, campaign)
        }
        guard let delivery else { throw DashboardError(404, "no campaign with id \(id)") }
        return .json(200, delivery.json)
    }

    /// The notice after an action, built from fixed words and numbers only.
    static func notice(_ http: HTTPServerRequest) -> String? {
        guard let id = Int(http.queryValue("id") ?? "") else { return nil }
        let count = Int(http.queryValue("count") ?? "") ?? 0
        let text: String
        switch http.queryValue("done") {
        case "paused": text = "Paused campaign \(id)."
        case "resumed": text = "Resumed campaign \(id)."
        case "cancelled": text = "Cancelled campaign \(id): \(count) job\(count == 1 ? "" : "s") cancelled."
        case "unchanged": text = "Campaign \(id) was in that state already; nothing changed."
        default: return nil
        }
        return "<p class=\"notice\" id=\"notice\">\(text)</p>"
    }

    static func pageAction(_ request: DashboardRequest, _ action: String) throws -> HTTPServerResponse {
        let result = try change(request, action)
        let done = !result.changed ? "unchanged" : action == "pause" ? "paused" : action == "resume" ? "resumed" : "cancelled"
        var pairs = [("done", done), ("id", String(result.campaign.id))]
        if action == "cancel" { pairs.append(("count", String(result.cancelledJobs))) }
        return .redirect("/campaigns?" + Pages.query(pairs) + "#campaign-\(result.campaign.id)")
    }

    static func pause(_ request: DashboardRequest) throws -> HTTPServerResponse { try pageAction(request, "pause") }
    static func resume(_ request: DashboardRequest) throws -> HTTPServerResponse { try pageAction(request, "resume") }
    static func cancel(_ request: DashboardRequest) throws -> HTTPServerResponse { try pageAction(request, "cancel") }

    // MARK: API

    static func apiList(_ request: DashboardRequest) throws -> HTTPServerResponse {
        let limit = try Filters.integer(request.http.queryValue("limit"), name: "limit", default: listLimit, range: 1...1000)
        let campaigns = try request.database { try Campaigns.list($0, limit: limit) }
        return .json(200, ["campaigns": .array(campaigns.map(\.json))])
    }

    static func apiGet(_ request: DashboardRequest) throws -> HTTPServerResponse {
        let id = request.id("id")
        guard let campaign = try request.database({ try Campaigns.get($0, id: id) }) else {
            throw DashboardError(404, "no campaign with id \(id)")
        }
        return .json(200, campaign.json)
    }

    static func apiAction(_ request: DashboardRequest, _ action: String) throws -> HTTPServerResponse {
        let result = try change(request, action)
        var object = JSONObject()
        object["changed"] = .bool(result.changed)
        if action == "cancel" { object["cancelled_jobs"] = JSONValue(result.cancelledJobs) }
        object["campaign"] = result.campaign.json
        return .json(200, .object(object))
    }

    static func apiPause(_ request: DashboardRequest) throws -> HTTPServerResponse { try apiAction(request, "pause") }
    static func apiResume(_ request: DashboardRequest) throws -> HTTPServerResponse { try apiAction(request, "resume") }
    static func apiCancel(_ request: DashboardRequest) throws -> HTTPServerResponse { try apiAction(request, "cancel") }

    // MARK: metrics

    static let metricStates = ["pending", "running", "completed", "dead", "discarded", "cancelled"]
    static let campaignStates = ["scheduled", "running", "paused", "cancelled", "finished"]

    /// Jobs per campaign and state, the last minute's sends and the campaign's state, labelled
    /// by name for at most `metricsLimit` campaigns that are not over since more than a day:
    /// the number of series stays bounded however many campaigns the table holds.
    static func metricsText(_ connection: PGConnection) throws -> String {
        let (shown, left) = try Campaigns.labelled(connection, limit: metricsLimit)
        var lines: [String] = []
        lines.append("# HELP herald_campaign_jobs Jobs of a campaign by state (every job in exactly one); campaigns finished or cancelled over a day ago are left out, and at most \(metricsLimit) are shown.")
        lines.append("# TYPE herald_campaign_jobs gauge")
        for c in shown {
            let counts = [c.pending, c.running, c.completed, c.dead, c.discarded, c.cancelled]
            for (state, count) in zip(metricStates, counts) {
                lines.append("herald_campaign_jobs{campaign=\"\(Metrics.label(c.name))\",state=\"\(state)\"} \(count)")
            }
        }
        lines.append("# HELP herald_campaign_sent_last_minute Jobs of a campaign completed in the last minute.")
        lines.append("# TYPE herald_campaign_sent_last_minute gauge")
        for c in shown {
            lines.append("herald_campaign_sent_last_minute{campaign=\"\(Metrics.label(c.name))\"} \(c.sentLastMinute)")
        }
        lines.append("# HELP herald_campaign_state 1 for the state the campaign is in, 0 for the others.")
        lines.append("# TYPE herald_campaign_state gauge")
        for c in shown {
            for state in campaignStates {
                lines.append("herald_campaign_state{campaign=\"\(Metrics.label(c.name))\",state=\"\(state)\"} \(c.state == state ? 1 : 0)")
            }
        }
        lines.append("# HELP herald_campaigns_unlabelled Campaigns not over since more than a day that were left out of the campaign series because of the limit of \(metricsLimit).")
        lines.append("# TYPE herald_campaigns_unlabelled gauge")
        lines.append("herald_campaigns_unlabelled \(left)")
        return lines.joined(separator: "\n") + "\n"
    }
}
