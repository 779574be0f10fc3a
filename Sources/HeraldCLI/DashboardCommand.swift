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
    ] + DeadCommand.databaseOptions + connectionOptions.filter { ["log-level", "log-format"].contains($0.name) }

    static let help = helpText(
        command: "dashboard", summary: "Web pages, a JSON API and /metrics for queues, dead letters and campaigns.",
        usage: "[--address HOST:PORT]", options: options,
        footer: """
        Access: set HERALD_DASHBOARD_TOKEN (at least 16 characters; e.g. `openssl rand -hex 32`) to require
        it everywhere: the API and /metrics as `Authorization: Bearer TOKEN`, the pages through /login. Only
        then can pages and the API retry, discard, pause, resume and cancel; each action is recorded in
        herald.admin_log. Without a token the dashboard is read-only and listens on a loopback address only.
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
        herald_campaign_jobs, herald_campaign_sent_last_minute, herald_campaign_state).
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
        configuration.threads = threads
        configuration.log = { log.info($0) }
        // Stop on SIGTERM or SIGINT: blocked here, before the event-loop threads start (they inherit
        // the mask), and waited for by a thread of their own, which starts the group's shutdown;
        // then the listener closes.
        var signals = sigset_t()
        sigemptyset(&signals)
        sigaddset(&signals, SIGTERM)
        sigaddset(&signals, SIGINT)
        pthread_sigmask(SIG_BLOCK, &signals, nil)
        let dashboard = Dashboard(configuration: configuration)
        do { try dashboard.start() } catch let error as DashboardStartError {
            throw UsageError("herald dashboard: \(error)")
        }
        log.info("serving \(dashboard.baseURL) (\(token == nil ? "read-only: no HERALD_DASHBOARD_TOKEN" : "token required; actions enabled"))")
        let group = ServiceGroup([.init(dashboard)], maximumShutdownDuration: 10, log: { log.debug($0) })
        let waitSet = signals
        let signalThread = Thread {
            var set = waitSet
            var received: Int32 = 0
            sigwait(&set, &received)
            log.info("stopping (signal \(received))")
            group.beginShutdown()
        }
        signalThread.name = "herald-signals"
        signalThread.start()
        let outcome = group.run()
        if let failure = outcome.failure { throw failure }
        return 0
    }
}
