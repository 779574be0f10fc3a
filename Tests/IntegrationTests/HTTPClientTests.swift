import Dispatch
import Emulator
import Foundation
import Glibc
import HTTPClient
import HTTPServer
import Testing
import TestSupport

/// Polls until `count` completions came out or `seconds` passed (never waits for good).
func collect(_ client: HTTPClient, count: Int, within seconds: Double = 60) -> [HTTPCompletion] {
    var completions: [HTTPCompletion] = []
    let deadline = Date().addingTimeInterval(seconds)
    while completions.count < count && Date() < deadline {
        completions += client.poll(timeoutMilliseconds: 100)
    }
    return completions
}

@Suite struct HTTPClientTests {
    @Test func twoThousandRequestsShareFewConnections() throws {
        // A slow answer keeps streams open, so the per-connection peak shows the multiplexing
        // however fast the machine is. Over TLS, h2 by ALPN, as FCM is reached.
        let emulator = try startWorkerEmulator {
            $0.latencyMilliseconds = 300
            $0.threads = 2
        }
        defer { emulator.stop() }
        let account = try TestAccount(emulator)
        let accessToken = try account.accessToken()
        let before = emulator.serverStatistics.connectionsAccepted

        var configuration = HTTPClientConfiguration()
        configuration.caFile = try TestTLS.caFile()
        configuration.requestTimeoutMilliseconds = 60_000
        let client = try HTTPClient(configuration: configuration)
        let url = emulator.sendURL(projectID: account.projectID)
        let total = 2_000
        for tag in 0..<total {
            // Every fourth request carries no token and must be refused; the rest are delivered.
            var headers = ["Content-Type: application/json"]
            if tag % 4 != 3 { headers.append("Authorization: Bearer \(accessToken)") }
            client.submit(HTTPRequest(url: url, headers: headers, body: Array(tokenMessage("device-\(tag)").utf8)), tag: UInt64(tag))
        }
        #expect(client.inFlight == total)
        let completions = collect(client, count: total, within: 120)
        #expect(completions.count == total)
        #expect(client.inFlight == 0)
        #expect(Set(completions.map(\.tag)).count == total)
        for completion in completions {
            let response = try completion.result.get()
            if completion.tag % 4 == 3 {
                #expect(response.status == 401, "tag \(completion.tag)")
            } else {
                #expect(response.status == 200, "tag \(completion.tag)")
                #expect(String(decoding: response.body, as: UTF8.self).contains("\"name\":\"projects/\(account.projectID)/messages/"))
                #expect(response.header("Content-Type")?.hasPrefix("application/json") == true)
            }
        }
        let statistics = emulator.serverStatistics
        let connections = statistics.connectionsAccepted - before
        #expect(connections >= 1 && connections <= configuration.maxConnections, "\(connections) connections")
        #expect(statistics.peakStreamsPerConnection >= 50, "peak \(statistics.peakStreamsPerConnection) streams on one connection")
        #expect(statistics.peakStreamsPerConnection <= configuration.maxStreamsPerConnection)
        #expect(statistics.http2Requests >= total)

        // The connections are kept: a second burst opens none.
        let kept = emulator.serverStatistics.connectionsAccepted
        for tag in 0..<100 {
            client.submit(HTTPRequest(method: "GET", url: emulator.baseURL + "/emulator/health"), tag: UInt64(tag))
        }
        let again = collect(client, count: 100)
        #expect(again.count == 100)
        #expect(again.allSatisfy { (try? $0.result.get().status) == 200 })
        #expect(emulator.serverStatistics.connectionsAccepted == kept)
    }

    @Test func refusedConnectionIsAConnectionError() throws {
        let emulator = try startEmulator()
        let url = emulator.baseURL + "/emulator/health"
        emulator.stop()  // nothing listens on its port any more

        let client = try HTTPClient()
        client.submit(HTTPRequest(method: "GET", url: url), tag: 7)
        let completions = collect(client, count: 1, within: 20)
        try #require(completions.count == 1)
        #expect(completions[0].tag == 7)
        guard case .failure(let error) = completions[0].result else {
            Issue.record("a closed port answered")
            return
        }
        #expect(error.kind == .connection, "\(error)")

        #expect(throws: HTTPClientError.self) { try client.perform(HTTPRequest(method: "GET", url: url)) }
        do {
            _ = try client.perform(HTTPRequest(method: "GET", url: url))
        } catch {
            #expect(error.kind == .connection)
        }
    }

