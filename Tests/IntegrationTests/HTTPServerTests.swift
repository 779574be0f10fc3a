import Foundation
import Glibc
@testable import HTTPServer
import Synchronization
import Testing
import TestSupport

/// The server answers with what it saw, so a test can check the request side as well.
private func echoServer(tls: HTTPServer.TLSFiles? = nil, threads: Int = 2, mode: HTTPServer.AcceptMode = .acceptorHandsOff) throws -> HTTPServer {
    var configuration = HTTPServer.Configuration(port: 0, threads: threads, tls: tls)
    configuration.acceptMode = mode
    let server = HTTPServer(configuration: configuration) { request in
        let delay = request.queryValue("delay").flatMap { Int($0) } ?? 0
        let text = "\(request.method) \(request.path) query=\(request.query) version=\(request.version) secure=\(request.isSecure) "
            + "body=\(String(decoding: request.body, as: UTF8.self)) x-test=\(request.header("X-Test") ?? "-")"
        return HTTPServerResponse(status: 200, headers: [HTTPHeader(name: "x-echo", value: "yes")], body: Array(text.utf8),
                                  delayMilliseconds: delay)
    }
    try server.start()
    return server
}

@Suite struct HTTPServerTests {
    /// Resets of streams the server closed are kept from nghttp2 however the client's bytes are
    /// cut into reads (a frame header split between two reads included); every other byte goes
    /// through in order, a reset of a stream still open too.
    @Test func resetsOfClosedStreamsAreDroppedWhateverTheReads() {
        func frame(_ type: UInt8, stream: UInt32, _ payload: [UInt8]) -> [UInt8] {
            [UInt8(payload.count >> 16), UInt8((payload.count >> 8) & 0xff), UInt8(payload.count & 0xff), type, 0,
             UInt8(stream >> 24), UInt8((stream >> 16) & 0xff), UInt8((stream >> 8) & 0xff), UInt8(stream & 0xff)] + payload
        }
        let preface = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)
        let headers = frame(1, stream: 1, [1, 2, 3, 4, 5])
        let closedReset = frame(3, stream: 1, [0, 0, 0, 5])
        let data = frame(0, stream: 3, Array(repeating: 9, count: 20))
        let openReset = frame(3, stream: 3, [0, 0, 0, 8])
        let settings = frame(4, stream: 0, [])
        let input = preface + headers + closedReset + data + closedReset + openReset + settings + closedReset
        let expected = preface + headers + data + openReset + settings
        for size in [1, 2, 5, 7, 9, 13, input.count] {
            var filter = ClosedStreamResets()
            var output: [UInt8] = []
            var start = 0
            while start < input.count {
                let piece = Array(input[start..<min(input.count, start + size)])
                piece.withUnsafeBytes { bytes in
                    filter.filter(bytes, isClosed: { $0 == 1 }) { output.append(contentsOf: $0) }
                }
                start += size
            }
            #expect(output == expected, "reads of \(size) bytes")
        }
    }

    @Test func http2AndHTTP1ShareOnePort() throws {
        let server = try echoServer()
        defer { server.stop() }
        let base = "http://127.0.0.1:\(server.port)"
        let h2 = try curl(base + "/a/b?x=1&y=%20", method: "POST", headers: ["x-test": "one"], body: "hello", over: .h2c)
        #expect(h2.status == 200)
        #expect(h2.version == "2")
        #expect(h2.headers["x-echo"] == "yes")
        #expect(h2.body == "POST /a/b query=x=1&y=%20 version=http2 secure=false body=hello x-test=one")
        let h1 = try curl(base + "/c", method: "PUT", headers: ["X-Test": "two"], body: "world", over: .http1)
        #expect(h1.status == 200)
        #expect(h1.version == "1.1")
        #expect(h1.body == "PUT /c query= version=http1_1 secure=false body=world x-test=two")
        let stats = server.statistics
        #expect(stats.http2Requests == 1)
        #expect(stats.http1Requests == 1)
    }

    @Test func largeBodiesArriveWhole() throws {
        let server = try echoServer()
        defer { server.stop() }
        // Bigger than one HTTP/2 DATA frame and than one read.
        let payload = String(repeating: "0123456789", count: 5000)
        for choice in [CurlProtocol.h2c, .http1] {
            let answer = try curl("http://127.0.0.1:\(server.port)/big", method: "POST", body: payload, over: choice)
            #expect(answer.status == 200)
            #expect(answer.body.hasSuffix("body=\(payload) x-test=-"))
        }
        // A client that asks for 100 Continue gets it (else it waits a second, then sends anyway).
        let h1 = try curl("http://127.0.0.1:\(server.port)/big", method: "POST", headers: ["expect": "100-continue"],
                          body: payload, over: .http1)
        #expect(h1.interim == [100])
    }

    @Test func tlsNegotiatesH2AndHTTP1ByALPN() throws {
        let files = try makeCertificate()
        defer { try? FileManager.default.removeItem(atPath: files.directory) }
        let server = try echoServer(tls: HTTPServer.TLSFiles(certificateFile: files.certificate, privateKeyFile: files.key))
        defer { server.stop() }
        let url = "https://127.0.0.1:\(server.port)/secure"
        let h2 = try curl(url, method: "POST", body: "over h2", over: .tlsH2(caFile: files.certificate))
        #expect(h2.version == "2")
        #expect(h2.body.contains("version=http2 secure=true body=over h2"))
        let h1 = try curl(url, method: "POST", body: "over h1", over: .tlsHTTP1(caFile: files.certificate))
        #expect(h1.version == "1.1")
        #expect(h1.body.contains("version=http1_1 secure=true body=over h1"))
        let plain = try curl(url, method: "POST", body: "no alpn", over: .tlsNoALPN(caFile: files.certificate))
        #expect(plain.version == "1.1")
        #expect(plain.body.contains("version=http1_1 secure=true body=no alpn"))
        #expect(server.statistics.tlsConnections == 3)
    }

    @Test func badTLSFilesAreNamed() {
        let server = HTTPServer(configuration: .init(port: 0, tls: .init(certificateFile: "/nonexistent/cert.pem", privateKeyFile: "/nonexistent/key.pem"))) { _ in
            HTTPServerResponse(status: 200)
        }
        #expect(throws: HTTPServerError.self) { try server.start() }
        do {
            try server.start()
        } catch {
            #expect(error.description.contains("already started") || error.description.contains("/nonexistent/cert.pem"))
        }
    }

    @Test func delayedResponsesDoNotHoldUpTheLoop() throws {
        let server = try echoServer(threads: 1)
        defer { server.stop() }
        // 400 requests, each answered 100 ms late, 200 in flight on one loop thread: served one
        // after another they would take 40 s.
        let started = Date()
        let output = try h2load(["-n", "400", "-c", "2", "-m", "100", "http://127.0.0.1:\(server.port)/slow?delay=100"])
        let elapsed = Date().timeIntervalSince(started)
        #expect(h2loadCounts(output)?.succeeded == 400, "\(output)")
        #expect(elapsed < 5, "took \(elapsed)s")
        let fastest = try #require(output.split(separator: "\n").first { $0.contains("time for request:") })
        let minimum = fastest.split(separator: " ").dropFirst(3).first.map(String.init) ?? ""
        #expect(minimum.hasSuffix("ms") && (Double(minimum.dropLast(2)) ?? 0) >= 99, "fastest answer \(minimum)")
    }

    @Test func pipelinedHTTP1AnswersStayInOrder() throws {
        let server = try echoServer()
        defer { server.stop() }
        let socket = try ConnectedSocket(port: server.port)
        defer { socket.close() }
        // The first request is answered 200 ms late, the second at once; the second must wait.
        try socket.send("GET /first?delay=200 HTTP/1.1\r\nHost: x\r\n\r\nGET /second HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        let text = try socket.receiveAll()
        let first = try #require(text.range(of: "GET /first"))
        let second = try #require(text.range(of: "GET /second"))
        #expect(first.lowerBound < second.lowerBound)
        #expect(text.contains("connection: close"))
    }

    @Test func manyStreamsPerConnectionAreNeverLimited() throws {
        let server = try echoServer()
        defer { server.stop() }
        let body = NSTemporaryDirectory() + "herald-h2load-body-\(UUID().uuidString)"
        try Data(#"{"message":{"token":"t"}}"#.utf8).write(to: URL(fileURLWithPath: body))
        defer { try? FileManager.default.removeItem(atPath: body) }
        let output = try h2load(["-n", "20000", "-c", "4", "-m", "100", "-d", body, "http://127.0.0.1:\(server.port)/load"])
        let counts = try #require(h2loadCounts(output), "\(output)")
        #expect(counts.succeeded == 20000)
        #expect(counts.failed == 0)
        let stats = server.statistics
        #expect(stats.peakStreamsPerConnection == 100)
        #expect(stats.http2Requests == 20000)
        #expect(stats.activeStreams == 0)
    }

    @Test(arguments: [HTTPServer.AcceptMode.acceptorHandsOff, .reusePort])
    func startsAndStopsCleanly(mode: HTTPServer.AcceptMode) throws {
        func openDescriptors() -> Int { (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count) ?? 0 }
        var ports: Set<Int> = []
        let before = openDescriptors()
        for _ in 0..<20 {
            let server = try echoServer(mode: mode)
            ports.insert(server.port)
            #expect(try curl("http://127.0.0.1:\(server.port)/ping", over: .h2c).status == 200)
            server.stop()
            server.stop()  // twice is harmless
        }
        #expect(ports.count > 1)
        // Parallel tests open descriptors too; a leak of 20 servers' worth would still stand out.
        #expect(openDescriptors() - before < 40)
    }

    @Test func aStoppedServerRefusesConnections() throws {
        let server = try echoServer()
        let port = server.port
        server.stop()
        #expect(throws: (any Error).self) { try curl("http://127.0.0.1:\(port)/", over: .http1) }
    }

    /// A server with a small body limit and a 1 s request timeout, counting the requests its
    /// handler saw.
    final class Seen: Sendable {
        let count = Mutex(0)
    }

    private func guardedServer(_ seen: Seen) throws -> HTTPServer {
        var configuration = HTTPServer.Configuration(port: 0, threads: 1)
        configuration.maxBodyBytes = 1000
        configuration.requestTimeoutSeconds = 1
        let server = HTTPServer(configuration: configuration) { request in
            seen.count.withLock { $0 += 1 }
            return HTTPServerResponse(status: 200, body: Array("got \(request.body.count) bytes".utf8))
        }
        try server.start()
        return server
    }

    @Test func aBodyThatNeverArrivesIsCutOffAfterTheRequestTimeout() throws {
        let seen = Seen()
        let server = try guardedServer(seen)
        defer { server.stop() }
        let socket = try ConnectedSocket(port: server.port)
        defer { socket.close() }
        let started = Date()
        try socket.send("POST /slow HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n0123456789")
        let answer = try socket.receiveAll()
        let seconds = Date().timeIntervalSince(started)
        #expect(answer.hasPrefix("HTTP/1.1 408 Request Timeout\r\n"), "\(answer)")
        #expect(seconds >= 1 && seconds < 5, "closed after the 1 s limit (swept once a second): \(seconds) s")
        #expect(seen.count.withLock { $0 } == 0)
        // A request that arrives whole in time is served as before, on a connection kept alive.
        let whole = try curl("http://127.0.0.1:\(server.port)/quick", method: "POST", body: String(repeating: "x", count: 900), over: .http1)
        #expect(whole.status == 200 && whole.body == "got 900 bytes")
    }

    @Test func aDeclaredBodyOverTheLimitGets413OverBothProtocols() throws {
        let seen = Seen()
        let server = try guardedServer(seen)
        defer { server.stop() }
        for choice in [CurlProtocol.h2c, .http1] {
            let answer = try curl("http://127.0.0.1:\(server.port)/big", method: "POST", body: String(repeating: "x", count: 5000), over: choice)
            let refused = answer.status == 413 && answer.body.contains("over the limit of 1000 bytes")
            #expect(refused, "\(String(describing: choice)): \(answer.status) \(answer.body)")
        }
        #expect(seen.count.withLock { $0 } == 0, "the handler never saw them")
        // HTTP/1.1 answers before the body is sent (the dashboard's test does the same end to end).
        let socket = try ConnectedSocket(port: server.port)
        defer { socket.close() }
        try socket.send("POST /big HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1001\r\n\r\n")
        #expect(try socket.receiveAll().hasPrefix("HTTP/1.1 413 Payload Too Large\r\n"))
    }

    @Test func malformedHTTP1GetsA400() throws {
        let server = try echoServer()
        defer { server.stop() }
        let socket = try ConnectedSocket(port: server.port)
        defer { socket.close() }
        try socket.send("GARBAGE\r\n\r\n")
        let text = try socket.receiveAll()
        #expect(text.hasPrefix("HTTP/1.1 400 "))
    }
}

/// A blocking loopback TCP client for raw HTTP/1.1 bytes.
final class ConnectedSocket {
    private let fd: Int32

    init(port: Int) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var timeout = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let rc = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard rc == 0 else { throw TestFailure("connect to 127.0.0.1:\(port) failed") }
    }

    func send(_ text: String) throws {
        let bytes = Array(text.utf8)
        let n = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        guard n == bytes.count else { throw TestFailure("short write") }
    }

    /// Reads until the server closes the connection (or 10 s pass).
    func receiveAll() throws -> String {
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n <= 0 { break }
            bytes += buffer[0..<n]
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    func close() { Glibc.close(fd) }
}
