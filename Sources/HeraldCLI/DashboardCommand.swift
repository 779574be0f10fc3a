import CommandOptions
import Dashboard
import Foundation
import Glibc
import Lifecycle
import Postgres

enum DashboardCommand {
    static let options: [Option] = [
        Option(name: "address", env: "HERALD_DASHBOARD_ADDRESS", value: "HOST:PORT", help: "Where to listen.", defaultText: "127.0.0.1:8080"),
        Option(name: "threads", env: "HERALD_DASHBOARD_THREADS", value: "N", help: "Event-loop threads (each uses one database connection at a time).", defaultText: "2"),
        Option(name: "public-url", env: "HERALD_DASHBOARD_PUBLIC_URL", value: "URL",
               help: "The URL operators open when a reverse proxy stands in front (e.g. https://herald.example.com): its host is answered besides the listen address and localhost; https makes the session cookie Secure.",
               defaultText: "none"),
        Option(name: "trusted-proxy", env: "HERALD_DASHBOARD_TRUSTED_PROXIES", value: "ADDRESS", repeatable: true,
               help: "IP address of a reverse proxy whose X-Forwarded-Proto: https is believed (the cookie is then Secure); the variable takes a comma-separated list.",
               defaultText: "none"),
    ] + DeadCommand.databaseOptions + connectionOptions.filter { ["log-level", "log-format"].contains($0.name) }

    static let help = helpText(
        command: "dashboard", summary: "Web pages, a JSON API and /metrics for queues, dead letters and campaigns.",
        usage: "[--address HOST:PORT]", options: options,
        footer: """
        Access: set HERALD_DASHBOARD_TOKEN (at least 16 characters; e.g. `openssl rand -hex 32`) to require
        it everywhere: the API and /metrics as `Authorization: Bearer TOKEN`, the pages through /login. Only
        then can pages and the API retry, discard, pause, resume and cancel; each action is recorded in
        herald.admin_log. Without a token the dashboard is read-only and listens on a loopback address only.
        Host check: every request (pages, API, /metrics) must name the dashboard in its Host header: the
        listen address, localhost, 127.0.0.1 or [::1] with the port, or the host of --public-url; any other
        gets 421 and no data, so a web page that re-points its own name at this address (DNS rebinding) reads
        nothing. Prometheus sends the address it scrapes as Host: scrape the listen address (not a wildcard
        0.0.0.0, which no client names) or the public URL's host.
        Request bodies over 64 KiB get 413 as soon as Content-Length says so; a request not arrived whole
        within 30 s gets 408.
        Pages (tabs): / (queues; the last hour's completed, errors and cancelled per minute),
        /campaigns (each campaign's progress: a bar of completed, dead, discarded, cancelled and running
        jobs, the last minute's sends and an estimated end; Pause holds a campaign back on every pool, Resume lets it go on,
        Cancel turns its pending jobs into cancelled ones and cannot be undone), /dead-letters (whom each
        was for, filter, retry, discard), /jobs/ID, /admin-log, /login.
        API: GET /api/queues (per queue and state, and last_hour), GET /api/dead-letters?queue=&reason=&limit=&before=,
        GET /api/dead-letters/ID, POST /api/dead-letters/ID/retry, POST /api/dead-letters/ID/discard,
        POST /api/dead-letters/retry and /discard with {"queue": ..., "reason": ...} (or {"all": true}),
        GET /api/jobs/ID, GET /api/campaigns?limit=, GET /api/campaigns/ID,
        POST /api/campaigns/ID/pause, /resume and /cancel.
        Metrics: GET /metrics (herald_jobs, herald_oldest_available_age_seconds, herald_dead_letters,
        herald_campaign_jobs, herald_campaign_sent_last_minute, herald_campaign_state; with registry
        projects herald_project_jobs, herald_project_paused and, what a paused project holds back,
        herald_project_paused_jobs and herald_project_paused_oldest_age_seconds).
        """)

    static let minimumTokenLength = 16

    /// `HOST:PORT` or `[IPV6]:PORT`.
    static func address(_ text: String, source: String) throws(UsageError) -> (host: String, port: Int) {
        var host: Substring
        var port: Substring
        if text.hasPrefix("["), let close = text.firstIndex(of: "]") {
            host = text[text.index(after: text.startIndex)..<close]
            let rest = text[text.index(after: close)...]
            guard rest.hasPrefix(":") else { throw UsageError("herald dashboard: \(source) \"\(text)\" lacks a port; give e.g. [::1]:8080") }
            port = rest.dropFirst()
        } else {
            guard let colon = text.lastIndex(of: ":") else {
                throw UsageError("herald dashboard: \(source) \"\(text)\" is not HOST:PORT; give e.g. 127.0.0.1:8080")
            }
            host = text[..<colon]
            port = text[text.index(after: colon)...]
        }
        guard !host.isEmpty, let number = Int(port), (0...65535).contains(number) else {
            throw UsageError("herald dashboard: \(source) \"\(text)\" is not HOST:PORT with a port from 0 to 65535; give e.g. 127.0.0.1:8080")
        }
        return (String(host), number)
    }