    @Test func slowAnswerIsATimeout() throws {
        let emulator = try startEmulator { $0.latencyMilliseconds = 3_000 }
        defer { emulator.stop() }
        let account = try TestAccount(emulator)
        let accessToken = try account.accessToken()

        var configuration = HTTPClientConfiguration()
        configuration.requestTimeoutMilliseconds = 300
        let client = try HTTPClient(configuration: configuration)
        let started = Date()
        client.submit(HTTPRequest(url: emulator.sendURL(projectID: account.projectID),
                                  headers: ["Content-Type: application/json", "Authorization: Bearer \(accessToken)"],
                                  body: Array(tokenMessage("slow").utf8)), tag: 1)
        let completions = collect(client, count: 1, within: 20)
        try #require(completions.count == 1)
        guard case .failure(let error) = completions[0].result else {
            Issue.record("the slow answer came in time")
            return
        }
        #expect(error.kind == .timeout, "\(error)")
        #expect(Date().timeIntervalSince(started) < 2.5)
        #expect(!error.message.contains(accessToken))
    }

    @Test func wakeReturnsPollEarly() throws {
        let client = try HTTPClient()
        let returned = DispatchSemaphore(value: 0)
        let started = DispatchSemaphore(value: 0)
        let elapsed = ElapsedBox()
        let thread = Thread {
            started.signal()
            let begin = Date()
            _ = client.poll(timeoutMilliseconds: 20_000)
            elapsed.seconds = Date().timeIntervalSince(begin)
            returned.signal()
        }
        thread.start()
        #expect(started.wait(timeout: .now() + 5) == .success)
        client.wake()  // before or during the poll: either way it returns at once
        #expect(returned.wait(timeout: .now() + 5) == .success, "poll did not return after wake()")
        #expect(elapsed.seconds < 5)
    }

    @Test func readableExtraDescriptorReturnsPollEarly() throws {
        let client = try HTTPClient()
        var fds: [Int32] = [0, 0]
        try #require(pipe(&fds) == 0)
        defer { close(fds[0]); close(fds[1]) }
        var byte: UInt8 = 1
        try #require(write(fds[1], &byte, 1) == 1)
        let begin = Date()
        let completions = client.poll(timeoutMilliseconds: 10_000, extraFileDescriptor: fds[0])
        #expect(completions.isEmpty)
        #expect(Date().timeIntervalSince(begin) < 5)
    }

