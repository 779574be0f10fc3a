import HTTPServer
import JSON
import Queue

/// The database's gauges in Prometheus text format, computed here once for the deployment and
/// not by every pool (pools export their own counters). Cached by `QueueStatistics`, so scrapes
/// cost the database at most one read per interval.
enum Metrics {
    static func scrape(_ request: DashboardRequest) throws -> HTTPServerResponse {
        let (snapshot, campaigns, tokens, projects) = try request.database { connection in
            (try request.dashboard.statistics.snapshot(connection), try CampaignPages.metricsText(connection),
             try TokenCounts.read(connection), try ProjectOverview.read(connection))
        }
        return HTTPServerResponse(status: 200, headers: [
            HTTPHeader(name: "content-type", value: "text/plain; version=0.0.4; charset=utf-8"),
            HTTPHeader(name: "cache-control", value: "no-store"),
        ], body: Array((text(snapshot) + text(projects) + campaigns + text(tokens) + loginText(request.dashboard.logins.counts)).utf8))
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
        lines.append("# HELP herald_oldest_available_age_seconds Seconds the oldest due available job of the queue has waited past its run_at (0 when none is waiting); jobs a paused registry project holds back are left out (herald_project_paused_oldest_age_seconds).")
        lines.append("# TYPE herald_oldest_available_age_seconds gauge")
        for queue in snapshot.queues {
            lines.append("herald_oldest_available_age_seconds{queue=\"\(label(queue.name))\"} \(numberText(queue.oldestAvailableAge ?? 0, decimals: 3))")
        }
        lines.append("# HELP herald_dead_letters Rows in herald.dead_letters by queue.")
        lines.append("# TYPE herald_dead_letters gauge")
        for queue in snapshot.queues {
            lines.append("herald_dead_letters{queue=\"\(label(queue.name))\"} \(queue.deadLetters)")
        }
        return lines.joined(separator: "\n") + "\n"
    }

    /// Pending jobs and dead letters per registry project, once a project is registered (or a job
    /// names one). The jobs of no project carry no `project` label, as on a pool's /metrics.
    static func text(_ projects: [ProjectOverview]) -> String {
        guard projects.contains(where: { $0.name != nil }) else { return "" }
        func labels(_ p: ProjectOverview, _ more: String = "") -> String {
            let all = [p.name.map { "project=\"\(label($0))\"" }, more.isEmpty ? nil : more].compactMap { $0 }
            return all.isEmpty ? "" : "{" + all.joined(separator: ",") + "}"
        }
        var lines = ["# HELP herald_project_jobs Pending jobs by registry project (none: the jobs of no project) and state; exact, from the pending partial indexes.",
                     "# TYPE herald_project_jobs gauge"]
        for p in projects {
            for (state, count) in [("available", p.available), ("scheduled", p.scheduled), ("running", p.running)] {
                lines.append("herald_project_jobs\(labels(p, "state=\"\(state)\"")) \(count)")
            }
        }
        lines += ["# HELP herald_project_dead_letters Rows in herald.dead_letters by registry project (none: the jobs of no project).",
                  "# TYPE herald_project_dead_letters gauge"]
        for p in projects { lines.append("herald_project_dead_letters\(labels(p)) \(p.dead)") }
        lines += ["# HELP herald_project_paused 1 while the registry project is paused (an operator's pause, or its key refused).",
                  "# TYPE herald_project_paused gauge"]
        for p in projects where p.name != nil { lines.append("herald_project_paused\(labels(p)) \(p.pausedReason == nil ? 0 : 1)") }
        // What a pause holds back is measured here and not in herald_oldest_available_age_seconds:
        // the alert on it names the project and why it is paused, not a queue the pools neglect.
        func held(_ p: ProjectOverview) -> String { labels(p, p.pauseCause.map { "cause=\"\($0)\"" } ?? "") }
        lines += ["# HELP herald_project_paused_jobs Due jobs the registry project's pause holds back, by what decided it (credentials, operator, quota, fcm_unreachable, apns_auth, apns_topic, apns_url, apns_unreachable; no cause: not paused). herald_oldest_available_age_seconds leaves them out.",
                  "# TYPE herald_project_paused_jobs gauge"]
        for p in projects where p.name != nil { lines.append("herald_project_paused_jobs\(held(p)) \(p.pausedJobs)") }
        lines += ["# HELP herald_project_paused_oldest_age_seconds Seconds the oldest due job the registry project's pause holds back has waited past its run_at (0 when it holds none).",
                  "# TYPE herald_project_paused_oldest_age_seconds gauge"]
        for p in projects where p.name != nil { lines.append("herald_project_paused_oldest_age_seconds\(held(p)) \(numberText(p.pausedOldestAge ?? 0, decimals: 3))") }
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
}
