import Foundation
import HTTPServer
import JSON
import Lifecycle
import Postgres
import Queue
import Synchronization

/// How a dashboard runs; every default is written beside its field.
public struct DashboardConfiguration: Sendable {
    /// The PostgreSQL holding schema herald. Required.
    public var databaseURL: String
    /// Address to listen on. Default `127.0.0.1`.
    public var host: String = "127.0.0.1"
    /// TCP port; 0 picks a free one. Default 8080.
    public var port: Int = 8080
    /// The access token; nil: read-only, and only on a loopback address. Default nil.
    public var token: String? = nil
    /// Where operators reach the dashboard through a reverse proxy: its host is answered besides
    /// the listen address and loopback names, and an https one makes the cookie `Secure`. Default nil.
    public var publicURL: DashboardPublicURL? = nil
    /// Addresses (IP literals) of reverse proxies whose `X-Forwarded-Proto: https` is believed
    /// (the session cookie is then `Secure`); from any other peer that header is ignored. Default none.
    public var trustedProxies: [String] = []
    /// Largest request body (forms and JSON actions are small); a larger declared one gets 413
    /// before it is sent. Default 64 KiB.
    public var maxBodyBytes: Int = 64 * 1024
    /// A request not arrived whole this long after its first byte gets 408 and its connection is
    /// closed, so a body that never comes holds nothing. Default 30 s.
    public var requestTimeoutSeconds: Int = 30
    /// Event-loop threads, each with at most one database connection in use. Default 2.
    public var threads: Int = 2
    /// How long a login lasts, in seconds. Default 12 h.
    public var sessionLifetime: Double = 12 * 3600
    /// Dead letters per page. Default 25.
    public var pageSize: Int = 25
    /// How often the queue gauges are re-read (see `QueueStatistics`).
    public var statistics = QueueStatistics.Configuration()
    /// Longest a statement of the dashboard may run (ms): a slow query must not hold an event
    /// loop for long. Default 10,000.
    public var statementTimeoutMilliseconds: Int = 10_000
    /// Failed logins (form or bearer token) allowed per client address within `loginWindow`
    /// seconds; then 429 with Retry-After. Default 10 a minute.
    public var loginLimit: Int = 10
    public var loginWindow: Double = 60
    /// The clock of the login limit (seconds since 1970); injectable for tests.
    public var clock: @Sendable () -> Double = { Date().timeIntervalSince1970 }
    /// Hears one line per action and per refused login or form (never a token or a cookie).
    /// Default: nothing.
    public var log: @Sendable (String) -> Void = { _ in }

    public init(databaseURL: String, host: String = "127.0.0.1", port: Int = 8080, token: String? = nil) {
        self.databaseURL = databaseURL
        self.host = host
        self.port = port
        self.token = token
    }
}

public struct DashboardStartError: Error, CustomStringConvertible, Sendable {
    public var description: String
    init(_ description: String) { self.description = description }
}

/// `herald dashboard`: server-rendered pages, a JSON API and the database's gauges on /metrics,
/// served by the project's own `HTTPServer`.
///
/// The server's handler runs on its event-loop thread and waits for PostgreSQL there. That is a
/// deliberate trade: a dashboard serves a few operators and one Prometheus, each statement is
/// bounded by `statement_timeout`, the gauges are cached, and every loop has a connection of
/// its own, so one slow page holds up only the requests of its own loop.
///
/// A `Service`: `start()` checks the database and binds (`herald dashboard` calls it first, so a
/// bad setting stops start-up with a message naming it); `run()` serves until `beginShutdown()`,
/// then closes the listener.
public final class Dashboard: Service, Sendable {
    public let configuration: DashboardConfiguration
    let access: Access
    let statistics: QueueStatistics
    let pool: ConnectionPool
    let logins: LoginLimiter
    let hosts: HostCheck
    private let router: Router
    private let server: Mutex<HTTPServer?> = Mutex(nil)
    private let boundPort = Atomic<Int>(0)
    private let shutdown = ShutdownLatch()

