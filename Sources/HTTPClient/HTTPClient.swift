import CCurl
import Glibc
import Synchronization

// An HTTP/2 client over libcurl's multi interface: many requests in flight on few connections
// (one stream each), driven by the thread that owns the client. Nothing outside this module sees
// a curl type.
//
// This file: the client and its multi loop (submitting, driving curl_multi_perform, waiting in
// curl_multi_poll, the connections' sockets). HTTPTypes.swift: the public types (request,
// answer, error kinds, configuration). EasyHandle.swift: one request on an easy handle (its
// options, what it receives, how its end is classified).
//
// One road for every request: `CURL_HTTP_VERSION_2TLS`, so an `https://` origin (FCM, APNs,
// the emulator as the worker meets it) speaks HTTP/2 chosen by ALPN, multiplexed on few
// connections, and libcurl's own pool decides which connection carries what. A plain
// `http://` origin (a loopback emulator a user asked for) speaks HTTP/1.1, one request at a time
// per kept-alive connection: libcurl 7.88.1 cannot reuse an h2c connection opened with prior
// knowledge (curl issue 10634), and the client no longer manages cleartext connections itself
// to get around it (docs/architecture.md).

/// `curl_global_init` is not thread-safe; a global is initialised exactly once.
private let curlGlobalInit: CURLcode = herald_global_init()

/// Many concurrent requests over HTTP/2 (negotiated by ALPN for `https://`), multiplexed on few
/// kept-alive connections; `http://` requests go over HTTP/1.1, one at a time per connection.
///
/// Owned by one thread: `submit` and `poll` are called from that thread only. `wake()` may be
/// called from any thread, and so may `perform` (it has its own handle behind a lock).
///
/// ```swift
/// let client = try HTTPClient()
/// client.submit(HTTPRequest(url: url, headers: ["Content-Type: application/json"], body: body), tag: 1)
/// while client.inFlight > 0 {
///     for completion in client.poll(timeoutMilliseconds: 1000) { ... }
/// }
/// ```
public final class HTTPClient: @unchecked Sendable {
    let configuration: HTTPClientConfiguration
    let multi: UnsafeMutableRawPointer
    var active: [HandleKey: Transfer] = [:]
    var idle: [EasyHandle] = []
    /// Requests that failed before reaching curl, reported by the next poll.
    var failedEarly: [HTTPCompletion] = []
    let performHandle = Mutex<EasyHandle?>(nil)
    static let maxIdleHandles = 512
    /// The header list of the last request, shared by every request with the same lines (the
    /// sender's lines change only when its access token does).
    var lastHeaderList: HeaderList?
    /// No proxy variable in the environment: handles are told so, which spares libcurl reading
    /// them for every transfer (and keeps their meaning when one is set).
    let noProxyFromEnvironment: Bool

    /// The libcurl this process runs with, its TLS library and nghttp2 (`libcurl/8.14.1
    /// OpenSSL/3.0.19 nghttp2/1.52.0`), as the loaded library reports itself: the library is
    /// linked dynamically, so which one answers is decided where the process starts, and how a
    /// GOAWAY or a refused stream is retried depends on it (docs/fcm-limits.md).
    public static var libraryVersion: String {
        let parts = String(cString: curl_version()).split(separator: " ")
        var kept: [Substring] = []
        for (index, part) in parts.enumerated() where index == 0 || part.contains("SSL/") || part.hasPrefix("nghttp2/") {
            kept.append(part)
        }
        return kept.joined(separator: " ")
    }

    public init(configuration: HTTPClientConfiguration = .init()) throws(HTTPClientError) {
        guard curlGlobalInit == CURLE_OK else {
            throw HTTPClientError(kind: .other, message: "curl_global_init failed: \(HTTPClient.text(curlGlobalInit))")
        }
        guard let multi = curl_multi_init() else {
            throw HTTPClientError(kind: .other, message: "curl_multi_init failed")
        }
        self.configuration = configuration
        self.multi = multi
        noProxyFromEnvironment = HTTPClient.proxyVariables.allSatisfy { getenv($0) == nil }
        let settings: [(CURLMoption, Int, String)] = [
            (CURLMOPT_PIPELINING, Int(CURLPIPE_MULTIPLEX), "CURLMOPT_PIPELINING"),
            (CURLMOPT_MAX_CONCURRENT_STREAMS, max(1, configuration.maxStreamsPerConnection), "CURLMOPT_MAX_CONCURRENT_STREAMS"),
            (CURLMOPT_MAX_HOST_CONNECTIONS, max(1, configuration.maxConnections), "CURLMOPT_MAX_HOST_CONNECTIONS"),
            // Keep every connection of every host open between bursts.
            (CURLMOPT_MAXCONNECTS, max(1, configuration.maxConnections) * 4, "CURLMOPT_MAXCONNECTS"),
        ]
        for (option, value, name) in settings {
            let code = herald_multi_setopt_long(multi, option, value)
            guard code == CURLM_OK else {
                curl_multi_cleanup(multi)
                throw HTTPClientError(kind: .other, message: "\(name) = \(value) refused: \(String(cString: curl_multi_strerror(code)))")
            }
        }
    }

