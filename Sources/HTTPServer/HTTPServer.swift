import CEpoll
import Glibc
import Synchronization

/// A small HTTP server: HTTP/2 (libnghttp2) and HTTP/1.1 (libhttp_parser), cleartext or TLS
/// (OpenSSL, ALPN), all on one listening port, served by `threads` epoll event loops.
///
/// Why its own event loop rather than a ready-made server library such as libmicrohttpd: the
/// sockets are ours from `accept` on, so one connection can be sniffed (HTTP/2 preface or an
/// HTTP/1.1 request line on a cleartext port) or handed to OpenSSL, and after the TLS handshake
/// the ALPN result picks nghttp2 or http_parser for the same session. libmicrohttpd owns its
/// sockets and its TLS (GnuTLS), so a TLS session negotiated with OpenSSL cannot carry HTTP/2
/// through it, and it has no HTTP/2 at all. nghttp2 and http_parser are pure protocol engines
/// (bytes in, callbacks, bytes out), which is exactly what an event loop of our own can drive.
///
/// The handler runs on the event-loop thread that owns the connection and must not block; a
/// response can ask to be sent later (`HTTPServerResponse.delayMilliseconds`), which a per-loop
/// timer (timerfd + deadline heap) does without holding up the loop.
///
/// ```swift
/// let server = HTTPServer(configuration: .init(port: 0)) { request in
///     HTTPServerResponse(status: 200, body: Array("hello".utf8))
/// }
/// try server.start()
/// print(server.port)
/// server.stop()
/// ```
public final class HTTPServer: @unchecked Sendable {
    /// Everything the server needs before it starts; every default is written beside its field.
    public struct Configuration: Sendable {
        /// The address to listen on, an IPv4 or IPv6 literal (or `localhost`). Default `127.0.0.1`.
        public var host: String = "127.0.0.1"
        /// The TCP port; 0 picks a free one (read it from `HTTPServer.port` after `start()`). Default 0.
        public var port: Int = 0
        /// Event-loop threads. Default 2.
        public var threads: Int = 2
        /// How connections reach the loops. Default `.acceptorHandsOff`.
        public var acceptMode: AcceptMode = .acceptorHandsOff
        /// Certificate chain and private key (PEM files) to serve TLS instead of cleartext. Default nil.
        public var tls: TLSFiles? = nil
        /// SETTINGS_MAX_CONCURRENT_STREAMS announced to HTTP/2 clients; a stream opened beyond it
        /// is answered with RST_STREAM REFUSED_STREAM (nghttp2 enforces it). Default 1000.
        public var maxConcurrentStreams: Int = 1000
        /// Ends an HTTP/2 connection gracefully after it has served this many requests, as Google's
        /// front ends do from time to time: a GOAWAY (NO_ERROR) whose last-stream-id is the stream
        /// that reached the count, so streams the client opened after it are not processed (the
        /// client may send them again); the streams up to it are answered, then the connection is
        /// half-closed. 0: never. Default 0.
        public var goawayAfterRequests: Int = 0
        /// The same once an HTTP/2 connection is this many seconds old (at the first request
        /// completed after that). 0: never. Default 0.
        public var goawayAfterSeconds: Double = 0
        /// Refuses every Nth HTTP/2 stream of a connection with RST_STREAM REFUSED_STREAM, unprocessed
        /// (fault injection for clients' handling of refused streams). 0: never. Default 0.
        public var refuseEveryStream: Int = 0
        /// Largest request body accepted; a bigger one gets 413, at once when Content-Length declares
        /// it (before the body is sent), else when the body reaches the limit. Default 4 MiB.
        public var maxBodyBytes: Int = 4 << 20
        /// Connections without any traffic for this long are closed. Default 300 s; 0 disables it.
        public var idleTimeoutSeconds: Int = 300
        /// A request (headers and body) that has not arrived whole this long after its first byte
        /// is answered 408 (HTTP/1.1) or its connection ended (HTTP/2), so a body that never comes
        /// does not hold a connection. Default 0: no limit (the emulator's clients are trusted).
        public var requestTimeoutSeconds: Int = 0