    public init(configuration: DashboardConfiguration) {
        self.configuration = configuration
        access = Access(token: configuration.token, sessionLifetime: configuration.sessionLifetime)
        statistics = QueueStatistics(configuration: configuration.statistics)
        pool = ConnectionPool(url: configuration.databaseURL, statementTimeoutMilliseconds: configuration.statementTimeoutMilliseconds)
        router = Router(routes: Dashboard.routes)
        logins = LoginLimiter(limit: configuration.loginLimit, window: configuration.loginWindow)
        hosts = HostCheck(listenHost: configuration.host, publicURL: configuration.publicURL, trustedProxies: configuration.trustedProxies)
    }

    /// Throws 429 when `request`'s client has used up its failed logins.
    func checkLoginLimit(_ request: HTTPServerRequest) throws {
        guard let wait = logins.retryAfter(request.remoteAddress, now: configuration.clock()) else { return }
        throw DashboardError(429, "too many wrong tokens from this address; try again in \(Int(wait)) s",
                             headers: [HTTPHeader(name: "retry-after", value: String(Int(wait)))])
    }

    /// Every method and path the router knows, with an id where one is captured: what a check
    /// that must hold for every route (the Host check) is tested over.
    public static var routeSignatures: [(method: String, path: String)] {
        routes.map { ($0.method, $0.pattern) }
    }

    /// Every page and endpoint. To add one (`/campaigns`, say), add its line here and its
    /// rendering in a file of its own.
    static let routes: [Route] = [
        Route("GET", "/", .page, Pages.overview),
        Route("GET", "/dead-letters", .page, Pages.deadLetters),
        Route("POST", "/dead-letters/retry", .page, changesState: true, Pages.retryMatching),
        Route("POST", "/dead-letters/discard", .page, changesState: true, Pages.discardMatching),
        Route("POST", "/dead-letters/:id/retry", .page, changesState: true, Pages.retryOne),
        Route("POST", "/dead-letters/:id/discard", .page, changesState: true, Pages.discardOne),
        Route("GET", "/jobs/:id", .page, Pages.job),
        Route("GET", "/admin-log", .page, Pages.adminLog),
        Route("GET", "/campaigns", .page, CampaignPages.page),
        Route("GET", "/campaigns/:id", .page, CampaignPages.detail),
        Route("POST", "/campaigns/:id/pause", .page, changesState: true, CampaignPages.pause),
        Route("POST", "/campaigns/:id/resume", .page, changesState: true, CampaignPages.resume),
        Route("POST", "/campaigns/:id/cancel", .page, changesState: true, CampaignPages.cancel),
        Route("GET", "/login", .page, isPublic: true, Pages.loginForm),
        Route("POST", "/login", .page, isPublic: true, Pages.login),
        Route("POST", "/logout", .page, isPublic: true, Pages.logout),

        Route("GET", "/api/queues", .api, API.queues),
        Route("GET", "/api/topics", .api, API.topics),
        Route("GET", "/api/projects", .api, API.projects),
        Route("GET", "/api/dead-letters", .api, API.deadLetters),
        Route("GET", "/api/dead-letters/:id", .api, API.deadLetter),
        Route("POST", "/api/dead-letters/retry", .api, changesState: true, API.retryMatching),
        Route("POST", "/api/dead-letters/discard", .api, changesState: true, API.discardMatching),
        Route("POST", "/api/dead-letters/:id/retry", .api, changesState: true, API.retryOne),
        Route("POST", "/api/dead-letters/:id/discard", .api, changesState: true, API.discardOne),
        Route("GET", "/api/jobs/:id", .api, API.job),
        Route("GET", "/api/campaigns", .api, CampaignPages.apiList),
        Route("GET", "/api/campaigns/:id", .api, CampaignPages.apiGet),
        Route("GET", "/api/campaigns/:id/delivery", .api, CampaignPages.apiDelivery),
        Route("POST", "/api/campaigns/:id/pause", .api, changesState: true, CampaignPages.apiPause),
        Route("POST", "/api/campaigns/:id/resume", .api, changesState: true, CampaignPages.apiResume),
        Route("POST", "/api/campaigns/:id/cancel", .api, changesState: true, CampaignPages.apiCancel),
        Route("GET", "/metrics", .api, Metrics.scrape),
    ]

