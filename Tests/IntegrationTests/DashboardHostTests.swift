import Dashboard
import Foundation
import Glibc
import Postgres
import Testing
import TestSupport

/// `herald dashboard` (the real binary) answers only under its own names, marks its cookie
/// `Secure` when the browser reached it over TLS, and refuses an oversized body before it is sent.
@Suite(.serialized) struct DashboardHostTests {
    static let token = "host-test-token-5d1e8c0b7a9f"
    static let deviceToken = "device-token-rebinding-7f3q"
    static let bodyMarker = "message-body-rebinding-k2v9"

    /// A running `herald dashboard` over a fixture holding a dead letter, a job and a campaign,
    /// each with a device token and message text an attacker's page must not read.
    struct Running {
        let fixture: DeadLetterFixture
        let process: HeraldProcess
        let base: String
        let port: Int
        let ids: [String: Int]

        init(arguments: [String] = [], environment: [String: String] = [:]) throws {
            fixture = try DeadLetterFixture()
            let deadLetter = try fixture.add(queue: "alerts", reason: "INTERNAL: \(DashboardHostTests.bodyMarker)", token: DashboardHostTests.deviceToken)
            let job = try fixture.connection.query("""
                INSERT INTO herald.jobs (message) VALUES (jsonb_build_object('token', $1::text, 'notification', jsonb_build_object('body', $2::text)))
                RETURNING id
                """, [.text(DashboardHostTests.deviceToken), .text(DashboardHostTests.bodyMarker)]).int(0, 0)!
            let campaign = try fixture.connection.query("SELECT herald.create_campaign('rebinding-campaign')").int(0, 0)!
            ids = ["dead-letters": deadLetter, "jobs": job, "campaigns": campaign]
            process = try HeraldProcess(["dashboard", "--address", "127.0.0.1:0"] + arguments,
                                        environment: ["DATABASE_URL": fixture.database.url].merging(environment) { $1 })
            try process.start()
            var served = ""
            let process = self.process
            let started = waitUntil(timeout: 30) {
                guard let range = process.output.range(of: #"serving http://127\.0\.0\.1:\d+"#, options: .regularExpression) else { return false }
                served = String(process.output[range].dropFirst("serving ".count))
                return true
            }
            guard started, let port = Int(served.split(separator: ":").last ?? "") else {
                process.signal(SIGTERM)
                throw TestFailure("herald dashboard did not start: \(process.output)")
            }
            base = served
            self.port = port
        }

        func close() {
            process.signal(SIGTERM)
            // SIGTERM ends the dashboard's service group gracefully: the listener closes, status 0.
            #expect(process.wait(timeout: 30) == 0, "herald dashboard did not stop cleanly on SIGTERM: \(process.output)")
            fixture.close()
        }

        /// Every route of the router, with the fixture's ids in place of `:id`.
        var routes: [(method: String, path: String)] {
            Dashboard.routeSignatures.map { route in
                var parts = route.path.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
                for index in parts.indices where parts[index] == ":id" {
                    let owner = parts[..<index].last { !$0.isEmpty && $0 != "api" } ?? ""
                    parts[index] = String(ids[owner] ?? 1)
                }
                return (route.method, parts.joined(separator: "/"))
            }
        }

        func request(_ method: String, _ path: String, host: String, headers: [String: String] = [:], body: String? = nil) throws -> CurlResult {
            try curl(base + path, method: method, headers: headers.merging(["Host": host]) { $1 }, body: method == "POST" ? (body ?? "") : nil, over: .http1)
        }

        /// Rows that an action would change: a refused request changes none of them.
        func state() throws -> [Int] {
            [try fixture.count("SELECT count(*) FROM herald.dead_letters"), try fixture.count("SELECT count(*) FROM herald.jobs"),
             try fixture.count("SELECT count(*) FROM herald.admin_log"),
             try fixture.count("SELECT count(*) FROM herald.campaigns WHERE state IN ('paused', 'cancelled')")]
        }
    }