    /// `--public-url` / `HERALD_DASHBOARD_PUBLIC_URL`, refused naming the setting when it is no http(s) URL.
    static func publicURL(_ parsed: ParsedOptions) throws(UsageError) -> DashboardPublicURL? {
        guard let (text, source) = parsed.lookup("public-url") else { return nil }
        switch DashboardPublicURL.parse(text) {
        case .success(let url): return url
        case .failure(let problem): throw UsageError("herald dashboard: \(source) \"\(text)\" \(problem)")
        }
    }

    /// `--trusted-proxy` (repeatable) or `HERALD_DASHBOARD_TRUSTED_PROXIES` (comma-separated): IP literals.
    static func trustedProxies(_ parsed: ParsedOptions) throws(UsageError) -> [String] {
        let flags = parsed.all("trusted-proxy")
        let list: [String]
        let source: String
        if !flags.isEmpty {
            (list, source) = (flags, "--trusted-proxy")
        } else if let text = ProcessInfo.processInfo.environment["HERALD_DASHBOARD_TRUSTED_PROXIES"], !text.isEmpty {
            (list, source) = (text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }, "HERALD_DASHBOARD_TRUSTED_PROXIES")
        } else {
            return []
        }
        for address in list where DashboardPublicURL.isIPAddress(address) == false {
            throw UsageError("herald dashboard: \(source) \"\(address)\" is not an IP address; give the proxy's address as the dashboard sees it, e.g. 127.0.0.1 or ::1 (host names and ranges are not taken)")
        }
        return list
    }

    static func isLoopback(_ host: String) -> Bool {
        host == "localhost" || host == "::1" || host.hasPrefix("127.")
    }

    static func run(arguments: [String]) throws -> Int32 {
        let parsed = try parse(command: "dashboard", arguments: arguments, options: options)
        let log = try RunEnvironment.logger(parsed, prefix: "herald dashboard")
        let (host, port) = try address(parsed.string("address") ?? "127.0.0.1:8080", source: parsed.lookup("address")?.source ?? "--address")
        let threads = try parsed.int("threads", default: 2, minimum: 1)
        let token = ProcessInfo.processInfo.environment["HERALD_DASHBOARD_TOKEN"].flatMap { $0.isEmpty ? nil : $0 }
        if let token, token.count < minimumTokenLength {
            throw UsageError("herald dashboard: HERALD_DASHBOARD_TOKEN is \(token.count) characters; use at least \(minimumTokenLength), e.g. the output of `openssl rand -hex 32`")
        }
        if token == nil && !isLoopback(host) {
            throw UsageError("herald dashboard: refusing to serve on \(host) without HERALD_DASHBOARD_TOKEN: anyone who reaches that address would see every message. Set HERALD_DASHBOARD_TOKEN, or listen on 127.0.0.1")
        }
        guard let url = (try checkedDatabaseURL(parsed)) else {
            throw UsageError("herald dashboard: set DATABASE_URL (or --database-url) to the PostgreSQL holding schema herald")
        }
        var configuration = DashboardConfiguration(databaseURL: url, host: host, port: port, token: token)
        configuration.publicURL = try publicURL(parsed)
        configuration.trustedProxies = try trustedProxies(parsed)
        if configuration.publicURL != nil && token == nil {
            log.warning("--public-url without HERALD_DASHBOARD_TOKEN: whoever reaches that URL reads every queue and message unless the proxy itself asks who they are")
        }
        configuration.threads = threads
        configuration.log = { log.info($0) }
        // Stop on SIGTERM or SIGINT: blocked here, before the event-loop threads start (they inherit
        // the mask); the group waits for them and starts its shutdown; then the listener closes.
        ShutdownSignals.termination.block()
        let dashboard = Dashboard(configuration: configuration)
        do { try dashboard.start() } catch let error as DashboardStartError {
            throw UsageError("herald dashboard: \(error)")
        }
        log.info("serving \(dashboard.baseURL) (\(token == nil ? "read-only: no HERALD_DASHBOARD_TOKEN" : "token required; actions enabled"))")
        let group = ServiceGroup([.init(dashboard)], maximumShutdownDuration: 10, gracefulShutdownSignals: .termination,
                                 signalReceived: { log.info("stopping (\($0))") }, log: { log.debug($0) })
        let outcome = group.run()
        if let failure = outcome.failure { throw failure }
        return 0
    }
}