        public init(host: String = "127.0.0.1", port: Int = 0, threads: Int = 2, tls: TLSFiles? = nil) {
            self.host = host
            self.port = port
            self.threads = threads
            self.tls = tls
        }
    }

    /// PEM files for TLS.
    public struct TLSFiles: Sendable {
        public var certificateFile: String
        public var privateKeyFile: String
        public init(certificateFile: String, privateKeyFile: String) {
            self.certificateFile = certificateFile
            self.privateKeyFile = privateKeyFile
        }
    }

    /// How accepted connections are spread over the event loops.
    ///
    /// Measured on the 2-core machine with h2load (200,000 emulator sends, 100 streams per
    /// connection, h2load on the same cores): the acceptor spread gave 87,000-115,000 sends/s
    /// for 2 to 8 connections, SO_REUSEPORT 50,000-99,000 with a wider spread between runs,
    /// because the kernel's hash can put three of four connections on one loop.
    public enum AcceptMode: Sendable {
        /// The first loop accepts and deals connections out round-robin: an even spread even for
        /// the handful of long-lived HTTP/2 connections a client opens. The default.
        case acceptorHandsOff
        /// Every loop has its own SO_REUSEPORT listener and the kernel picks by connection hash,
        /// which can leave one loop with most of a few connections.
        case reusePort
    }

    public typealias Handler = @Sendable (HTTPServerRequest) -> HTTPServerResponse

    public let configuration: Configuration
    let handler: Handler
    let counters = ServerCounters()
    private var loops: [EventLoop] = []
    private var threads: [pthread_t] = []
    private let lifecycle = Mutex<Lifecycle>(.idle)
    private let boundPort = Atomic<Int>(0)

    private enum Lifecycle { case idle, running, stopped }

    public init(configuration: Configuration, handler: @escaping Handler) {
        self.configuration = configuration
        self.handler = handler
    }

    /// The port the server listens on; after `start()`, the real one even when configured as 0.
    public var port: Int {
        let bound = boundPort.load(ordering: .acquiring)
        return bound == 0 ? configuration.port : bound
    }

    /// Binds, listens and starts the event-loop threads. Throws when the address cannot be
    /// used, the TLS files cannot be loaded, or the server was started before.
    public func start() throws(HTTPServerError) {
        // OpenSSL writes a TLS connection's socket with write(2), which raises SIGPIPE when the
        // client has hung up; left at its default, that signal ends the whole process (a test
        // runner, or any program embedding the server). A closed peer is an error to handle.
        _ = signal(SIGPIPE, SIG_IGN)
        try lifecycle.withLock { (state: inout Lifecycle) throws(HTTPServerError) in
            guard state == .idle else { throw HTTPServerError("the server was already started; create a new HTTPServer to serve again") }
            state = .running
        }
        do {
            try startLoops()
        } catch {
            for loop in loops { loop.closeEverything() }
            loops = []
            lifecycle.withLock { $0 = .stopped }
            throw error
        }
    }