    /// Under a foreign Host, every route (enumerated from the router) gets 421 with no device token
    /// and no message text, read-only or with every credential a logged-in operator has; the same
    /// routes under 127.0.0.1:PORT do answer, so the refusal is the Host's doing.
    @Test(arguments: [false, true]) func aForeignHostGetsNoPageAndNoDataOnAnyRoute(withToken: Bool) throws {
        let running = try Running(environment: withToken ? ["HERALD_DASHBOARD_TOKEN": Self.token] : [:])
        defer { running.close() }
        let own = "127.0.0.1:\(running.port)"
        var credentials: [String: String] = [:]
        var form = "{\"all\": true}"
        if withToken {
            let login = try running.request("POST", "/login", host: own, headers: ["Content-Type": "application/x-www-form-urlencoded"],
                                            body: "token=\(Self.token)&next=%2F")
            let cookie = try #require(login.headers["set-cookie"]?.split(separator: ";").first.map(String.init), "\(login.body)")
            let page = try running.request("GET", "/dead-letters", host: own, headers: ["Cookie": cookie])
            let marker = "name=\"csrf\" value=\""
            let start = try #require(page.body.range(of: marker), "\(page.body)")
            form = "csrf=" + String(page.body[start.upperBound...].prefix { $0 != "\"" })
            credentials = ["Cookie": cookie, "Authorization": "Bearer \(Self.token)", "Content-Type": "application/x-www-form-urlencoded"]
        }
        let routes = running.routes
        #expect(routes.count == Dashboard.routeSignatures.count && routes.count >= 30, "\(routes)")
        let before = try running.state()
        for host in ["attacker.example:\(running.port)", "attacker.example", "127.0.0.1.attacker.example:\(running.port)",
                     "localhost:\(running.port + 1)", "127.0.0.1"] {
            for route in routes {
                let answer = try running.request(route.method, route.path, host: host, headers: credentials, body: form)
                #expect(answer.status == 421, "\(route.method) \(route.path) under Host \(host): \(answer.status) \(answer.body.prefix(200))")
                #expect(!answer.body.contains(Self.deviceToken) && !answer.body.contains(Self.bodyMarker) && !answer.body.contains(Self.token),
                        "\(route.method) \(route.path) under Host \(host) leaked: \(answer.body.prefix(300))")
                #expect(answer.body.contains("HERALD_DASHBOARD_PUBLIC_URL"), "the refusal names the setting: \(answer.body.prefix(300))")
                #expect(answer.headers["set-cookie"] == nil)
            }
        }
        #expect(try running.state() == before, "no refused request changed anything")

        // The control: under the dashboard's own names the same GETs answer with the data.
        for host in [own, "localhost:\(running.port)", "[::1]:\(running.port)", "LOCALHOST:\(running.port)"] {
            for route in routes where route.method == "GET" && route.path != "/login" {
                let answer = try running.request("GET", route.path, host: host, headers: credentials)
                #expect(answer.status == 200, "\(route.path) under Host \(host): \(answer.status) \(answer.body.prefix(200))")
            }
            let letters = try running.request("GET", "/api/dead-letters", host: host, headers: credentials)
            #expect(letters.body.contains(Self.deviceToken), "the data is there for the dashboard's own names")
        }
    }

    /// A public URL adds its host (with or without the scheme's port), nothing else; an https one
    /// makes the cookie Secure.
    @Test func aPublicURLAddsItsHostAndAnHTTPSOneMakesTheCookieSecure() throws {
        let running = try Running(arguments: ["--public-url", "https://Herald.Example.com/"], environment: ["HERALD_DASHBOARD_TOKEN": Self.token])
        defer { running.close() }
        let bearer = ["Authorization": "Bearer \(Self.token)"]
        for host in ["herald.example.com", "herald.example.com:443", "HERALD.example.com"] {
            let answer = try running.request("GET", "/api/dead-letters", host: host, headers: bearer)
            #expect(answer.status == 200 && answer.body.contains(Self.deviceToken), "Host \(host): \(answer.status)")
        }
        for host in ["herald.example.com:8443", "example.com", "herald.example.com.attacker.example"] {
            let answer = try running.request("GET", "/api/dead-letters", host: host, headers: bearer)
            #expect(answer.status == 421 && !answer.body.contains(Self.deviceToken), "Host \(host): \(answer.status)")
            #expect(answer.body.contains("herald.example.com:443"), "the refusal lists the names it answers to: \(answer.body)")
        }
        let login = try running.request("POST", "/login", host: "herald.example.com", headers: ["Content-Type": "application/x-www-form-urlencoded"],
                                        body: "token=\(Self.token)&next=%2F")
        let cookie = try #require(login.headers["set-cookie"])
        #expect(login.status == 303 && cookie.hasSuffix("; Secure"), "\(cookie)")
        // Reached directly on the loopback address, the public URL still says how browsers come.
        let direct = try running.request("POST", "/logout", host: "127.0.0.1:\(running.port)")
        #expect(direct.headers["set-cookie"]?.hasSuffix("; Secure") == true)
    }