    deinit {
        for key in active.keys { curl_multi_remove_handle(multi, key.handle) }
        active.removeAll()
        idle.removeAll()
        curl_multi_cleanup(multi)
    }

    /// Requests submitted and not yet returned by `poll`.
    public var inFlight: Int { active.count + failedEarly.count }

    /// Starts a request; its completion comes out of a later `poll` with the same `tag`.
    public func submit(_ request: HTTPRequest, tag: UInt64) {
        start(request, tag: tag)
    }

    /// Drives the transfers and returns the ones that finished. When none has, waits up to
    /// `timeoutMilliseconds` for network activity (`curl_multi_poll`), for `wake()`, or for
    /// `extraFileDescriptor` (when >= 0) to become readable, then drives them once more.
    public func poll(timeoutMilliseconds: Int32, extraFileDescriptor: Int32 = -1) -> [HTTPCompletion] {
        var finished = failedEarly
        failedEarly.removeAll()
        // curl_multi_perform visits every transfer in flight, so a call is not free: drive before
        // waiting only when something was added since the last drive (or it may have finished).
        if startedSinceDrive || !finished.isEmpty { drive(into: &finished) }
        guard finished.isEmpty else { return finished }

        var extra = curl_waitfd(fd: extraFileDescriptor, events: Int16(CURL_WAIT_POLLIN), revents: 0)
        if extraFileDescriptor >= 0 {
            _ = curl_multi_poll(multi, &extra, 1, max(0, timeoutMilliseconds), nil)
        } else {
            _ = curl_multi_poll(multi, nil, 0, max(0, timeoutMilliseconds), nil)
        }
        drive(into: &finished)
        return finished
    }

    /// Makes a `poll` that is waiting (or the next one) return at once. Any thread.
    public func wake() {
        _ = curl_multi_wakeup(multi)
    }

    /// Sends one request and waits for its answer, on a handle of its own (its connection is
    /// kept for the next call). Any thread; calls are serialised.
    public func perform(_ request: HTTPRequest) throws(HTTPClientError) -> HTTPResponse {
        let result: Result<HTTPResponse, HTTPClientError> = performHandle.withLock { kept in
            if kept == nil { kept = EasyHandle() }
            guard let easy = kept else {
                return .failure(HTTPClientError(kind: .other, message: "curl_easy_init failed"))
            }
            let transfer = Transfer(tag: 0, easy: easy)
            if let error = configure(transfer, request, multiplexed: false) {
                return .failure(error)
            }
            return transfer.result(curl_easy_perform(easy.handle))
        }
        return try result.get()
    }

    // MARK: internals

    func drive(into finished: inout [HTTPCompletion]) {
        // libcurl writes each new stream's frames to the socket on their own: a `send()`, and a
        // TCP segment through the loopback or the network, per request. Corked for the pass, the
        // frames of every request it starts leave in full segments when it ends.
        let cork = startedSinceDrive && !sockets.open.isEmpty
        if cork { sockets.cork(true) }
        startedSinceDrive = false
        var running: Int32 = 0
        _ = curl_multi_perform(multi, &running)
        if cork { sockets.cork(false) }
        var remaining: Int32 = 0
        while let message = curl_multi_info_read(multi, &remaining) {
            guard message.pointee.msg == CURLMSG_DONE, let handle = message.pointee.easy_handle else { continue }
            let code = herald_msg_result(message)
            curl_multi_remove_handle(multi, handle)
            guard let transfer = active.removeValue(forKey: HandleKey(handle)) else { continue }
            finished.append(HTTPCompletion(tag: transfer.tag, result: transfer.result(code)))
            recycle(transfer.easy)
        }
    }