    private func startLoops() throws(HTTPServerError) {
        let configuration = self.configuration
        guard configuration.threads >= 1, configuration.threads <= 256 else {
            throw HTTPServerError("threads must be between 1 and 256, not \(configuration.threads)")
        }
        guard (0...65535).contains(configuration.port) else {
            throw HTTPServerError("port must be between 0 and 65535, not \(configuration.port)")
        }
        let tlsContext: TLSContext?
        if let files = configuration.tls { tlsContext = try TLSContext(files: files) } else { tlsContext = nil }
        let address = try SocketAddress(host: configuration.host, port: configuration.port)

        var listeners: [Int32] = []
        switch configuration.acceptMode {
        case .acceptorHandsOff:
            let fd = try Listener.open(address: address, reusePort: false)
            listeners.append(fd)
            boundPort.store(try Listener.boundPort(fd), ordering: .releasing)
        case .reusePort:
            let first = try Listener.open(address: address, reusePort: true)
            listeners.append(first)
            let chosen = try Listener.boundPort(first)
            boundPort.store(chosen, ordering: .releasing)
            let fixed = try SocketAddress(host: configuration.host, port: chosen)
            for _ in 1..<configuration.threads {
                do {
                    listeners.append(try Listener.open(address: fixed, reusePort: true))
                } catch {
                    for fd in listeners { close(fd) }
                    throw error
                }
            }
        }

        for index in 0..<configuration.threads {
            let listener: Int32?
            switch configuration.acceptMode {
            case .acceptorHandsOff: listener = index == 0 ? listeners[0] : nil
            case .reusePort: listener = listeners[index]
            }
            do {
                loops.append(try EventLoop(index: index, handler: handler, counters: counters, configuration: configuration,
                                           listener: listener, tls: tlsContext))
            } catch {
                for fd in listeners where !loops.contains(where: { $0.listener == fd }) { close(fd) }
                throw error
            }
        }
        for loop in loops { loop.peers = loops }
        for loop in loops {
            let box = Unmanaged.passRetained(loop).toOpaque()
            var thread = pthread_t()
            let rc = pthread_create(&thread, nil, { argument in
                let loop = Unmanaged<EventLoop>.fromOpaque(argument!).takeRetainedValue()
                loop.run()
                return nil
            }, box)
            guard rc == 0 else {
                Unmanaged<EventLoop>.fromOpaque(box).release()
                stopThreads()
                throw HTTPServerError("could not start an event-loop thread: \(String(cString: strerror(rc)))")
            }
            threads.append(thread)
        }
    }

    /// User plus system CPU seconds its event-loop threads have spent so far (0 once stopped):
    /// what serving costs, apart from whatever else runs in the same process.
    public var eventLoopCPUSeconds: Double {
        lifecycle.withLock { (state: inout Lifecycle) -> Double in
            guard state == .running else { return 0 }
            var total = 0.0
            for thread in threads {
                var clock = clockid_t()
                var now = timespec()
                if pthread_getcpuclockid(thread, &clock) == 0 && clock_gettime(clock, &now) == 0 {
                    total += Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
                }
            }
            return total
        }
    }

    /// Closes the listeners and every connection, and joins the threads. Safe to call twice;
    /// do not call it from inside a handler (the handler's own thread would wait for itself).
    public func stop() {
        let wasRunning = lifecycle.withLock { (state: inout Lifecycle) -> Bool in
            defer { state = .stopped }
            return state == .running
        }
        guard wasRunning else { return }
        stopThreads()
    }

    private func stopThreads() {
        for loop in loops { loop.requestStop() }
        for thread in threads { pthread_join(thread, nil) }
        // A loop whose thread never started (start failed half-way) still owns descriptors.
        for loop in loops { loop.closeEverything() }
        threads = []
        loops = []
    }

    deinit { stop() }

    /// Counters since start (or the last `resetStatistics()`).
    public var statistics: HTTPServerStatistics { counters.snapshot() }

    /// Zeroes the request counts and the peaks (the live gauges stay).
    public func resetStatistics() { counters.reset() }
}

/// What went wrong starting the server, in words a user can act on.
public struct HTTPServerError: Error, CustomStringConvertible, Sendable {
    public var description: String
    init(_ description: String) { self.description = description }
}

/// Which protocol carried a request.
public enum HTTPVersion: Sendable, Equatable {
    case http1_1
    case http2
}

/// One header field. Names are lowercase (HTTP/2 requires it; HTTP/1.1 names are folded).
public struct HTTPHeader: Sendable, Equatable {
    public var name: String
    public var value: String
    public init(name: String, value: String) {
        self.name = name
        self.value = value
    }
}