    /// Checks the database, then listens.
    public func start() throws {
        try pool.with { connection in
            guard try Administration.isMigrated(connection) else {
                throw DashboardStartError("the database at \(PGConnection.redacted(configuration.databaseURL)) has no herald schema; run `herald migrate` first")
            }
            guard try Administration.hasAdminLog(connection) else {
                throw DashboardStartError("the herald schema lacks herald.admin_log; run `herald migrate` with this binary first")
            }
        }
        var http = HTTPServer.Configuration(host: configuration.host, port: configuration.port, threads: configuration.threads)
        http.maxBodyBytes = configuration.maxBodyBytes
        http.requestTimeoutSeconds = configuration.requestTimeoutSeconds
        let httpServer = HTTPServer(configuration: http) { [weak self] request in
            guard let self else { return HTTPServerResponse(status: 503) }
            return self.handle(request)
        }
        try httpServer.start()
        boundPort.store(httpServer.port, ordering: .releasing)
        server.withLock { $0 = httpServer }
    }

    public var name: String { "dashboard" }

    /// Serves (starting first if `start()` was not called) until `beginShutdown()`, then stops.
    public func run() throws {
        if server.withLock({ $0 == nil }) { try start() }
        shutdown.wait()
        stop()
    }

    public func beginShutdown() { shutdown.signal() }

    /// Closes the listener and every connection at once (`beginShutdown()` asks `run()` to).
    public func stop() {
        let running = server.withLock { server -> HTTPServer? in
            defer { server = nil }
            return server
        }
        running?.stop()
    }

    /// The port listened on (the real one when configured as 0).
    public var port: Int { boundPort.load(ordering: .acquiring) }
    public var baseURL: String {
        let host = configuration.host.contains(":") ? "[\(configuration.host)]" : configuration.host
        return "http://\(host):\(port)"
    }

    // MARK: handling

    func handle(_ request: HTTPServerRequest) -> HTTPServerResponse {
        let response = answer(request)
        // Every POST is an action or a login: say what became of it, and from where.
        if request.method == "POST" {
            let address = request.remoteAddress.isEmpty ? "an unknown address" : request.remoteAddress
            let location = response.headers.first { $0.name == "location" }?.value ?? ""
            let outcome: String
            switch response.status {
            case 200..<300: outcome = "done"
            case 303 where !location.hasPrefix("/login"): outcome = request.path == "/logout" ? "logged out" : "done"
            case 303: outcome = "refused: no session"
            default: outcome = "refused with \(response.status)"
            }
            configuration.log("POST \(request.path) from \(address): \(outcome)")
        }
        return response
    }

    private func answer(_ request: HTTPServerRequest) -> HTTPServerResponse {
        let audience: Audience = Router.isAPIPath(request.path) ? .api : .page
        // Before anything else, for every path (/metrics included): a request under another
        // site's name is refused, so a DNS-rebinding page reads no page, no data, no token.
        let host = request.header("host")
        guard hosts.allows(host, port: port) else {
            return render(DashboardError(421, hostRefusal(host)), audience: audience)
        }
        do {
            switch router.match(method: request.method, path: request.path) {
            case .notFound:
                throw DashboardError(404, "nothing at \(request.path)")
            case .methodNotAllowed(let allowed):
                throw DashboardError(405, "\(request.path) takes \(allowed.joined(separator: ", ")), not \(request.method)",
                                     headers: [HTTPHeader(name: "allow", value: allowed.joined(separator: ", "))])
            case .found(let route, let captures):
                let session = try authorize(request, route)
                return try route.action(DashboardRequest(http: request, captures: captures, session: session, dashboard: self))
            }
        } catch let error as DashboardError {
            if audience == .page, error.status == 401 {
                // A browser without a session goes to the login page and comes back after.
                let next = request.method == "GET" ? request.path + (request.query.isEmpty ? "" : "?" + request.query) : "/"
                return .redirect("/login?next=" + Pages.percentEncoded(next))
            }
            return render(error, audience: audience)
        } catch let error as AdminError {
            let status: Int
            switch error.kind {
            case .badInput: status = 400
            case .notFound: status = 404
            case .conflict: status = 409
            }
            return render(DashboardError(status, error.description), audience: audience)
        } catch let error as PostgresError {
            return render(DashboardError(503, "the database failed: \(error)"), audience: audience)
        } catch {
            return render(DashboardError(500, "\(error)"), audience: audience)
        }
    }