    /// The sockets of the multi handle's connections, from curl's socket callbacks.
    let sockets = SocketRegistry()

    /// URLs parsed by curl, for the multi handle's transfers (a sender uses one or two).
    var parsedURLs: [String: ParsedURL] = [:]
    /// The generation of connections requests now go to (`connectionGenerationOdd`).
    var generationStarted: UInt64 = 0
    var generationOdd = false
    /// Origins (`scheme://authority`) parsed by curl, whose URLs with a plain path set only the
    /// path on a handle's own copy (`plainPath`); the last one used, to find it without hashing.
    var parsedOrigins: [String: ParsedURL] = [:]
    var lastParsedOrigin: (prefix: String, parsed: ParsedURL)?

    /// A transfer was added to the multi handle since the last `drive`.
    var startedSinceDrive = true

    /// Connections replaced before they grow old, busy or not. libcurl retires a connection older
    /// than `CURLOPT_MAXLIFETIME_CONN` only when no request is using it, and a sender's HTTP/2
    /// connection to FCM may never fall idle. So the client counts generations of
    /// `maxConnectionAgeSeconds`, and the requests of every other generation are made with a TLS
    /// option that changes nothing for them (`CURLSSLOPT_NO_REVOKE`: revocation checks are a
    /// Windows TLS library's; libcurl's OpenSSL backend never reads the flag) but that libcurl
    /// compares when it looks for a connection to reuse: a request reuses only a connection made
    /// with the same TLS options (libcurl 7.88 and 8.14 alike; `HTTPClientTests` holds it).
    /// When a generation ends, new requests stop going to the last one's connections: these
    /// finish the streams they carry, fall idle and are closed as too old (or, when the host's
    /// connection limit is reached, the oldest idle one first), while fresh connections take
    /// over. A connection so lives at most about two ages. Only `https://` origins with OpenSSL
    /// (an `http://` request sets no TLS option; its HTTP/1.1 connections fall idle between
    /// requests, so `CURLOPT_MAXLIFETIME_CONN` alone retires them).
    func connectionGenerationOdd(_ url: String) -> Bool {
        guard HTTPClient.replacesBusyConnections, configuration.maxConnectionAgeSeconds > 0, url.hasPrefix("https://") else { return false }
        let now = HTTPClient.monotonicMilliseconds()
        if generationStarted == 0 {
            generationStarted = now
        } else if now - generationStarted >= UInt64(configuration.maxConnectionAgeSeconds) * 1000 {
            generationStarted = now
            generationOdd.toggle()
        }
        return generationOdd
    }

    /// The flag that tells generations apart is inert only with OpenSSL (see above).
    static let replacesBusyConnections = libraryVersion.contains("OpenSSL/")

    static func monotonicMilliseconds() -> UInt64 {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return UInt64(now.tv_sec) * 1000 + UInt64(now.tv_nsec) / 1_000_000
    }
}

/// The sockets of a client's connections; touched only by the thread that drives the client.
final class SocketRegistry {
    var open: [Int32] = []
    /// Connections closed so far (see `start`: a handle that lived through one is reset).
    var closed: UInt64 = 0

    func cork(_ on: Bool) {
        var value: Int32 = on ? 1 : 0
        for socket in open {
            _ = setsockopt(socket, Int32(IPPROTO_TCP), TCP_CORK, &value, socklen_t(MemoryLayout<Int32>.size))
        }
    }
}

/// A socket curl made for a connection of the multi handle.
let socketOpened: @convention(c) (UnsafeMutableRawPointer?, curl_socket_t, curlsocktype) -> Int32 = {
    context, socket, purpose in
    if let context, purpose == CURLSOCKTYPE_IPCXN {
        Unmanaged<SocketRegistry>.fromOpaque(context).takeUnretainedValue().open.append(socket)
    }
    return Int32(CURL_SOCKOPT_OK)
}

/// curl is done with a socket: forget it, and close it (the callback's duty).
let socketClosing: @convention(c) (UnsafeMutableRawPointer?, curl_socket_t) -> Int32 = {
    context, socket in
    if let context {
        let registry = Unmanaged<SocketRegistry>.fromOpaque(context).takeUnretainedValue()
        registry.open.removeAll { $0 == socket }
        registry.closed &+= 1
    }
    return close(socket)
}