/// A complete request as the handler sees it.
public struct HTTPServerRequest: Sendable {
    /// `GET`, `POST`, ...
    public var method: String
    /// The path without the query, e.g. `/v1/projects/p/messages:send`.
    public var path: String
    /// The raw query after `?` (still percent-encoded), or empty.
    public var query: String
    public var headers: [HTTPHeader]
    public var body: [UInt8]
    public var version: HTTPVersion
    /// True when the connection is TLS.
    public var isSecure: Bool
    /// The client's address and port (`127.0.0.1:53124`, `[::1]:53124`), or empty when unknown.
    public var remoteAddress: String

    public init(method: String, path: String, query: String = "", headers: [HTTPHeader] = [], body: [UInt8] = [],
                version: HTTPVersion = .http2, isSecure: Bool = false, remoteAddress: String = "") {
        self.method = method
        self.path = path
        self.query = query
        self.headers = headers
        self.body = body
        self.version = version
        self.isSecure = isSecure
        self.remoteAddress = remoteAddress
    }

    /// The first header of that name (case-insensitive), or nil.
    public func header(_ name: String) -> String? {
        for header in headers where header.name == name { return header.value }
        let lower = name.lowercased()
        if lower != name { for header in headers where header.name == lower { return header.value } }
        return nil
    }

    /// The query's `name=value` pairs, percent- and `+`-decoded, in order.
    public var queryItems: [(name: String, value: String)] { FormDecoding.pairs(query) }

    /// The first query parameter of that name, decoded.
    public func queryValue(_ name: String) -> String? {
        queryItems.first { $0.name == name }?.value
    }
}

/// The handler's answer.
public struct HTTPServerResponse: Sendable {
    public var status: Int
    /// Extra headers; `content-length` is always set by the server (and `date` is not sent).
    public var headers: [HTTPHeader]
    public var body: [UInt8]
    /// Send the response this many milliseconds after the handler returns (0: at once). The loop
    /// keeps serving other requests meanwhile.
    public var delayMilliseconds: Int

    public init(status: Int, headers: [HTTPHeader] = [], body: [UInt8] = [], delayMilliseconds: Int = 0) {
        self.status = status
        self.headers = headers
        self.body = body
        self.delayMilliseconds = delayMilliseconds
    }

    /// A JSON response (`content-type: application/json; charset=UTF-8`).
    public static func json(_ status: Int, _ body: [UInt8], headers: [HTTPHeader] = []) -> HTTPServerResponse {
        HTTPServerResponse(status: status,
                           headers: [HTTPHeader(name: "content-type", value: "application/json; charset=UTF-8")] + headers,
                           body: body)
    }
}

/// Counters a test or a stats endpoint reads.
public struct HTTPServerStatistics: Sendable, Equatable {
    /// Requests completed over HTTP/2 and over HTTP/1.1.
    public var http2Requests: Int
    public var http1Requests: Int
    /// Connections accepted in total, and open now.
    public var connectionsAccepted: Int
    public var openConnections: Int
    /// HTTP/2 streams open now, the most open at once over all connections, and the most open at
    /// once on any single connection.
    public var activeStreams: Int
    public var peakConcurrentStreams: Int
    public var peakStreamsPerConnection: Int
    /// Connections that negotiated TLS.
    public var tlsConnections: Int
    /// GOAWAY frames sent (graceful ends of a connection, and protocol errors).
    public var goawaysSent: Int = 0
    /// Streams answered with RST_STREAM REFUSED_STREAM: beyond SETTINGS_MAX_CONCURRENT_STREAMS, or
    /// by `refuseEveryStream`.
    public var refusedStreams: Int = 0
    /// Streams a client opened above a GOAWAY's last-stream-id: received, never processed.
    public var unprocessedStreams: Int = 0
}

