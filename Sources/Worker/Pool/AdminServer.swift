import HTTPServer
import Lifecycle
import Metrics
import Synchronization

/// The supervisor's admin endpoint (`--admin-address`): `/metrics` (Prometheus text),
/// `/healthz` and `/readyz`. One event-loop thread; every answer is computed from memory and
/// /proc, so it never waits on PostgreSQL or FCM.
///
/// A `Service`: `start()` binds (its owner calls it first, so a busy address stops start-up with
/// a message naming the setting); `run()` serves until `beginShutdown()`, then closes.
public final class AdminServer: Service, @unchecked Sendable {
    public let host: String
    private let server: HTTPServer
    private let started = Mutex(false)
    private let shutdown = ShutdownLatch()

    public init(host: String, port: Int, monitor: PoolMonitor) {
        self.host = host
        var configuration = HTTPServer.Configuration(host: host, port: port, threads: 1)
        configuration.maxBodyBytes = 64 << 10
        server = HTTPServer(configuration: configuration) { request in
            Self.answer(request, monitor: monitor)
        }
    }

    public var name: String { "admin" }

    /// Binds and listens.
    public func start() throws(HTTPServerError) {
        try server.start()
        started.withLock { $0 = true }
    }

    /// Serves (starting first if `start()` was not called) until `beginShutdown()`, then closes
    /// the listener and every connection.
    public func run() throws {
        if !started.withLock({ $0 }) { try start() }
        shutdown.wait()
        server.stop()
    }

    public func beginShutdown() { shutdown.signal() }

    /// Closes at once (`beginShutdown()` asks `run()` to); for an owner that never ran it.
    public func stop() { server.stop() }
    /// The bound port (the real one when 0 was asked for).
    public var port: Int { server.port }
    public var url: String { host.contains(":") ? "http://[\(host)]:\(port)" : "http://\(host):\(port)" }

    static func answer(_ request: HTTPServerRequest, monitor: PoolMonitor) -> HTTPServerResponse {
        let text = [HTTPHeader(name: "content-type", value: "text/plain; charset=utf-8")]
        let routes = ["/metrics", "/healthz", "/readyz"]
        guard routes.contains(request.path) || request.path == "/" else {
            return HTTPServerResponse(status: 404, headers: text, body: Array("not found: \(request.path); this endpoint serves \(routes.joined(separator: ", "))\n".utf8))
        }
        guard request.method == "GET" || request.method == "HEAD" else {
            return HTTPServerResponse(status: 405, headers: text + [HTTPHeader(name: "allow", value: "GET, HEAD")],
                                      body: Array("\(request.method) is not allowed here; use GET\n".utf8))
        }
        let status: Int
        let body: String
        var headers = text
        switch request.path {
        case "/metrics":
            status = 200
            body = monitor.metricsText()
            headers = [HTTPHeader(name: "content-type", value: Exposition.contentType)]
        case "/healthz":
            let (healthy, reason) = monitor.health()
            (status, body) = (healthy ? 200 : 503, reason)
        case "/readyz":
            let (ready, reason) = monitor.readiness()
            (status, body) = (ready ? 200 : 503, reason)
        default:
            (status, body) = (200, "herald work: \(routes.joined(separator: " "))\n")
        }
        return HTTPServerResponse(status: status, headers: headers, body: request.method == "HEAD" ? [] : Array(body.utf8))
    }

    /// `HOST:PORT` (`[IPv6]:PORT` for an IPv6 literal), port 0-65535 (0: any free port), or nil
    /// when it is not one.
    public static func parseAddress(_ text: String) -> (host: String, port: Int)? {
        guard let colon = text.lastIndex(of: ":") else { return nil }
        var host = String(text[..<colon])
        let portText = text[text.index(after: colon)...]
        guard !portText.isEmpty, portText.allSatisfy(\.isASCII), let port = Int(portText), (0...65_535).contains(port) else { return nil }
        if host.hasPrefix("[") && host.hasSuffix("]") {
            host = String(host.dropFirst().dropLast())
            guard host.contains(":") else { return nil }
        } else if host.contains(":") {
            return nil  // an IPv6 literal needs brackets, or the port is ambiguous
        }
        guard !host.isEmpty else { return nil }
        return (host, port)
    }
}
