import Foundation
import HTTPServer
import JSON
import Postgres
import Queue

/// The HTML pages and the actions their forms post to. Actions answer with a redirect back to
/// the page (POST, then GET), carrying what happened as fixed notice codes, never as free text.
enum Pages {
    // MARK: overview

    static func overview(_ request: DashboardRequest) throws -> HTTPServerResponse {
        let dashboard = request.dashboard
        let (snapshot, throughput, log, topics, projects) = try request.database { connection in
            (try dashboard.statistics.snapshot(connection), try dashboard.statistics.throughput(connection),
             try AdminLog.recent(connection, limit: 5), try TopicSubscriptions.list(connection), try FCMProjectRates.overview(connection))
        }
        let tokens = try request.database { connection in try TokenCounts.read(connection) }
        let registry = try request.database { connection in try ProjectOverview.read(connection, rates: projects) }
        let shown = ["available", "scheduled", "running", "completed", "discarded", "cancelled"]
            + snapshot.states.filter { !["available", "scheduled", "running", "completed", "discarded", "cancelled"].contains($0) }
        var rows = ""
        for queue in snapshot.queues {
            var cells = "<td><a href=\"/dead-letters?queue=\(percentEncoded(queue.name))\">\(HTML.escape(queue.name))</a></td>"
            for state in shown {
                let estimated = snapshot.estimatedStates.contains(state) && queue.count(state) > 0
                cells += "<td class=\"n\">\(estimated ? "<span class=\"est\" title=\"estimated from a sample\">~</span>" : "")\(queue.count(state))</td>"
            }
            let dead = queue.deadLetters > 0 ? "<a href=\"/dead-letters?queue=\(percentEncoded(queue.name))\">\(queue.deadLetters)</a>" : "0"
            cells += "<td class=\"n\">\(dead)</td><td class=\"n\">\(HTML.formatAge(queue.oldestAvailableAge))</td>"
            rows += "<tr>\(cells)</tr>"
        }
        if snapshot.queues.isEmpty {
            rows = "<tr><td colspan=\"\(shown.count + 3)\">No jobs and no dead letters yet.</td></tr>"
        }
        let header = "<tr><th>Queue</th>" + shown.map { "<th class=\"n\">\(HTML.escape($0))</th>" }.joined()
            + "<th class=\"n\">dead</th><th class=\"n\">oldest available</th></tr>"
        var body = "<table id=\"queues\">\(header)\(rows)</table>"
        if !snapshot.estimatedStates.isEmpty {
            body += "<p class=\"legend\">~ estimated from a sample of the table (it is large); pending states are exact.</p>"
        }
        body += registryTable(registry)
        body += projectTable(projects)
        body += "<h2>Last hour</h2>" + HTML.throughputChart(throughput)
        if !topics.isEmpty {
            // Topic subscriptions Herald keeps (herald.subscribe / herald.unsubscribe).
            var rows = "<tr><th>Topic</th><th>project</th><th class=\"n\">subscribers</th><th class=\"n\">pending</th>"
                + "<th class=\"n\">removing</th><th class=\"n\">failed</th></tr>"
            for t in topics {
                rows += "<tr><td>\(HTML.escape(t.topic))</td><td>\(t.project.isEmpty ? "(the pool's)" : HTML.escape(t.project))</td>"
                    + "<td class=\"n\">\(t.subscribed)</td><td class=\"n\">\(t.pending)</td><td class=\"n\">\(t.removing)</td>"
                    + "<td class=\"n\">\(t.failed)</td></tr>"
            }
            body += "<h2>Topics</h2><table id=\"topics\">\(rows)</table>"
        }
        body += tokenTable(tokens)
        body += "<h2>Recent actions</h2>" + logTable(log) + "<p><a href=\"/admin-log\">All actions</a></p>"
        return .html(200, HTML.layout(title: "Overview", current: "/", body: body, dashboard: dashboard, session: request.session))
    }

