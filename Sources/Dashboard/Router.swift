import HTTPServer
import JSON
import Postgres
import Queue

/// Who a route answers: browsers (HTML, a session cookie) or scripts (JSON or text, a bearer token).
enum Audience: Sendable {
    case page
    case api
}

/// One route: a method, a path pattern (`:name` segments capture a whole number), who it is
/// for, and whether it changes anything (only POST may). New pages add a line to `Dashboard.routes`.
struct Route: Sendable {
    let method: String
    /// As written, e.g. `/api/dead-letters/:id`.
    let pattern: String
    let segments: [Substring]
    let audience: Audience
    let changesState: Bool
    /// Reachable without a session (the login page itself).
    let isPublic: Bool
    let action: @Sendable (DashboardRequest) throws -> HTTPServerResponse

    init(_ method: String, _ pattern: String, _ audience: Audience, changesState: Bool = false, isPublic: Bool = false,
         _ action: @escaping @Sendable (DashboardRequest) throws -> HTTPServerResponse) {
        precondition(!changesState || method == "POST", "a route that changes state must be a POST: \(pattern)")
        self.method = method
        self.pattern = pattern
        self.segments = pattern.split(separator: "/")
        self.audience = audience
        self.changesState = changesState
        self.isPublic = isPublic
        self.action = action
    }

    func match(_ path: [Substring]) -> [String: Int]? {
        guard path.count == segments.count else { return nil }
        var captures: [String: Int] = [:]
        for (pattern, part) in zip(segments, path) {
            if pattern.hasPrefix(":") {
                guard let value = Int(part), value > 0 else { return nil }
                captures[String(pattern.dropFirst())] = value
            } else if pattern != part {
                return nil
            }
        }
        return captures
    }
}

enum RouteMatch {
    case found(Route, [String: Int])
    case methodNotAllowed(allowed: [String])
    case notFound
}

struct Router: Sendable {
    let routes: [Route]

    func match(method: String, path: String) -> RouteMatch {
        let parts = path.split(separator: "/")
        var allowed: [String] = []
        for route in routes {
            guard let captures = route.match(parts) else { continue }
            if route.method == method || (method == "HEAD" && route.method == "GET") { return .found(route, captures) }
            allowed.append(route.method)
        }
        return allowed.isEmpty ? .notFound : .methodNotAllowed(allowed: allowed)
    }

    /// Whether the path belongs to the API (a bearer token) rather than the pages.
    static func isAPIPath(_ path: String) -> Bool { path == "/metrics" || path.hasPrefix("/api/") }
}

/// A request as a route's action sees it.
struct DashboardRequest {
    let http: HTTPServerRequest
    let captures: [String: Int]
    /// The logged-in browser, for pages with forms (nil for the API and an open dashboard).
    let session: Session?
    let dashboard: Dashboard

    func id(_ name: String) -> Int { captures[name] ?? 0 }

    /// Decoded `application/x-www-form-urlencoded` body fields.
    var form: [(name: String, value: String)] { FormDecoding.pairs(String(decoding: http.body, as: UTF8.self)) }
    func formValue(_ name: String) -> String? {
        form.first { $0.name == name }?.value
    }

    /// Runs `body` with a database connection of the dashboard's pool.
    func database<T>(_ body: (PGConnection) throws -> T) throws -> T {
        try dashboard.pool.with(body)
    }

    /// Where an action came from, for herald.admin_log.
    var source: String {
        let address = http.remoteAddress.isEmpty ? "unknown address" : http.remoteAddress
        return "dashboard \(address)" + (http.header("user-agent").map { " (\(String($0.prefix(120))))" } ?? "")
    }
}

/// An answer other than success, with the status it deserves; pages and the API render it their way.
struct DashboardError: Error {
    var status: Int
    var message: String
    var headers: [HTTPHeader] = []
    init(_ status: Int, _ message: String, headers: [HTTPHeader] = []) {
        self.status = status
        self.message = message
        self.headers = headers
    }
}

extension HTTPServerResponse {
    static func json(_ status: Int, _ value: JSONValue, headers: [HTTPHeader] = []) -> HTTPServerResponse {
        .json(status, Array(value.serialized.utf8), headers: headers + [HTTPHeader(name: "cache-control", value: "no-store")])
    }

    static func redirect(_ location: String, headers: [HTTPHeader] = []) -> HTTPServerResponse {
        HTTPServerResponse(status: 303, headers: [HTTPHeader(name: "location", value: location)] + headers)
    }

    static func html(_ status: Int, _ text: String, headers: [HTTPHeader] = []) -> HTTPServerResponse {
        HTTPServerResponse(status: status, headers: [
            HTTPHeader(name: "content-type", value: "text/html; charset=utf-8"),
            HTTPHeader(name: "cache-control", value: "no-store"),
            // No script, no framing by another site, no inline script even if an escape were missed.
            HTTPHeader(name: "content-security-policy", value: "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"),
            HTTPHeader(name: "x-content-type-options", value: "nosniff"),
            HTTPHeader(name: "referrer-policy", value: "same-origin"),
        ] + headers, body: Array(text.utf8))
    }
}