/// Lock-free counters shared by the loops.
final class ServerCounters: Sendable {
    let http2Requests = Atomic<Int>(0)
    let http1Requests = Atomic<Int>(0)
    let connectionsAccepted = Atomic<Int>(0)
    let openConnections = Atomic<Int>(0)
    let activeStreams = Atomic<Int>(0)
    let peakStreams = Atomic<Int>(0)
    let peakPerConnection = Atomic<Int>(0)
    let tlsConnections = Atomic<Int>(0)
    let goawaysSent = Atomic<Int>(0)
    let refusedStreams = Atomic<Int>(0)
    let unprocessedStreams = Atomic<Int>(0)

    func streamOpened(perConnection: Int) {
        let now = activeStreams.wrappingAdd(1, ordering: .relaxed).newValue
        raise(peakStreams, to: now)
        raise(peakPerConnection, to: perConnection)
    }

    func streamClosed() { activeStreams.wrappingSubtract(1, ordering: .relaxed) }

    private func raise(_ peak: borrowing Atomic<Int>, to value: Int) {
        var current = peak.load(ordering: .relaxed)
        while value > current {
            let (exchanged, original) = peak.compareExchange(expected: current, desired: value, ordering: .relaxed)
            if exchanged { return }
            current = original
        }
    }

    func snapshot() -> HTTPServerStatistics {
        HTTPServerStatistics(
            http2Requests: http2Requests.load(ordering: .relaxed),
            http1Requests: http1Requests.load(ordering: .relaxed),
            connectionsAccepted: connectionsAccepted.load(ordering: .relaxed),
            openConnections: openConnections.load(ordering: .relaxed),
            activeStreams: activeStreams.load(ordering: .relaxed),
            peakConcurrentStreams: peakStreams.load(ordering: .relaxed),
            peakStreamsPerConnection: peakPerConnection.load(ordering: .relaxed),
            tlsConnections: tlsConnections.load(ordering: .relaxed),
            goawaysSent: goawaysSent.load(ordering: .relaxed),
            refusedStreams: refusedStreams.load(ordering: .relaxed),
            unprocessedStreams: unprocessedStreams.load(ordering: .relaxed))
    }

    func reset() {
        http2Requests.store(0, ordering: .relaxed)
        http1Requests.store(0, ordering: .relaxed)
        connectionsAccepted.store(0, ordering: .relaxed)
        tlsConnections.store(0, ordering: .relaxed)
        goawaysSent.store(0, ordering: .relaxed)
        refusedStreams.store(0, ordering: .relaxed)
        unprocessedStreams.store(0, ordering: .relaxed)
        peakStreams.store(activeStreams.load(ordering: .relaxed), ordering: .relaxed)
        peakPerConnection.store(0, ordering: .relaxed)
    }
}

/// `application/x-www-form-urlencoded` and query-string decoding.
public enum FormDecoding {
    /// `a=1&b=x%20y` as `[("a", "1"), ("b", "x y")]`; `+` is a space.
    public static func pairs(_ text: String) -> [(name: String, value: String)] {
        var result: [(String, String)] = []
        for part in text.utf8.split(separator: UInt8(ascii: "&"), omittingEmptySubsequences: true) {
            if let eq = part.firstIndex(of: UInt8(ascii: "=")) {
                result.append((decode(part[part.startIndex..<eq]), decode(part[part.index(after: eq)...])))
            } else {
                result.append((decode(part[...]), ""))
            }
        }
        return result
    }

    /// Percent-decodes one component; malformed escapes are kept as written.
    public static func decode<S: Collection>(_ bytes: S) -> String where S.Element == UInt8 {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var iterator = Array(bytes)[...]
        while let byte = iterator.popFirst() {
            switch byte {
            case UInt8(ascii: "+"): out.append(0x20)
            case UInt8(ascii: "%"):
                if iterator.count >= 2, let high = hex(iterator[iterator.startIndex]),
                   let low = hex(iterator[iterator.startIndex + 1]) {
                    out.append(high << 4 | low)
                    iterator.removeFirst(2)
                } else {
                    out.append(byte)
                }
            default: out.append(byte)
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    private static func hex(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return c - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
}