    /// The token registry (herald.touch_token and the aging rule): fresh and stale tokens, pruned
    /// ones by why. Nothing while the registry is empty.
    static func tokenTable(_ tokens: TokenCounts) -> String {
        guard tokens != TokenCounts() else { return "" }
        return "<h2>Device tokens</h2><table id=\"tokens\"><tr><th class=\"n\">fresh</th><th class=\"n\">stale</th>"
            + "<th class=\"n\">pruned: unregistered</th><th class=\"n\">pruned: idle</th></tr>"
            + "<tr><td class=\"n\">\(tokens.fresh)</td><td class=\"n\">\(tokens.stale)</td>"
            + "<td class=\"n\">\(tokens.prunedUnregistered)</td><td class=\"n\">\(tokens.prunedIdle)</td></tr></table>"
            + "<p class=\"legend\">Stale: not reported through herald.touch_token for the aging rule's stale_after; campaigns can skip them. "
            + "Idle tokens are pruned after prune_after (herald.set_token_aging).</p>"
    }

    /// The registry's projects beside the jobs of no project: pending jobs, dead letters, the
    /// operator's pause and the adapted rate. Nothing while no project is registered or named.
    static func registryTable(_ projects: [ProjectOverview]) -> String {
        guard projects.contains(where: { $0.name != nil }) else { return "" }
        func rate(_ value: Double?) -> String { value.map { "\(Int($0.rounded()))/s" } ?? "-" }
        var rows = ""
        for p in projects {
            // The pause's cause first (what decided it), then its words.
            var state = p.pausedReason.map { "paused (\(p.pauseCause ?? "operator")): " + HTML.escape($0) } ?? "enabled"
            if let paused = p.rate?.pausedFor, let cause = p.pauseCause { state += " (\(cause), \(HTML.formatAge(paused)))" }
            // Left out of their queue's oldest-available age, which measures the pools.
            if p.pausedJobs > 0 { state += "; holds \(p.pausedJobs) due back, the oldest \(HTML.formatAge(p.pausedOldestAge))" }
            rows += "<tr><td>\(p.name.map(HTML.escape) ?? "(none)")</td><td>\(p.fcmProjectID.map(HTML.escape) ?? (p.apnsApp ? "(APNs app)" : "the pools' key"))</td>"
                + "<td>\(state)</td><td class=\"n\">\(p.available)</td><td class=\"n\">\(p.scheduled)</td><td class=\"n\">\(p.running)</td>"
                + "<td class=\"n\">\(p.name.map { p.dead > 0 ? "<a href=\"/dead-letters?\(query([("project", $0)]))\">\(p.dead)</a>" : "0" } ?? String(p.dead))</td>"
                + "<td class=\"n\">\(rate(p.maxRate))</td><td class=\"n\">\(rate(p.rate?.rate))</td></tr>"
        }
        return "<h2>Projects</h2><table id=\"registry\"><tr><th>Project</th><th>FCM project</th><th>state</th><th class=\"n\">available</th>"
            + "<th class=\"n\">scheduled</th><th class=\"n\">running</th><th class=\"n\">dead</th><th class=\"n\">max rate</th>"
            + "<th class=\"n\">rate now</th></tr>\(rows)</table>"
            + "<p class=\"legend\">(none): the jobs of no project, sent with the pools' own key. herald projects pause|resume NAME pauses a project.</p>"
    }

    /// The FCM projects whose rate FCM's quota answers lowered, or that are paused: the rate in
    /// force, what it was lowered to and when, the pause. Nothing while FCM never refused.
    static func projectTable(_ projects: [FCMProjectRate]) -> String {
        // An APNs app's bucket (APNsApp.rateBucket) is never lowered; its rate is on the app's line.
        let shown = projects.filter { ($0.loweredTo != nil || $0.pausedFor != nil) && !$0.fcmProject.hasPrefix(APNsApp.rateBucketPrefix) }
        guard !shown.isEmpty else { return "" }
        func rate(_ value: Double?) -> String { value.map { "\(Int($0.rounded()))/s" } ?? "-" }
        var rows = ""
        for p in shown {
            let paused = p.pausedFor.map { "for \(HTML.formatAge($0))" + (p.reason.map { ": " + HTML.escape($0) } ?? "") } ?? "no"
            rows += "<tr><td>\(HTML.escape(p.fcmProject))</td><td class=\"n\">\(rate(p.rate))</td><td class=\"n\">\(rate(p.loweredTo))</td>"
                + "<td class=\"n\">\(p.loweredAgo.map { HTML.formatAge($0) + " ago" } ?? "never")</td>"
                + "<td class=\"n\">\(rate(p.regain))</td><td>\(paused)</td></tr>"
        }
        return "<h2>FCM projects</h2><table id=\"projects\"><tr><th>Project</th><th class=\"n\">rate now</th>"
            + "<th class=\"n\">lowered to</th><th class=\"n\">lowered</th><th class=\"n\">regains</th><th>paused</th></tr>\(rows)</table>"
            + "<p class=\"legend\">FCM's quota answers lower a project's rate (at most herald work --max-rate); it rises again while FCM accepts,"
            + " doubling each second back to the rate it regains after a storm of quota answers.</p>"
    }

    // MARK: dead letters

    static func deadLetters(_ request: DashboardRequest) throws -> HTTPServerResponse {
        let dashboard = request.dashboard
        let http = request.http
        let queue = Filters.nonEmpty(http.queryValue("queue"))
        let reason = Filters.nonEmpty(http.queryValue("reason"))
        let project = Filters.nonEmpty(http.queryValue("project"))
        let before = try Filters.integer(http.queryValue("before"), name: "before", default: nil, range: 1...Int.max)
        var filter = DeadLetterFilter(queue: queue, reason: reason, project: project)
        var problem: String? = nil
        do { filter = try filter.validated() } catch {
            problem = error.description
            filter = DeadLetterFilter()
        }
        let pageSize = dashboard.configuration.pageSize
        let (letters, total, queues, notice) = try request.database { connection -> ([DeadLetter], Int, [String], String?) in
            var letters: [DeadLetter] = []
            var total = 0
            if problem == nil {
                do {
                    letters = try DeadLetters.list(connection, filter: filter, limit: pageSize, before: before)
                    total = try DeadLetters.count(connection, filter: filter)
                } catch let error as AdminError {
                    problem = error.description
                }
            }
            return (letters, total, try DeadLetters.queues(connection), try noticeText(http, connection))
        }

        var body = ""
        if let notice { body += notice }
        if let problem { body += "<p class=\"warning\">\(HTML.escape(problem))</p>" }
        let options = ([""] + queues).map { name in
            "<option value=\"\(HTML.escape(name))\"\(name == (queue ?? "") ? " selected" : "")>\(name.isEmpty ? "every queue" : HTML.escape(name))</option>"
        }.joined()
        body += """
            <form method="get" action="/dead-letters" class="filters">
            <label>Queue <select name="queue">\(options)</select></label>
            <label>Reason contains <input type="text" name="reason" value="\(HTML.escape(reason ?? ""))" size="32" placeholder="e.g. THIRD_PARTY_AUTH_ERROR"></label>
            <label>Project <input type="text" name="project" value="\(HTML.escape(project ?? ""))" size="16" placeholder="registry name"></label>
            <button>Filter</button></form>
            """
        let filterFields = [("queue", queue ?? ""), ("reason", reason ?? ""), ("project", project ?? "")]
        if problem == nil {
            let matching = filter.isEmpty ? "in all" : "\(total == 1 ? "matches" : "match") \(HTML.escape(filter.summary))"
            body += "<p id=\"matching\"><strong>\(total)</strong> dead letter\(total == 1 ? "" : "s") \(matching). "
            if total > 0 {
                body += HTML.actionButton("Retry all \(total) matching", action: "/dead-letters/retry", fields: filterFields,
                                          session: request.session, dashboard: dashboard)
                body += " " + HTML.actionButton("Discard all \(total) matching", action: "/dead-letters/discard", fields: filterFields,
                                                session: request.session, dashboard: dashboard, danger: true)
            }
            body += "</p>"
        }
        for letter in letters {
            let errors = letter.errors.arrayValue ?? []
            let history = errors.isEmpty ? "" : """
                <details><summary>Error history (\(errors.count))</summary><pre>\(HTML.escape(errors.map(\.serialized).joined(separator: "\n")))</pre></details>
                """
            body += """
                <div class="letter" id="dead-letter-\(letter.id)">
                <div class="meta">Dead letter \(letter.id) · job <a href="/jobs/\(letter.jobID)">\(letter.jobID)</a> · queue \(HTML.escape(letter.queue)) · for \(HTML.escape(letter.shortTarget(width: 48))) · \(letter.attempts) of \(letter.maxAttempts) attempts · dead at \(HTML.escape(letter.deadAt))</div>
                <div class="reason">\(HTML.escape(letter.reason))</div>
                <pre>\(HTML.escape(letter.message.serialized))</pre>\(history)
                \(HTML.actionButton("Retry", action: "/dead-letters/\(letter.id)/retry", fields: filterFields, session: request.session, dashboard: dashboard))
                \(HTML.actionButton("Discard", action: "/dead-letters/\(letter.id)/discard", fields: filterFields, session: request.session, dashboard: dashboard, danger: true))
                </div>
                """
        }
        if letters.count == pageSize, let last = letters.last {
            body += "<p><a href=\"/dead-letters?\(query(filterFields + [("before", String(last.id))]))\">Older dead letters</a></p>"
        }
        if before != nil {
            body += "<p><a href=\"/dead-letters?\(query(filterFields))\">Newest dead letters</a></p>"
        }
        return .html(200, HTML.layout(title: "Dead letters", current: "/dead-letters", body: body, dashboard: dashboard, session: request.session))
    }

    /// Where an action sends the browser back to: the list with the filter it was showing.
    static func backToList(_ request: DashboardRequest, _ notice: [(String, String)]) -> HTTPServerResponse {
        let filter = [("queue", request.formValue("queue") ?? ""), ("reason", request.formValue("reason") ?? ""),
                      ("project", request.formValue("project") ?? "")]
        return .redirect("/dead-letters?" + query(filter + notice))
    }

    static func retryOne(_ request: DashboardRequest) throws -> HTTPServerResponse {
        let id = request.id("id")
        let result = try request.database { try DeadLetters.retry($0, ids: [id], source: request.source) }
        if let done = result.retried.first {
            return backToList(request, [("done", "retried"), ("count", "1"), ("job", String(done.jobID))])
        }
        return backToList(request, [("done", "kept"), ("id", String(id))])
    }

    static func discardOne(_ request: DashboardRequest) throws -> HTTPServerResponse {
        let id = request.id("id")
        let gone = try request.database { try DeadLetters.discard($0, ids: [id], source: request.source) }
        return backToList(request, [("done", "discarded"), ("count", String(gone.count))])
    }

    static func retryMatching(_ request: DashboardRequest) throws -> HTTPServerResponse {
        let filter = try Filters.fromForm(request)
        let result = try request.database { try DeadLetters.retry($0, matching: filter, source: request.source) }
        return backToList(request, [("done", "retried"), ("count", String(result.retried.count)), ("kept", String(result.kept.count))])
    }

    static func discardMatching(_ request: DashboardRequest) throws -> HTTPServerResponse {
        let filter = try Filters.fromForm(request)
        let gone = try request.database { try DeadLetters.discard($0, matching: filter, source: request.source) }
        return backToList(request, [("done", "discarded"), ("count", String(gone.count))])
    }

    /// The notice after an action, built from fixed words and numbers only.
    static func noticeText(_ http: HTTPServerRequest, _ connection: PGConnection) throws -> String? {
        let count = Int(http.queryValue("count") ?? "") ?? 0
        switch http.queryValue("done") {
        case "retried":
            var text = "Retried \(count) dead letter\(count == 1 ? "" : "s")"
            if let job = Int(http.queryValue("job") ?? "") { text += " as <a href=\"/jobs/\(job)\">job \(job)</a>" }
            text += "."
            if let kept = Int(http.queryValue("kept") ?? ""), kept > 0 {
                text += " \(kept) stayed: their dedupe key is held by a pending job."
            }
            return "<p class=\"notice\" id=\"notice\">\(text)</p>"
        case "discarded":
            return "<p class=\"notice\" id=\"notice\">Discarded \(count) dead letter\(count == 1 ? "" : "s").</p>"
        case "kept":
            guard let id = Int(http.queryValue("id") ?? "") else { return nil }
            return "<p class=\"warning\" id=\"notice\">\(HTML.escape(try DeadLetters.keptReason(connection, id: id)))</p>"
        default:
            return nil
        }
    }

    // MARK: jobs

    static func job(_ request: DashboardRequest) throws -> HTTPServerResponse {
        let id = request.id("id")
        let (job, letter) = try request.database { connection in
            (try JobDetails.get(connection, id: id), try DeadLetters.forJob(connection, jobID: id))
        }
        guard job != nil || letter != nil else {
            throw DashboardError(404, "No job \(id) in herald.jobs or herald.dead_letters. Finished jobs leave herald.jobs after their retention.")
        }
        var body = ""
        if let job {
            let fields: [(String, String)] = [
                ("State", job.state), ("Queue", job.queue), ("Kind", job.kind), ("Priority", String(job.priority)),
                ("Attempts", "\(job.attempts) of \(job.maxAttempts)"), ("Run at", job.runAt), ("Created at", job.createdAt),
                ("Finished at", job.finishedAt ?? "–"), ("Locked until", job.lockedUntil ?? "–"), ("Dedupe key", job.dedupeKey ?? "–"),
                ("FCM message name", job.fcmMessageName ?? "–"), ("Last error", job.lastError ?? "–"),
            ]
            body += "<table id=\"job\">" + fields.map { "<tr><th>\(HTML.escape($0.0))</th><td>\(HTML.escape($0.1))</td></tr>" }.joined() + "</table>"
            body += "<h2>Message</h2><pre>\(HTML.escape(job.message.serialized))</pre>"
            let errors = job.errors.arrayValue ?? []
            body += "<h2>Error history (\(errors.count))</h2>"
                + (errors.isEmpty ? "<p>None.</p>" : "<pre>\(HTML.escape(errors.map(\.serialized).joined(separator: "\n")))</pre>")
        }
        if let letter {
            body += """
                <h2>Dead letter \(letter.id)</h2><p class="reason">\(HTML.escape(letter.reason))</p>
                <p>Dead at \(HTML.escape(letter.deadAt)) after \(letter.attempts) attempts.
                <a href="/dead-letters?queue=\(percentEncoded(letter.queue))#dead-letter-\(letter.id)">See it among the dead letters</a></p>
                """
            if job == nil { body += "<h2>Message</h2><pre>\(HTML.escape(letter.message.serialized))</pre>" }
        }
        return .html(200, HTML.layout(title: "Job \(id)", current: "", body: body, dashboard: request.dashboard, session: request.session))
    }

    // MARK: admin log

    static func adminLog(_ request: DashboardRequest) throws -> HTTPServerResponse {
        let entries = try request.database { try AdminLog.recent($0, limit: 200) }
        let body = logTable(entries)
        return .html(200, HTML.layout(title: "Admin log", current: "/admin-log", body: body, dashboard: request.dashboard, session: request.session))
    }

    static func logTable(_ entries: [AdminLog.Entry]) -> String {
        guard !entries.isEmpty else { return "<p>No actions yet.</p>" }
        let rows = entries.map { entry in
            let ids = entry.ids.count > 12 ? entry.ids.prefix(12).map(String.init).joined(separator: ", ") + " … (\(entry.ids.count))"
                : entry.ids.map(String.init).joined(separator: ", ")
            return "<tr><td>\(HTML.escape(entry.at))</td><td>\(HTML.escape(entry.action))</td><td>\(HTML.escape(ids))</td><td>\(HTML.escape(entry.details.serialized))</td><td>\(HTML.escape(entry.source))</td></tr>"
        }.joined()
        return "<table class=\"log\"><tr><th>When</th><th>Action</th><th>Ids</th><th>Details</th><th>From</th></tr>\(rows)</table>"
    }

    // MARK: login

    static func loginForm(_ request: DashboardRequest) throws -> HTTPServerResponse {
        guard request.dashboard.access.isProtected else { return .redirect("/") }
        if request.session != nil { return .redirect(safeNext(request.http.queryValue("next"))) }
        return loginPage(request, status: 200, problem: nil, next: safeNext(request.http.queryValue("next")))
    }

    static func login(_ request: DashboardRequest) throws -> HTTPServerResponse {
        let access = request.dashboard.access
        guard access.isProtected else { return .redirect("/") }
        let next = safeNext(request.formValue("next"))
        guard let token = request.formValue("token"), !token.isEmpty else {
            return loginPage(request, status: 400, problem: "Enter the dashboard token (HERALD_DASHBOARD_TOKEN).", next: next)
        }
        let dashboard = request.dashboard
        if let wait = dashboard.logins.retryAfter(request.http.remoteAddress, now: dashboard.configuration.clock()) {
            var page = loginPage(request, status: 429, problem: "Too many wrong tokens from this address: try again in \(Int(wait)) s.", next: next)
            page.headers.append(HTTPHeader(name: "retry-after", value: String(Int(wait))))
            return page
        }
        guard access.tokenMatches(token) else {
            dashboard.logins.failed(request.http.remoteAddress, now: dashboard.configuration.clock())
            return loginPage(request, status: 401, problem: "That is not this dashboard's token.", next: next)
        }
        let cookie = access.sessionCookie(access.newSession(now: Date().timeIntervalSince1970), secure: request.dashboard.isHTTPS(request.http))
        return .redirect(next, headers: [cookie])
    }

    static func logout(_ request: DashboardRequest) throws -> HTTPServerResponse {
        .redirect("/login", headers: [Access.clearedCookie(secure: request.dashboard.isHTTPS(request.http))])
    }

    static func loginPage(_ request: DashboardRequest, status: Int, problem: String?, next: String) -> HTTPServerResponse {
        let body = """
            \(problem.map { "<p class=\"warning\" id=\"problem\">\(HTML.escape($0))</p>" } ?? "")
            <form method="post" action="/login" class="filters">
            <input type="hidden" name="next" value="\(HTML.escape(next))">
            <label>Token <input type="password" name="token" autocomplete="current-password" autofocus size="40"></label>
            <button class="primary">Log in</button></form>
            """
        return .html(status, HTML.layout(title: "Log in", current: "/login", body: body, dashboard: request.dashboard, session: nil))
    }

    /// Only a path of this site: anything else (another host, `//host`, a scheme) goes to `/`.
    static func safeNext(_ next: String?) -> String {
        guard let next, next.hasPrefix("/"), !next.hasPrefix("//"), !next.contains("\\"),
              !next.unicodeScalars.contains(where: { $0.value < 0x20 }) else { return "/" }
        return next
    }

    // MARK: errors and helpers

    static func errorPage(_ error: DashboardError, dashboard: Dashboard) -> String {
        let title: String
        switch error.status {
        case 400: title = "Bad request"
        case 401: title = "Log in first"
        case 403: title = "Not allowed"
        case 404: title = "Not found"
        case 421: title = "Not this dashboard's address"
        case 409: title = "Conflict"
        case 503: title = "Database unavailable"
        default: title = "Error \(error.status)"
        }
        return HTML.layout(title: title, current: "", body: "<p class=\"warning\" id=\"problem\">\(HTML.escape(error.message))</p><p><a href=\"/\">Overview</a></p>",
                           dashboard: dashboard, session: nil)
    }

    static func query(_ pairs: [(String, String)]) -> String {
        pairs.filter { !$0.1.isEmpty }.map { "\(percentEncoded($0.0))=\(percentEncoded($0.1))" }.joined(separator: "&")
    }

    static func percentEncoded(_ text: String) -> String {
        var out = ""
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "."), UInt8(ascii: "~"), UInt8(ascii: "/"):
                out.append(Character(UnicodeScalar(byte)))
            default:
                out += String(format: "%%%02X", byte)
            }
        }
        return out
    }
}