    /// `X-Forwarded-Proto: https` makes the cookie Secure only from a trusted proxy's address.
    @Test func aTrustedProxyIsBelievedAboutHTTPSAndNoOneElseIs() throws {
        let own = { (running: Running) in "127.0.0.1:\(running.port)" }
        func cookie(_ running: Running, forwarded: String?) throws -> String {
            var headers = ["Content-Type": "application/x-www-form-urlencoded"]
            if let forwarded { headers["X-Forwarded-Proto"] = forwarded }
            let login = try running.request("POST", "/login", host: own(running), headers: headers, body: "token=\(Self.token)&next=%2F")
            #expect(login.status == 303, "\(login.body)")
            return login.headers["set-cookie"] ?? ""
        }
        // No proxy configured: the header is anyone's claim.
        var running = try Running(environment: ["HERALD_DASHBOARD_TOKEN": Self.token])
        #expect(try !cookie(running, forwarded: "https").contains("Secure"))
        #expect(try !cookie(running, forwarded: nil).contains("Secure"))
        running.close()

        // The test's curl connects from 127.0.0.1: trusted through the flag.
        running = try Running(arguments: ["--trusted-proxy", "10.1.2.3", "--trusted-proxy", "127.0.0.1"], environment: ["HERALD_DASHBOARD_TOKEN": Self.token])
        #expect(try cookie(running, forwarded: "https").hasSuffix("; Secure"))
        #expect(try cookie(running, forwarded: "http, https").hasSuffix("; Secure"), "the nearest proxy's value is the last")
        #expect(try !cookie(running, forwarded: "http").contains("Secure"))
        #expect(try !cookie(running, forwarded: nil).contains("Secure"))
        running.close()

        // Through the variable, a list; an IPv4-mapped spelling is the same address.
        running = try Running(environment: ["HERALD_DASHBOARD_TOKEN": Self.token, "HERALD_DASHBOARD_TRUSTED_PROXIES": "10.1.2.3, ::ffff:127.0.0.1"])
        #expect(try cookie(running, forwarded: "https").hasSuffix("; Secure"))
        running.close()

        // A proxy at another address does not vouch for this peer.
        running = try Running(arguments: ["--trusted-proxy", "10.1.2.3"], environment: ["HERALD_DASHBOARD_TOKEN": Self.token])
        #expect(try !cookie(running, forwarded: "https").contains("Secure"))
        running.close()
    }

    @Test func badPublicURLsAndProxyAddressesAreRefusedNamingTheSetting() throws {
        let database = try TestDatabase.fresh()
        defer { database.drop() }
        let environment = ["DATABASE_URL": database.url]
        let cases: [([String], [String: String], String)] = [
            (["--public-url", "herald.example.com"], [:], #"--public-url "herald.example.com" is not an http:// or https:// URL"#),
            (["--public-url", "https://herald.example.com/ops"], [:], "has a path, query or fragment"),
            (["--public-url", "https://herald.example.com:99999"], [:], "port that is not a number from 1 to 65535"),
            ([], ["HERALD_DASHBOARD_PUBLIC_URL": "https://"], #"HERALD_DASHBOARD_PUBLIC_URL "https://" has no host"#),
            (["--trusted-proxy", "proxy.internal"], [:], #"--trusted-proxy "proxy.internal" is not an IP address"#),
            ([], ["HERALD_DASHBOARD_TRUSTED_PROXIES": "127.0.0.1,10.0.0.0/8"], #"HERALD_DASHBOARD_TRUSTED_PROXIES "10.0.0.0/8" is not an IP address"#),
        ]
        for (arguments, variables, words) in cases {
            let run = try HeraldProcess.run(["dashboard", "--address", "127.0.0.1:0"] + arguments, environment: environment.merging(variables) { $1 }, timeout: 30)
            #expect(run.status == 2 && run.output.contains(words), "\(arguments) \(variables): \(run.output)")
        }
    }

    /// A request declaring a 10 MB body gets 413 before any of the body is sent, and the
    /// connection closes; with `Expect: 100-continue` the client is never told to go on.
    @Test func aDeclaredTenMegabyteBodyGets413BeforeItIsSent() throws {
        let running = try Running(environment: ["HERALD_DASHBOARD_TOKEN": Self.token])
        defer { running.close() }
        let before = try running.state()
        for expect in ["", "Expect: 100-continue\r\n"] {
            let socket = try ConnectedSocket(port: running.port)
            defer { socket.close() }
            let started = Date()
            try socket.send("POST /api/dead-letters/retry HTTP/1.1\r\nHost: 127.0.0.1:\(running.port)\r\nAuthorization: Bearer \(Self.token)\r\n"
                            + "Content-Type: application/json\r\nContent-Length: 10485760\r\n\(expect)\r\n")
            // Not one byte of the body is sent: the answer and the close come anyway.
            let answer = try socket.receiveAll()
            let seconds = Date().timeIntervalSince(started)
            #expect(answer.hasPrefix("HTTP/1.1 413 Payload Too Large\r\n"), "\(expect): \(answer)")
            #expect(answer.contains("Content-Length 10485760 is over the limit of 65536 bytes"), "\(answer)")
            #expect(!answer.contains("100 Continue"))
            #expect(seconds < 5, "answered at once, not after the body or a timeout: \(seconds) s")
        }
        #expect(try running.state() == before)
        // A body within the limit is still taken.
        let small = try curl(running.base + "/api/dead-letters/\(running.ids["dead-letters"]!)/retry", method: "POST",
                             headers: ["Authorization": "Bearer \(Self.token)", "Content-Type": "application/json"], body: "{}", over: .http1)
        #expect(small.status == 200, "\(small.body)")
    }
}