    @Test func tlsNeedsTheRightAuthority() throws {
        let files = try makeCertificate()
        defer { try? FileManager.default.removeItem(atPath: files.directory) }
        let emulator = try startEmulator { $0.tls = .init(certificateFile: files.certificate, privateKeyFile: files.key) }
        defer { emulator.stop() }
        let url = emulator.baseURL + "/emulator/health"
        #expect(url.hasPrefix("https://"))

        var trusting = HTTPClientConfiguration()
        trusting.caFile = files.certificate
        let client = try HTTPClient(configuration: trusting)
        for tag in 0..<20 { client.submit(HTTPRequest(method: "GET", url: url), tag: UInt64(tag)) }
        let completions = collect(client, count: 20, within: 30)
        #expect(completions.count == 20)
        for completion in completions { #expect((try completion.result.get()).status == 200) }
        #expect(emulator.serverStatistics.http2Requests >= 20)
        #expect(emulator.serverStatistics.tlsConnections >= 1)
        #expect(try client.perform(HTTPRequest(method: "GET", url: url)).status == 200)

        let untrusting = try HTTPClient()
        untrusting.submit(HTTPRequest(method: "GET", url: url), tag: 1)
        let refused = collect(untrusting, count: 1, within: 20)
        try #require(refused.count == 1)
        guard case .failure(let error) = refused[0].result else {
            Issue.record("a self-signed certificate was accepted without its authority")
            return
        }
        #expect(error.kind == .tls, "\(error)")
    }

    /// The emulator's own certificate (`EmulatorCertificate`, as `herald work` makes it for its
    /// in-process emulator) is verified as FCM's is: accepted with its authority given as the CA
    /// file, refused without it, and refused for an address it does not name.
    @Test func theEmulatorsOwnCertificateIsVerifiedLikeFCMs() throws {
        let named = try EmulatorCertificate()
        defer { named.remove() }
        let emulator = try startEmulator { $0.tls = named.files }
        defer { emulator.stop() }
        let url = emulator.baseURL + "/emulator/health"
        #expect(url.hasPrefix("https://127.0.0.1:"))
        var trusting = HTTPClientConfiguration()
        trusting.caFile = named.caFile
        let client = try HTTPClient(configuration: trusting)
        #expect(try client.perform(HTTPRequest(method: "GET", url: url)).status == 200)
        #expect(try client.perform(HTTPRequest(method: "GET", url: "https://localhost:\(emulator.port)/emulator/health")).status == 200)
        #expect(throws: HTTPClientError.self) { try HTTPClient().perform(HTTPRequest(method: "GET", url: url)) }

        // A certificate for localhost alone, reached at 127.0.0.1: the name does not match.
        let other = try EmulatorCertificate(hosts: ["localhost"])
        defer { other.remove() }
        let misnamed = try startEmulator { $0.tls = other.files }
        defer { misnamed.stop() }
        var trustingOther = HTTPClientConfiguration()
        trustingOther.caFile = other.caFile
        do {
            _ = try HTTPClient(configuration: trustingOther).perform(HTTPRequest(method: "GET", url: misnamed.baseURL + "/emulator/health"))
            Issue.record("a certificate for localhost was accepted at 127.0.0.1")
        } catch {
            #expect(error.kind == .tls, "\(error)")
        }
        #expect(try HTTPClient(configuration: trustingOther).perform(
            HTTPRequest(method: "GET", url: "https://localhost:\(misnamed.port)/emulator/health")).status == 200)
    }

    /// Plain http:// (a loopback emulator a user asked for) goes over HTTP/1.1, one request at a
    /// time per kept-alive connection, with libcurl 7.88 and 8.x alike: 2,000 requests, 200 at
    /// a time, every one answered, none over HTTP/2, on at most the client's connections.
    @Test func plainHTTPGoesOverHTTP1OnKeptConnections() throws {
        let emulator = try startEmulator()
        defer { emulator.stop() }
        let url = emulator.baseURL + "/emulator/health"
        #expect(url.hasPrefix("http://"))
        let configuration = HTTPClientConfiguration()
        let client = try HTTPClient(configuration: configuration)
        let total = 2_000
        var submitted = 0, answered = 0, ok = 0
        var failures: [String] = []
        let deadline = Date().addingTimeInterval(120)
        while answered < total && Date() < deadline {
            while submitted < total && submitted - answered < 200 {
                client.submit(HTTPRequest(method: "GET", url: url), tag: UInt64(submitted))
                submitted += 1
            }
            for completion in client.poll(timeoutMilliseconds: 100) {
                answered += 1
                switch completion.result {
                case .success(let response) where response.status == 200: ok += 1
                case .success(let response): failures.append("status \(response.status)")
                case .failure(let error): failures.append("\(error)")
                }
            }
        }
        #expect(ok == total, "\(ok) of \(total) answered 200; first failures: \(failures.prefix(3))")
        let statistics = emulator.serverStatistics
        #expect(statistics.http2Requests == 0 && statistics.http1Requests == total,
                "\(statistics.http1Requests) HTTP/1.1 and \(statistics.http2Requests) HTTP/2 requests")
        #expect(statistics.connectionsAccepted >= 1 && statistics.connectionsAccepted <= configuration.maxConnections,
                "\(statistics.connectionsAccepted) connections")
        #expect(try client.perform(HTTPRequest(method: "GET", url: url)).status == 200)
    }

    @Test func aConnectionOlderThanItsLifetimeIsReplaced() throws {
        let files = try makeCertificate()
        defer { try? FileManager.default.removeItem(atPath: files.directory) }
        let emulator = try startEmulator { $0.tls = .init(certificateFile: files.certificate, privateKeyFile: files.key) }
        defer { emulator.stop() }
        let url = emulator.baseURL + "/emulator/health"

        /// Connections the emulator accepted for two requests `apart` seconds apart.
        func connections(maxAge: Int, apart: Double) throws -> Int {
            var configuration = HTTPClientConfiguration()
            configuration.caFile = files.certificate
            configuration.maxConnectionAgeSeconds = maxAge
            let client = try HTTPClient(configuration: configuration)
            let before = emulator.serverStatistics.connectionsAccepted
            for tag in 1...2 {
                // The wait is what is tested: the connection grows older than its lifetime.
                if tag == 2 { Thread.sleep(forTimeInterval: apart) }
                client.submit(HTTPRequest(method: "GET", url: url), tag: UInt64(tag))
                let answers = collect(client, count: 1, within: 20)
                try #require(answers.count == 1)
                #expect(try answers[0].result.get().status == 200)
            }
            return emulator.serverStatistics.connectionsAccepted - before
        }
        // The default keeps the connection for the second request; a 1 s lifetime does not.
        #expect(try connections(maxAge: HTTPClientConfiguration.defaultMaxConnectionAgeSeconds, apart: 2) == 1)
        #expect(try connections(maxAge: 1, apart: 2) == 2)
    }

    @Test func aBusyConnectionIsReplacedWhenItGrowsOld() throws {
        // libcurl retires an old connection only when it falls idle; a sender's never does.
        let files = try makeCertificate()
        defer { try? FileManager.default.removeItem(atPath: files.directory) }
        let emulator = try startEmulator { $0.tls = .init(certificateFile: files.certificate, privateKeyFile: files.key) }
        defer { emulator.stop() }
        let url = emulator.baseURL + "/emulator/health"

        /// Keeps 40 requests in flight on at most 2 connections for `seconds`; what came back,
        /// the connections the emulator accepted, and the failures.
        func busy(maxAge: Int, seconds: Double) throws -> (answered: Int, connections: Int, failures: [String]) {
            var configuration = HTTPClientConfiguration()
            configuration.caFile = files.certificate
            configuration.maxConnections = 2
            configuration.maxConnectionAgeSeconds = maxAge
            let client = try HTTPClient(configuration: configuration)
            let before = emulator.serverStatistics.connectionsAccepted
            var next = 0, answered = 0
            var failures: [String] = []
            while next < 40 { client.submit(HTTPRequest(method: "GET", url: url), tag: UInt64(next)); next += 1 }
            // How long the load lasts is what is tested: the connections grow older than their age.
            let end = Date().addingTimeInterval(seconds)
            while answered < next {
                for completion in client.poll(timeoutMilliseconds: 100) {
                    answered += 1
                    switch completion.result {
                    case .success(let response) where response.status == 200: break
                    case .success(let response): failures.append("status \(response.status)")
                    case .failure(let error): failures.append("\(error)")
                    }
                    if Date() < end { client.submit(HTTPRequest(method: "GET", url: url), tag: UInt64(next)); next += 1 }
                }
                if Date() > end.addingTimeInterval(30) { failures.append("\(next - answered) requests never answered"); break }
            }
            return (answered, emulator.serverStatistics.connectionsAccepted - before, failures)
        }
        let kept = try busy(maxAge: HTTPClientConfiguration.defaultMaxConnectionAgeSeconds, seconds: 3.5)
        let replaced = try busy(maxAge: 1, seconds: 3.5)
        #expect(kept.failures.isEmpty && replaced.failures.isEmpty, "\(kept.failures.prefix(3)) \(replaced.failures.prefix(3))")
        // Two connections carry the load throughout with the default age; with 1 s, each second
        // brings fresh ones while the old finish what they carry.
        #expect(kept.connections <= 2, "\(kept.connections) connections within the default age")
        #expect(replaced.connections >= 5, "\(replaced.connections) connections in 3.5 s with a 1 s age")
        print("40 in flight on 2 connections for 3.5 s: default age \(kept.answered) answers on \(kept.connections) connections; 1 s age \(replaced.answered) answers on \(replaced.connections) connections")
    }

    @Test func performPostsAndReadsHeaders() throws {
        let emulator = try startEmulator()
        defer { emulator.stop() }
        let client = try HTTPClient()
        let response = try client.perform(HTTPRequest(url: emulator.sendURL(projectID: "p"),
                                                      headers: ["Content-Type: application/json"],
                                                      body: Array(tokenMessage("t").utf8)))
        #expect(response.status == 401)
        #expect(response.header("CONTENT-TYPE")?.hasPrefix("application/json") == true)
        #expect(!response.body.isEmpty)
        let health = try client.perform(HTTPRequest(method: "GET", url: emulator.baseURL + "/emulator/health"))
        #expect(health.status == 200)
    }

    /// Handles keep their options from one request to the next; what changes (method, URL,
    /// headers, a body larger than the handle's buffer, an empty body) must still go out as asked.
    @Test(arguments: [true, false]) func reusedHandlesSendEachRequestAsAsked(tls: Bool) throws {
        let server = HTTPServer(configuration: .init(host: "127.0.0.1", port: 0, threads: 1, tls: tls ? try TestTLS.files() : nil)) { request in
            let echo = "\(request.method) \(request.path) x-case=\(request.header("x-case") ?? "-") body=\(request.body.count):"
            return HTTPServerResponse(status: 200, body: Array(echo.utf8) + request.body)
        }
        try server.start()
        defer { server.stop() }
        let base = "\(tls ? "https" : "http")://127.0.0.1:\(server.port)"
        let large = [UInt8](repeating: UInt8(ascii: "z"), count: 5000)
        let requests: [(HTTPRequest, String)] = [
            (HTTPRequest(url: base + "/a", headers: ["X-Case: one"], body: Array("first".utf8)), "POST /a x-case=one body=5:first"),
            (HTTPRequest(method: "GET", url: base + "/b", headers: ["X-Case: two"]), "GET /b x-case=two body=0:"),
            (HTTPRequest(url: base + "/c", headers: ["X-Case: three"], body: large), "POST /c x-case=three body=5000:" + String(repeating: "z", count: 5000)),
            (HTTPRequest(url: base + "/a", headers: ["X-Case: one"], body: Array("2nd".utf8)), "POST /a x-case=one body=3:2nd"),
            (HTTPRequest(method: "PUT", url: base + "/d", body: []), "PUT /d x-case=- body=0:"),
            (HTTPRequest(url: base + "/a", headers: ["X-Case: one"], body: Array("last".utf8)), "POST /a x-case=one body=4:last"),
        ]
        var configuration = HTTPClientConfiguration()
        configuration.caFile = tls ? try TestTLS.caFile() : nil
        let client = try HTTPClient(configuration: configuration)
        // One at a time, so each request takes the handle the previous one gave back.
        for (tag, (request, expected)) in requests.enumerated() {
            client.submit(request, tag: UInt64(tag))
            let completions = collect(client, count: 1)
            #expect(completions.count == 1)
            let response = try #require(try completions.first?.result.get())
            #expect(String(decoding: response.body, as: UTF8.self) == expected, "request \(tag)")
        }
        // And through perform's own handle.
        for (request, expected) in requests {
            let response = try client.perform(request)
            #expect(String(decoding: response.body, as: UTF8.self) == expected)
        }
    }
    /// A request's own header lines (`varyingHeaders`) go out with it and with no other, beside
    /// the lines it shares with the rest, and a URL of its own on an origin already parsed (one
    /// path per device, as APNs's) reaches that path: 600 requests on reused handles, some
    /// without lines of their own after ones with, some with a query (parsed whole, on the same
    /// handles), each answered with what the server saw.
    @Test(arguments: [true, false]) func ownHeaderLinesAndPathsGoWithTheirRequestOnly(tls: Bool) throws {
        let server = HTTPServer(configuration: .init(host: "127.0.0.1", port: 0, threads: 2, tls: tls ? try TestTLS.files() : nil)) { request in
            let ids = request.headers.filter { $0.name == "x-request-id" }.map(\.value)
            let seen = "\(request.path)?\(request.query) ids=\(ids.joined(separator: ",")) extra=\(request.header("x-extra") ?? "-") shared=\(request.header("x-shared") ?? "-")"
            return HTTPServerResponse(status: 200, body: Array(seen.utf8))
        }
        try server.start()
        defer { server.stop() }
        let base = "\(tls ? "https" : "http")://127.0.0.1:\(server.port)"
        let shared = ["X-Shared: yes", "Content-Type: application/json"]
        func request(_ tag: Int) -> (HTTPRequest, String) {
            let device = String(tag, radix: 16) + String(repeating: "ab", count: 20)
            let query = tag % 7 == 0 ? "q=\(tag)" : ""
            let url = base + "/3/device/" + device + (query.isEmpty ? "" : "?" + query)
            var own: [String] = []
            if tag % 5 != 0 { own.append("X-Request-Id: \(tag)") }
            if tag % 3 == 0 { own.append("X-Extra: " + String(repeating: "e", count: tag % 300 + 1)) }
            let expected = "/3/device/\(device)?\(query) ids=\(tag % 5 != 0 ? String(tag) : "") extra=\(tag % 3 == 0 ? String(repeating: "e", count: tag % 300 + 1) : "-") shared=yes"
            return (HTTPRequest(url: url, headers: shared, varyingHeaders: own, body: Array("{}".utf8)), expected)
        }
        var configuration = HTTPClientConfiguration()
        configuration.caFile = tls ? try TestTLS.caFile() : nil
        let client = try HTTPClient(configuration: configuration)
        let total = 600
        for tag in 0..<total { client.submit(request(tag).0, tag: UInt64(tag)) }
        let completions = collect(client, count: total)
        #expect(completions.count == total)
        for completion in completions {
            let response = try completion.result.get()
            #expect(String(decoding: response.body, as: UTF8.self) == request(Int(completion.tag)).1, "tag \(completion.tag)")
        }
        // And through perform's own handle.
        for tag in [1, 5, 21, 300] {
            let (sent, expected) = request(tag)
            #expect(String(decoding: try client.perform(sent).body, as: UTF8.self) == expected)
        }
    }

    /// Keeps `window` requests in flight on one origin until `total` were answered
    /// (or `seconds` passed): the statuses seen and the first few failures.
    static func keepWindow(_ client: HTTPClient, url: String, total: Int, window: Int, seconds: Double = 120) -> (answered: Int, ok: Int, failures: [String]) {
        var submitted = 0
        var answered = 0
        var ok = 0
        var failures: [String] = []
        let deadline = Date().addingTimeInterval(seconds)
        while answered < total && Date() < deadline {
            while submitted < total && submitted - answered < window {
                client.submit(HTTPRequest(url: url, headers: ["apns-push-type: alert"], body: Array(#"{"aps":{}}"#.utf8)), tag: UInt64(submitted))
                submitted += 1
            }
            for completion in client.poll(timeoutMilliseconds: 100) {
                answered += 1
                switch completion.result {
                case .success(let response) where response.status == 200 && response.body.isEmpty: ok += 1
                case .success(let response): if failures.count < 5 { failures.append("tag \(completion.tag): status \(response.status)") }
                case .failure(let error): if failures.count < 5 { failures.append("tag \(completion.tag): \(error)") }
                }
            }
        }
        return (answered, ok, failures)
    }

    /// A local HTTPS server (h2 by ALPN, TestTLS's certificate) answering 200 without a body, as APNs does.
    static func bodilessServer(goawayAfterRequests: Int = 0) throws -> HTTPServer {
        var configuration = HTTPServer.Configuration(host: "127.0.0.1", port: 0, threads: 2, tls: try TestTLS.files())
        configuration.goawayAfterRequests = goawayAfterRequests
        let server = HTTPServer(configuration: configuration) { request in
            HTTPServerResponse(status: request.path.hasPrefix("/3/device/") ? 200 : 404)
        }
        try server.start()
        return server
    }

    /// Answers without a body (APNs's 200), about 200 requests kept in flight on one origin:
    /// every request is answered once, over HTTP/2, on two connections. (It lost a connection
    /// every thousand requests: libcurl 7.88 resets each stream answered by a HEADERS frame
    /// alone, and nghttp2 ends a connection reset a thousand times in a burst; the server now
    /// keeps resets of streams it closed from nghttp2, `ClosedStreamResets`.)
    @Test func bodilessAnswersKeepAWindowFlowingOverFewConnections() throws {
        let server = try Self.bodilessServer()
        defer { server.stop() }
        var configuration = HTTPClientConfiguration()
        configuration.caFile = try TestTLS.caFile()
        // As the worker sizes its client: enough connections for the window, no more (a cold
        // burst of streams otherwise opens connections up to the limit before ALPN answers).
        configuration.connections(toCarry: 200)
        // Long enough that a stall shows as a stall, not as a load-slowed run.
        configuration.requestTimeoutMilliseconds = 20_000
        let client = try HTTPClient(configuration: configuration)
        let total = 4_000
        let run = Self.keepWindow(client, url: "https://127.0.0.1:\(server.port)/3/device/" + String(repeating: "ab", count: 32),
                                  total: total, window: 200)
        #expect(run.answered == total && run.ok == total, "\(run.ok) of \(total) answered 200; first failures: \(run.failures)")
        let statistics = server.statistics
        #expect(statistics.http1Requests == 0, "\(statistics.http1Requests) requests over HTTP/1.1")
        #expect(statistics.http2Requests == total, "each request reached the server once")
        // 200 in flight need two connections at 100 streams each.
        #expect(statistics.connectionsAccepted <= 3, "\(statistics.connectionsAccepted) connections")
        #expect(statistics.goawaysSent == 0)
    }

    /// A server that ends each connection gracefully after 500 requests (GOAWAY), about 200
    /// requests in flight: the streams curl sends again by itself go out over HTTP/2 on the
    /// connections ALPN made, never as HTTP/1.1, and never wait out their timeout in curl's queue.
    /// Each request is answered once, over HTTP/2, on a connection per 500 requests and a few more.
    @Test func aGoawayUnderLoadKeepsTheOriginOnHTTP2() throws {
        let server = try Self.bodilessServer(goawayAfterRequests: 500)
        defer { server.stop() }
        var configuration = HTTPClientConfiguration()
        configuration.caFile = try TestTLS.caFile()
        configuration.connections(toCarry: 200)
        configuration.requestTimeoutMilliseconds = 20_000
        let client = try HTTPClient(configuration: configuration)
        let total = 4_000
        let run = Self.keepWindow(client, url: "https://127.0.0.1:\(server.port)/3/device/" + String(repeating: "cd", count: 32),
                                  total: total, window: 200)
        #expect(run.answered == total && run.ok == total, "\(run.ok) of \(total) answered 200; first failures: \(run.failures)")
        let statistics = server.statistics
        #expect(statistics.http1Requests == 0, "\(statistics.http1Requests) requests over HTTP/1.1")
        #expect(statistics.http2Requests == total, "each request processed once")
        #expect(statistics.goawaysSent >= total / 500 - 1)
        #expect(statistics.connectionsAccepted <= total / 500 + 4, "\(statistics.connectionsAccepted) connections")
    }
}

/// A value written by one thread and read by another after a semaphore.
final class ElapsedBox: @unchecked Sendable {
    var seconds: Double = .infinity
}
