import HTTPServer
import Queue

/// The database's gauges in Prometheus text format, computed here once for the deployment and
/// not by every pool (pools export their own counters). Cached by `QueueStatistics`, so scrapes
/// cost the database at most one read per interval.
enum Metrics {
    static func scrape(_ request: DashboardRequest) throws -> HTTPServerResponse {
        let (snapshot, campaigns, tokens) = try request.database { connection in
            (try request.dashboard.statistics.snapshot(connection), try CampaignPages.metricsText(connection),
             try TokenCounts.read(connection))
        }
        return HTTPServerResponse(status: 200, headers: [
            HTTPHeader(name: "content-type", value: "text/plain; version=0.0.4; charset=utf-8"),
            HTTPHeader(name: "cache-control", value: "no-store"),
        ], body: Array((text(snapshot) + campaigns + text(tokens) + loginText(request.dashboard.logins.counts)).utf8))
    }

    static func loginText(_ counts: (failed: Int, refused: Int)) -> String {
        """
        # HELP herald_dashboard_login_failures_total Wrong dashboard tokens (login form or API bearer) since the dashboard started.
        # TYPE herald_dashboard_login_failures_total counter
        herald_dashboard_login_failures_total \(counts.failed)
        # HELP herald_dashboard_logins_refused_total Login attempts answered 429 because their address sent too many wrong tokens.
        # TYPE herald_dashboard_logins_refused_total counter
        herald_dashboard_logins_refused_total \(counts.refused)

        """
    }

    static func text(_ snapshot: QueueSnapshot) -> String {
        var lines: [String] = []
        let states = snapshot.states
        lines.append("# HELP herald_jobs Jobs in herald.jobs by queue and state; pending states are exact, finished states are estimated from a sample on large tables.")
        lines.append("# TYPE herald_jobs gauge")
        for queue in snapshot.queues {
            for state in states {
                lines.append("herald_jobs{queue=\"\(label(queue.name))\",state=\"\(label(state))\"} \(queue.count(state))")
            }
        }
        lines.append("# HELP herald_oldest_available_age_seconds Seconds the oldest due available job of the queue has waited past its run_at (0 when none is waiting).")
        lines.append("# TYPE herald_oldest_available_age_seconds gauge")
        for queue in snapshot.queues {
            lines.append("herald_oldest_available_age_seconds{queue=\"\(label(queue.name))\"} \(number(queue.oldestAvailableAge ?? 0))")
        }
        lines.append("# HELP herald_dead_letters Rows in herald.dead_letters by queue.")
        lines.append("# TYPE herald_dead_letters gauge")
        for queue in snapshot.queues {
            lines.append("herald_dead_letters{queue=\"\(label(queue.name))\"} \(queue.deadLetters)")
        }
        return lines.joined(separator: "\n") + "\n"
    }

    static func text(_ tokens: TokenCounts) -> String {
        [
            "# HELP herald_device_tokens Tokens in herald.device_tokens: fresh, or stale (not reported for the aging rule's stale_after).",
            "# TYPE herald_device_tokens gauge",
            "herald_device_tokens{state=\"fresh\"} \(tokens.fresh)",
            "herald_device_tokens{state=\"stale\"} \(tokens.stale)",
            "# HELP herald_pruned_tokens Tokens in herald.pruned_tokens: unregistered (FCM said so) or idle (the aging rule's prune_after).",
            "# TYPE herald_pruned_tokens gauge",
            "herald_pruned_tokens{reason=\"unregistered\"} \(tokens.prunedUnregistered)",
            "herald_pruned_tokens{reason=\"idle\"} \(tokens.prunedIdle)",
        ].joined(separator: "\n") + "\n"
    }

    /// A label value as the exposition format wants it: backslash, double quote and line feed escaped.
    static func label(_ value: String) -> String {
        var out = ""
        for character in value {
            switch character {
            case "\\": out += "\\\\"
            case "\"": out += "\\\""
            case "\n": out += "\\n"
            default: out.append(character)
            }
        }
        return out
    }

    static func number(_ value: Double) -> String {
        value == value.rounded() && abs(value) < 1e15 ? String(Int(value)) : String(format: "%.3f", value)
    }
}