    /// Lets the request through or throws the answer it gets instead. Returns the browser's
    /// session when it has one.
    private func authorize(_ request: HTTPServerRequest, _ route: Route) throws -> Session? {
        let now = Date().timeIntervalSince1970
        guard access.isProtected else {
            if route.changesState {
                throw DashboardError(403, "this dashboard is read-only: set HERALD_DASHBOARD_TOKEN and restart `herald dashboard` to retry, discard, pause and cancel from it")
            }
            return nil
        }
        switch route.audience {
        case .api:
            if request.header("authorization") != nil { try checkLoginLimit(request) }
            switch access.bearerMatches(request) {
            case .none:
                throw DashboardError(401, "send the dashboard token as Authorization: Bearer TOKEN",
                                     headers: [HTTPHeader(name: "www-authenticate", value: "Bearer realm=\"herald\"")])
            case .some(false):
                logins.failed(request.remoteAddress, now: configuration.clock())
                throw DashboardError(401, "the bearer token is not this dashboard's token",
                                     headers: [HTTPHeader(name: "www-authenticate", value: "Bearer realm=\"herald\", error=\"invalid_token\"")])
            case .some(true):
                return nil
            }
        case .page:
            if route.method == "POST" && Access.isCrossSite(request) {
                throw DashboardError(403, "refused a form sent from another site (Origin \(request.header("origin") ?? "unknown")); use the dashboard's own pages")
            }
            let session = access.session(request, now: now)
            if route.isPublic { return session }
            guard let session else { throw DashboardError(401, "log in first") }
            if route.changesState {
                let submitted = FormDecoding.pairs(String(decoding: request.body, as: UTF8.self)).first { $0.name == Access.csrfField }?.value
                guard access.csrfMatches(session, submitted) else {
                    throw DashboardError(403, "this form's CSRF token is missing or wrong; reload the page and try again")
                }
            }
            return session
        }
    }

    /// Says which names this dashboard answers to and which setting adds another.
    private func hostRefusal(_ host: String?) -> String {
        let named = host.map { text -> String in
            let shown = String(text.unicodeScalars.filter { $0.value > 0x20 && $0.value < 0x7f }.prefix(100).map(Character.init))
            return "Host \"\(shown)\""
        } ?? "a request without a Host header"
        return "this dashboard does not answer to \(named): it answers to \(hosts.names(port: port).joined(separator: ", ")). "
            + "To reach it under another name (a reverse proxy's), set --public-url or HERALD_DASHBOARD_PUBLIC_URL to the URL operators open, e.g. https://herald.example.com"
    }

    /// Whether the browser reached the dashboard over TLS (see `HostCheck.isHTTPS`): its cookie is then `Secure`.
    func isHTTPS(_ request: HTTPServerRequest) -> Bool { hosts.isHTTPS(request) }

    private func render(_ error: DashboardError, audience: Audience) -> HTTPServerResponse {
        switch audience {
        case .api:
            return .json(error.status, ["error": .string(error.message)], headers: error.headers)
        case .page:
            return .html(error.status, Pages.errorPage(error, dashboard: self), headers: error.headers)
        }
    }
}

/// At most one connection per event-loop thread in use at a time, opened on demand and kept;
/// a broken one is dropped and the next request opens another.
final class ConnectionPool: Sendable {
    let url: String
    let statementTimeoutMilliseconds: Int
    private let idle = Mutex<[PGConnection]>([])

    init(url: String, statementTimeoutMilliseconds: Int) {
        self.url = url
        self.statementTimeoutMilliseconds = statementTimeoutMilliseconds
    }

    func with<T>(_ body: (PGConnection) throws -> T) throws -> T {
        let connection: PGConnection
        if let reused = idle.withLock({ $0.popLast() }) {
            connection = reused
        } else {
            connection = try PGConnection(url: url)
            try Administration.identifyAsDashboard(connection, statementTimeoutMilliseconds: statementTimeoutMilliseconds)
        }
        do {
            let value = try body(connection)
            idle.withLock { $0.append(connection) }
            return value
        } catch {
            if connection.isHealthy { idle.withLock { $0.append(connection) } }
            throw error
        }
    }
}
