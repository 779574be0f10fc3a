import CCurl
import Glibc
import Synchronization

// An HTTP/2 client over libcurl's multi interface: many requests in flight on few connections
// (one stream each), driven by the thread that owns the client. Nothing outside this file sees
// a curl type.

/// One request. `headers` are whole header lines (`"Name: value"`).
public struct HTTPRequest: Sendable {
    /// `GET`, `POST`, or any other method name (sent as a custom request).
    public var method: String
    public var url: String
    public var headers: [String]
    public var body: [UInt8]

    public init(method: String = "POST", url: String, headers: [String] = [], body: [UInt8] = []) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
    }
}

/// The final answer to a request (interim 1xx answers are dropped).
public struct HTTPResponse: Sendable {
    public var status: Int
    /// In the order received; names lowercased. Read from the header lines as received when
    /// first asked for (each read reads them again): most answers are judged by status and body
    /// alone, and turning every header line into two Strings cost more than the rest of the
    /// answer's handling.
    public var headers: [(name: String, value: String)] {
        get { given ?? HTTPResponse.parse(headerLines) }
        set { given = newValue; headerLines = [] }
    }
    public var body: [UInt8]
    /// The headers as the caller gave them (nil: read them from `headerLines`).
    private var given: [(name: String, value: String)]?
    /// The final answer's header lines, each as curl handed it over (CRLF included).
    private var headerLines: [UInt8]

    public init(status: Int, headers: [(name: String, value: String)] = [], body: [UInt8] = []) {
        self.status = status
        self.given = headers
        self.headerLines = []
        self.body = body
    }

    init(status: Int, headerLines: [UInt8], body: [UInt8]) {
        self.status = status
        self.given = nil
        self.headerLines = headerLines
        self.body = body
    }

    /// `name: value` lines (CRLF or LF ended) as (lowercased name, value) pairs, spaces around
    /// both cut; lines without a colon or with an empty name are left out.
    static func parse(_ lines: [UInt8]) -> [(name: String, value: String)] {
        var headers: [(name: String, value: String)] = []
        lines.withUnsafeBytes { bytes in
            var start = 0
            while start < bytes.count {
                var end = start
                while end < bytes.count && bytes[end] != 0x0A { end += 1 }
                let line = UnsafeRawBufferPointer(rebasing: bytes[start..<min(end + 1, bytes.count)])
                start = end + 1
                guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else { continue }
                let name = text(line[..<colon], lowercased: true)
                guard !name.isEmpty else { continue }
                headers.append((name: name, value: text(line[(colon + 1)...], lowercased: false)))
            }
        }
        return headers
    }

    /// `part` without the spaces around it, as a String; header names are ASCII, so lowering
    /// them byte by byte is enough.
    private static func text(_ part: Slice<UnsafeRawBufferPointer>, lowercased: Bool) -> String {
        let isSpace: (UInt8) -> Bool = { $0 == 0x20 || $0 == 0x09 || $0 == 0x0D || $0 == 0x0A }
        guard let first = part.firstIndex(where: { !isSpace($0) }),
              let last = part.lastIndex(where: { !isSpace($0) }) else { return "" }
        let bytes = part[first...last]
        guard lowercased else { return String(decoding: bytes, as: UTF8.self) }
        return String(unsafeUninitializedCapacity: bytes.count) { buffer in
            for (offset, byte) in bytes.enumerated() {
                buffer[offset] = byte >= 0x41 && byte <= 0x5A ? byte + 0x20 : byte
            }
            return bytes.count
        }
    }

    /// The first value of the header `name` (any case), or nil.
    public func header(_ name: String) -> String? {
        let wanted = name.lowercased()
        return headers.first { $0.name == wanted }?.value
    }
}

/// A request that got no HTTP answer.
public struct HTTPClientError: Error, Sendable, CustomStringConvertible {
    public enum Kind: String, Sendable {
        /// The connect or request timeout passed.
        case timeout
        /// No connection, or it broke: refused, unresolvable host, reset, HTTP/2 framing errors.
        case connection
        /// The TLS handshake or the certificate check failed.
        case tls
        /// The server said it did not process the request: RST_STREAM REFUSED_STREAM, or a stream
        /// above the last-stream-id of its GOAWAY. Safe to send again (it reached no application);
        /// libcurl already sent it again on a fresh connection as often as it would.
        case unprocessed
        /// Anything else (bad URL, an option libcurl refused, out of memory).
        case other
    }

    public var kind: Kind
    /// libcurl's error text; it never holds request headers (and so no access token).
    public var message: String

    public init(kind: Kind, message: String) {
        self.kind = kind
        self.message = message
    }

    public var description: String { "HTTP \(kind.rawValue) error: \(message)" }
}

/// How an `HTTPClient` connects; every default is the one written beside it.
public struct HTTPClientConfiguration: Sendable {
    /// Concurrent HTTP/2 streams on one connection (`CURLMOPT_MAX_CONCURRENT_STREAMS`). Default 100,
    /// what FCM allows.
    public var maxStreamsPerConnection: Int = 100
    /// Connections to one host (`CURLMOPT_MAX_HOST_CONNECTIONS`); more in flight than
    /// connections times streams wait in curl's queue. Default 16.
    public var maxConnections: Int = 16
    /// Default 10,000 ms.
    public var connectTimeoutMilliseconds: Int = 10_000
    /// The whole request, queueing and connecting included (`CURLOPT_TIMEOUT_MS`). Default 30,000 ms.
    public var requestTimeoutMilliseconds: Int = 30_000
    /// PEM file of the certificate authorities to trust (`CURLOPT_CAINFO`); nil: the system's.
    /// Certificates and host names are always verified. Default nil.
    public var caFile: String? = nil

    public init() {}

    /// Enough connections for `inFlight` requests at `maxStreamsPerConnection` streams each.
    public mutating func connections(toCarry inFlight: Int) {
        let streams = max(1, maxStreamsPerConnection)
        maxConnections = max(1, (inFlight + streams - 1) / streams)
    }
}

/// A finished request, identified by the tag it was submitted with.
public struct HTTPCompletion: Sendable {
    public var tag: UInt64
    public var result: Result<HTTPResponse, HTTPClientError>

    public init(tag: UInt64, result: Result<HTTPResponse, HTTPClientError>) {
        self.tag = tag
        self.result = result
    }
}

/// `curl_global_init` is not thread-safe; a global is initialised exactly once.
private let curlGlobalInit: CURLcode = herald_global_init()

/// Many concurrent requests over HTTP/2 (h2c with prior knowledge for `http://`, ALPN for
/// `https://`), multiplexed on few kept-alive connections.
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
    private let configuration: HTTPClientConfiguration
    private let multi: UnsafeMutableRawPointer
    private var active: [HandleKey: Transfer] = [:]
    private var idle: [EasyHandle] = []
    /// Requests that failed before reaching curl, reported by the next poll.
    private var failedEarly: [HTTPCompletion] = []
    private let performHandle = Mutex<PerformState>(PerformState())
    /// Cleartext (h2c) origins, keyed by `http://host:port`; see `Origin`.
    private var origins: [String: Origin] = [:]
    private static let maxIdleHandles = 512
    /// The header list of the last request, shared by every request with the same lines (the
    /// sender's lines change only when its access token does).
    private var lastHeaderList: HeaderList?
    /// No proxy variable in the environment: handles are told so, which spares libcurl reading
    /// them for every transfer (and keeps their meaning when one is set).
    private let noProxyFromEnvironment: Bool

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
    public var inFlight: Int {
        active.count + failedEarly.count + origins.values.reduce(0) { $0 + $1.pending.count - $1.head }
    }

    /// Starts a request; its completion comes out of a later `poll` with the same `tag`.
    public func submit(_ request: HTTPRequest, tag: UInt64) {
        guard let origin = origin(of: request.url) else {
            start(request, tag: tag, role: .plain)
            return
        }
        origin.pending.append(Pending(request: request, tag: tag, submitted: HTTPClient.monotonicMilliseconds()))
        admit(origin)
    }

    /// The last URL submitted and its cleartext origin (nil: not cleartext): a sender sends to
    /// one URL, so most requests find their origin here without parsing the URL or hashing the
    /// origin's key. Origins are never removed from `origins`, so the one kept here stays the
    /// one listed there.
    private var lastURL: (url: String, origin: Origin?)?

    private func origin(of url: String) -> Origin? {
        if let last = lastURL, last.url == url { return last.origin }
        var origin: Origin? = nil
        if let key = HTTPClient.cleartextOrigin(url) {
            if let known = origins[key] {
                origin = known
            } else {
                let made = Origin(key: key)
                origins[key] = made
                origin = made
            }
        }
        lastURL = (url, origin)
        return origin
    }

    /// Hands curl the requests of a cleartext origin that fit: streams on the connections known
    /// to be open, and one opener (a request on a fresh prior-knowledge connection) per further
    /// connection needed, up to `maxConnections`.
    private func admit(_ origin: Origin) {
        let streams = max(1, configuration.maxStreamsPerConnection)
        while origin.head < origin.pending.count && origin.streams < origin.connections * streams {
            let next = origin.pending[origin.head]
            origin.head += 1
            if start(next.request, tag: next.tag, role: .stream(origin)) { origin.streams += 1 }
        }
        let waiting = origin.pending.count - origin.head
        let wanted = min(max(1, configuration.maxConnections) - origin.connections, (waiting + streams - 1) / streams)
        while origin.openers < wanted && origin.head < origin.pending.count {
            let next = origin.pending[origin.head]
            origin.head += 1
            if start(next.request, tag: next.tag, role: .opener(origin)) { origin.openers += 1 }
        }
        origin.compact()
    }

    /// Adds one transfer to the multi handle; false when it failed at once (reported by the next poll).
    @discardableResult
    private func start(_ request: HTTPRequest, tag: UInt64, role: Role) -> Bool {
        let easy = idle.popLast() ?? EasyHandle()
        guard let easy else {
            failedEarly.append(HTTPCompletion(tag: tag, result: .failure(HTTPClientError(kind: .other, message: "curl_easy_init failed"))))
            return false
        }
        // libcurl counts the times it sent a request again on a fresh connection (a refused
        // stream, a GOAWAY's unprocessed streams, a reused connection found dead) per handle, and
        // clears the count only in curl_easy_reset: a handle that keeps its options would carry
        // the count from request to request and, at its sixth retry ever, fail a request that
        // never reached the server ("Connection died, tried 5 times"). Such a retry needs a
        // connection closed while the handle's transfer ran, and connections close seldom, so a
        // handle that lived through a close starts again from a reset (every option set anew).
        if easy.closesSeen != sockets.closed {
            if easy.closesSeen != nil { easy.settings = nil }
            easy.closesSeen = sockets.closed
        }
        let transfer = Transfer(tag: tag, easy: easy)
        transfer.role = role
        if let error = configure(transfer, request, version: role.version, fresh: role.isOpener, multiplexed: true,
                                 pipewait: role.waitsForMultiplexing) {
            recycle(easy)
            failedEarly.append(HTTPCompletion(tag: tag, result: .failure(error)))
            return false
        }
        let code = curl_multi_add_handle(multi, easy.handle)
        guard code == CURLM_OK else {
            recycle(easy)
            failedEarly.append(HTTPCompletion(tag: tag, result: .failure(
                HTTPClientError(kind: .other, message: "curl_multi_add_handle failed: \(String(cString: curl_multi_strerror(code)))"))))
            return false
        }
        active[HandleKey(easy.handle)] = transfer
        startedSinceDrive = true
        return true
    }

    /// Drives the transfers and returns the ones that finished. When none has, waits up to
    /// `timeoutMilliseconds` for network activity (`curl_multi_poll`), for `wake()`, or for
    /// `extraFileDescriptor` (when >= 0) to become readable, then drives them once more.
    public func poll(timeoutMilliseconds: Int32, extraFileDescriptor: Int32 = -1) -> [HTTPCompletion] {
        var finished = failedEarly
        failedEarly.removeAll()
        expireQueued(into: &finished)
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
        let result: Result<HTTPResponse, HTTPClientError> = performHandle.withLock { state in
            if state.easy == nil { state.easy = EasyHandle() }
            guard let easy = state.easy else {
                return .failure(HTTPClientError(kind: .other, message: "curl_easy_init failed"))
            }
            let transfer = Transfer(tag: 0, easy: easy)
            // The same h2c work-around as the multi loop: prior knowledge only on a new connection.
            let origin = HTTPClient.cleartextOrigin(request.url)
            let reuse = origin.map { state.h2cOrigins.contains($0) } ?? true
            let version = origin == nil ? Int(CURL_HTTP_VERSION_2TLS)
                : Int(reuse ? CURL_HTTP_VERSION_2_0 : CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE)
            if let error = configure(transfer, request, version: version, fresh: !reuse, multiplexed: false, pipewait: false) {
                return .failure(error)
            }
            let code = curl_easy_perform(easy.handle)
            if let origin {
                if code == CURLE_OK && transfer.httpVersion == Int(CURL_HTTP_VERSION_2_0) {
                    state.h2cOrigins.insert(origin)
                } else {
                    state.h2cOrigins.remove(origin)
                }
            }
            return transfer.result(code)
        }
        return try result.get()
    }

    // MARK: internals

    private func drive(into finished: inout [HTTPCompletion]) {
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
            let result = transfer.result(code)
            finished.append(HTTPCompletion(tag: transfer.tag, result: result))
            settle(transfer, result, into: &finished)
            recycle(transfer.easy)
        }
        for origin in touched {
            origin.touched = false
            admit(origin)
        }
        touched.removeAll(keepingCapacity: true)
    }

    /// The sockets of the multi handle's connections, from curl's socket callbacks.
    private let sockets = SocketRegistry()

    /// URLs parsed by curl, for the multi handle's transfers (a sender uses one or two).
    private var parsedURLs: [String: ParsedURL] = [:]

    /// The parsed handle of `url`; nil when curl does not take it (the string then goes to
    /// curl as it is, and fails with curl's own error).
    private func parsedURL(_ url: String) -> ParsedURL? {
        if let known = parsedURLs[url] { return known }
        guard let parsed = ParsedURL(url) else { return nil }
        if parsedURLs.count >= 16 { parsedURLs.removeAll() }
        parsedURLs[url] = parsed
        return parsed
    }

    /// Origins whose streams or connections changed in this pass: each admits what now fits.
    private var touched: [Origin] = []
    /// A transfer was added to the multi handle since the last `drive`.
    private var startedSinceDrive = true

    /// Updates what is known of a cleartext origin's connections after one of its transfers.
    private func settle(_ transfer: Transfer, _ result: Result<HTTPResponse, HTTPClientError>, into finished: inout [HTTPCompletion]) {
        switch transfer.role {
        case .plain:
            return
        case .opener(let origin):
            origin.openers -= 1
            switch result {
            case .success where transfer.httpVersion == Int(CURL_HTTP_VERSION_2_0):
                origin.connections += 1
            case .failure(let error) where (error.kind == .connection || error.kind == .tls) && origin.connections == 0 && origin.openers == 0:
                // Nothing reaches the server: the queued requests would fail the same way, one by one.
                for queued in origin.pending[origin.head...] {
                    finished.append(HTTPCompletion(tag: queued.tag, result: .failure(error)))
                }
                origin.pending.removeAll()
                origin.head = 0
            default:
                break
            }
            touch(origin)
        case .stream(let origin):
            origin.streams -= 1
            // An answer over HTTP/1.1, a new connection, or a broken one: one h2c connection fewer.
            let lost: Bool
            switch result {
            case .success: lost = transfer.httpVersion != Int(CURL_HTTP_VERSION_2_0) || transfer.newConnections > 0
            case .failure(let error): lost = error.kind == .connection
            }
            if lost { origin.connections = max(0, origin.connections - 1) }
            touch(origin)
        }
    }

    private func touch(_ origin: Origin) {
        if !origin.touched {
            origin.touched = true
            touched.append(origin)
        }
    }

    /// Fails cleartext requests that waited in the queue for longer than the request timeout.
    private func expireQueued(into finished: inout [HTTPCompletion]) {
        let now = HTTPClient.monotonicMilliseconds()
        let limit = UInt64(max(0, configuration.requestTimeoutMilliseconds))
        for (key, origin) in origins {
            guard origin.head < origin.pending.count,
                  now - origin.pending[origin.head].submitted >= limit else { continue }
            while origin.head < origin.pending.count && now - origin.pending[origin.head].submitted >= limit {
                let queued = origin.pending[origin.head]
                origin.head += 1
                finished.append(HTTPCompletion(tag: queued.tag, result: .failure(HTTPClientError(
                    kind: .timeout, message: "no HTTP/2 stream to \(key) became free within \(limit) ms"))))
            }
            origin.compact()
        }
    }

    /// `http://host:port` of a cleartext URL (lowercased), nil for anything else.
    static func cleartextOrigin(_ url: String) -> String? {
        // Called for every request: bytes, not Characters, and no copy of the whole URL.
        let bytes = url.utf8
        let scheme = Array("http://".utf8)
        guard bytes.count > scheme.count else { return nil }
        var index = bytes.startIndex
        for expected in scheme {
            let byte = bytes[index]
            guard byte == expected || (expected >= 0x61 && expected <= 0x7A && byte == expected - 0x20) else { return nil }
            index = bytes.index(after: index)
        }
        var end = index
        while end != bytes.endIndex, bytes[end] != UInt8(ascii: "/"), bytes[end] != UInt8(ascii: "?"), bytes[end] != UInt8(ascii: "#") {
            end = bytes.index(after: end)
        }
        return "http://" + String(decoding: bytes[index..<end], as: UTF8.self).lowercased()
    }

    static func monotonicMilliseconds() -> UInt64 {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return UInt64(now.tv_sec) * 1000 + UInt64(now.tv_nsec) / 1_000_000
    }

    private func recycle(_ easy: EasyHandle) {
        if idle.count < HTTPClient.maxIdleHandles { idle.append(easy) }
    }

    /// The variables libcurl reads a proxy from (`NO_PROXY` only matters with one of them).
    static let proxyVariables = ["http_proxy", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"]

    /// Sets the options of `request` on the handle; nil when all were taken.
    ///
    /// A handle keeps its options from one request to the next, so only what differs from its
    /// last request is set: for the sender's sends, the body and the transfer it reports to.
    /// Setting every option again (after `curl_easy_reset`) made libcurl free and copy the URL
    /// and headers and parse the URL for every message. A handle whose last configuration
    /// failed, or whose method changes, starts again from a reset.
    private func configure(_ transfer: Transfer, _ request: HTTPRequest, version: Int, fresh: Bool, multiplexed: Bool,
                           pipewait: Bool) -> HTTPClientError? {
        let easy = transfer.easy
        let h = easy.handle
        easy.errorBuffer[0] = 0
        var failure: HTTPClientError?
        func check(_ code: CURLcode, _ name: String) {
            if code != CURLE_OK, failure == nil {
                failure = HTTPClientError(kind: .other, message: "\(name) refused: \(HTTPClient.text(code))")
            }
        }
        func set(_ option: CURLoption, _ value: Int, _ name: String) { check(herald_easy_setopt_long(h, option, value), name) }
        func set(_ option: CURLoption, _ value: String, _ name: String) {
            check(value.withCString { herald_easy_setopt_ptr(h, option, $0) }, name)  // curl copies strings
        }

        var method = Method(request.method)
        if method == .get && !request.body.isEmpty { method = .post }
        if easy.settings == nil || easy.settings?.method != method {
            curl_easy_reset(h)
            easy.settings = nil
            easy.headerList = nil  // the reset dropped it from the handle: set it again below
            check(herald_easy_setopt_ptr(h, CURLOPT_ERRORBUFFER, easy.errorBuffer), "CURLOPT_ERRORBUFFER")
            set(CURLOPT_NOSIGNAL, 1, "CURLOPT_NOSIGNAL")
            set(CURLOPT_CONNECTTIMEOUT_MS, configuration.connectTimeoutMilliseconds, "CURLOPT_CONNECTTIMEOUT_MS")
            set(CURLOPT_TIMEOUT_MS, configuration.requestTimeoutMilliseconds, "CURLOPT_TIMEOUT_MS")
            set(CURLOPT_TCP_KEEPALIVE, 1, "CURLOPT_TCP_KEEPALIVE")
            set(CURLOPT_SSL_VERIFYPEER, 1, "CURLOPT_SSL_VERIFYPEER")
            set(CURLOPT_SSL_VERIFYHOST, 2, "CURLOPT_SSL_VERIFYHOST")
            if let caFile = configuration.caFile { set(CURLOPT_CAINFO, caFile, "CURLOPT_CAINFO") }
            if noProxyFromEnvironment {
                set(CURLOPT_PROXY, "", "CURLOPT_PROXY")
                // No proxy, so nothing to bypass: spares reading no_proxy and NO_PROXY per transfer.
                set(CURLOPT_NOPROXY, "", "CURLOPT_NOPROXY")
            }
            check(herald_easy_setopt_write(h, CURLOPT_WRITEFUNCTION, receiveBody), "CURLOPT_WRITEFUNCTION")
            check(herald_easy_setopt_header(h, receiveHeader), "CURLOPT_HEADERFUNCTION")
            if multiplexed {
                // Only the multi handle's transfers: `perform` runs on other threads.
                // The registry, not the client: curl_multi_cleanup in the client's deinit closes
                // the last connections, and the registry is released only after that.
                let registry = Unmanaged.passUnretained(sockets).toOpaque()
                check(herald_easy_setopt_sockopt(h, socketOpened), "CURLOPT_SOCKOPTFUNCTION")
                check(herald_easy_setopt_ptr(h, CURLOPT_SOCKOPTDATA, registry), "CURLOPT_SOCKOPTDATA")
                check(herald_easy_setopt_closesocket(h, socketClosing), "CURLOPT_CLOSESOCKETFUNCTION")
                check(herald_easy_setopt_ptr(h, CURLOPT_CLOSESOCKETDATA, registry), "CURLOPT_CLOSESOCKETDATA")
            }
            switch method {
            case .get: set(CURLOPT_HTTPGET, 1, "CURLOPT_HTTPGET")
            case .head: set(CURLOPT_NOBODY, 1, "CURLOPT_NOBODY")
            case .post: set(CURLOPT_POST, 1, "CURLOPT_POST")
            case .other(let name):
                set(CURLOPT_POST, 1, "CURLOPT_POST")
                set(CURLOPT_CUSTOMREQUEST, name, "CURLOPT_CUSTOMREQUEST")
            }
        }
        let previous = easy.settings
        if previous?.url != request.url {
            if multiplexed, let parsed = parsedURL(request.url) {
                // A handle parsed once per URL: given a string, curl parses it and prints it back
                // for every transfer (a tenth of its work per request, by instruction count).
                // Unsetting the string makes curl take the URL from the parsed handle.
                check(herald_easy_setopt_ptr(h, CURLOPT_URL, nil), "CURLOPT_URL")
                check(herald_easy_setopt_ptr(h, CURLOPT_CURLU, UnsafeRawPointer(parsed.handle)), "CURLOPT_CURLU")
                easy.parsedURL = parsed  // kept alive while curl may read it
            } else {
                check(herald_easy_setopt_ptr(h, CURLOPT_CURLU, nil), "CURLOPT_CURLU")
                easy.parsedURL = nil
                set(CURLOPT_URL, request.url, "CURLOPT_URL")
            }
        }
        if previous?.version != version { set(CURLOPT_HTTP_VERSION, version, "CURLOPT_HTTP_VERSION") }
        if previous?.fresh != fresh { set(CURLOPT_FRESH_CONNECT, fresh ? 1 : 0, "CURLOPT_FRESH_CONNECT") }
        if previous?.pipewait != pipewait { set(CURLOPT_PIPEWAIT, pipewait ? 1 : 0, "CURLOPT_PIPEWAIT") }

        if method.sendsBody {
            // curl reads the body from the handle's own buffer while the transfer runs (the
            // handle is not reused before it ends), instead of copying it into a fresh allocation.
            let body = easy.stage(request.body)
            check(herald_easy_setopt_off(h, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(request.body.count)), "CURLOPT_POSTFIELDSIZE_LARGE")
            check(herald_easy_setopt_ptr(h, CURLOPT_POSTFIELDS, body), "CURLOPT_POSTFIELDS")
        }

        let list: HeaderList
        let largeBody = method.sendsBody && request.body.count > HeaderList.expectThreshold
        if let last = lastHeaderList, last.largeBody == largeBody, last.lines == request.headers {
            list = last
        } else {
            guard let made = HeaderList(request.headers, largeBody: largeBody) else {
                easy.settings = nil
                return HTTPClientError(kind: .other, message: "curl_slist_append failed (out of memory)")
            }
            list = made
            lastHeaderList = made
        }
        if easy.headerList !== list {
            check(herald_easy_setopt_ptr(h, CURLOPT_HTTPHEADER, list.list), "CURLOPT_HTTPHEADER")
            easy.headerList = list  // kept alive while curl may read it
        }

        let context = Unmanaged.passUnretained(transfer).toOpaque()
        check(herald_easy_setopt_ptr(h, CURLOPT_WRITEDATA, context), "CURLOPT_WRITEDATA")
        check(herald_easy_setopt_ptr(h, CURLOPT_HEADERDATA, context), "CURLOPT_HEADERDATA")
        easy.settings = failure == nil ? HandleSettings(method: method, url: request.url, version: version, fresh: fresh, multiplexed: multiplexed,
                                                            pipewait: pipewait) : nil
        return failure
    }

    fileprivate static func text(_ code: CURLcode) -> String { String(cString: curl_easy_strerror(code)) }

    fileprivate static func kind(_ code: CURLcode, message: String) -> HTTPClientError.Kind {
        // libcurl has no code of its own for a refused stream (GOAWAY's unprocessed streams are
        // closed as refused by nghttp2 too): it retries such a stream on a fresh connection by
        // itself, and when it stops retrying, says so only in its text.
        if code == CURLE_HTTP2_STREAM || code == CURLE_HTTP2 || code == CURLE_SEND_ERROR || code == CURLE_RECV_ERROR,
           message.contains("REFUSED_STREAM") {
            return .unprocessed
        }
        switch code {
        case CURLE_OPERATION_TIMEDOUT:
            return .timeout
        case CURLE_COULDNT_CONNECT, CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_RESOLVE_PROXY, CURLE_SEND_ERROR,
             CURLE_RECV_ERROR, CURLE_GOT_NOTHING, CURLE_HTTP2, CURLE_HTTP2_STREAM, CURLE_PARTIAL_FILE:
            return .connection
        case CURLE_SSL_CONNECT_ERROR, CURLE_SSL_ENGINE_NOTFOUND, CURLE_SSL_ENGINE_SETFAILED, CURLE_SSL_CERTPROBLEM,
             CURLE_SSL_CIPHER, CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_ENGINE_INITFAILED, CURLE_SSL_CACERT_BADFILE,
             CURLE_SSL_SHUTDOWN_FAILED, CURLE_SSL_CRL_BADFILE, CURLE_SSL_ISSUER_ERROR, CURLE_SSL_PINNEDPUBKEYNOTMATCH,
             CURLE_SSL_INVALIDCERTSTATUS, CURLE_SSL_CLIENTCERT, CURLE_USE_SSL_FAILED:
            return .tls
        default:
            return .other
        }
    }
}

// libcurl 7.88.1 (Debian 12) breaks a prior-knowledge (h2c) transfer that reuses an existing
// connection: it stacks a second HTTP/2 layer onto it and fails with "Error in the HTTP2 framing
// layer" (curl issue 10634, fixed after 7.88.1). A transfer asking for plain HTTP/2
// (CURL_HTTP_VERSION_2_0) reuses an h2c connection fine, but opens a new one as HTTP/1.1 with an
// Upgrade the emulator does not take. So for cleartext origins the client decides itself: a
// request that needs a new connection goes out with prior knowledge on a fresh connection (an
// "opener"); the rest go as HTTP/2 streams, at most `maxStreamsPerConnection` per connection
// known to be open, and wait in `Origin.pending` otherwise.

/// What a transfer is for the cleartext bookkeeping.
private enum Role {
    /// https, or anything curl negotiates itself.
    case plain
    /// Opens a new h2c connection with prior knowledge.
    case opener(Origin)
    /// A stream on an h2c connection already open.
    case stream(Origin)

    var version: Int {
        switch self {
        case .plain: return Int(CURL_HTTP_VERSION_2TLS)
        case .opener: return Int(CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE)
        case .stream: return Int(CURL_HTTP_VERSION_2_0)
        }
    }

    var isOpener: Bool { if case .opener = self { return true } else { return false } }

    /// Whether curl may hold the transfer back for a connection still opening, to multiplex on it
    /// (`CURLOPT_PIPEWAIT`). Not for a stream: it is admitted only onto a connection known to be
    /// open, and libcurl sends a refused stream again by itself (one above a GOAWAY's
    /// last-stream-id too); 7.88 let such a retry wait for an opener's connection still opening
    /// and then wrote HTTP/1.1 onto it ("Received HTTP/0.9"), or left it waiting until its timeout.
    /// Without the wait the retry goes out at once, over a connection of its own.
    var waitsForMultiplexing: Bool { if case .stream = self { return false } else { return true } }
}

private struct Pending {
    var request: HTTPRequest
    var tag: UInt64
    var submitted: UInt64
}

/// One cleartext origin: connections believed open, openers and streams in flight, and the
/// requests waiting for a stream (`pending[head...]`).
private final class Origin {
    /// `http://host:port`
    let key: String
    var connections = 0
    var openers = 0
    var streams = 0
    var pending: [Pending] = []
    var head = 0
    /// Listed in the client's `touched`.
    var touched = false

    init(key: String) { self.key = key }

    func compact() {
        if head == pending.count {
            pending.removeAll(keepingCapacity: true)
            head = 0
        } else if head > 1024 && head * 2 > pending.count {
            pending.removeFirst(head)
            head = 0
        }
    }
}

private struct PerformState {
    var easy: EasyHandle?
    /// Cleartext origins the perform handle holds an h2c connection to.
    var h2cOrigins: Set<String> = []
}

/// A request method as the handle's options express it.
private enum Method: Equatable {
    case get, head, post
    case other(String)

    init(_ name: String) {
        switch name {
        case "POST", "post": self = .post
        case "GET", "get": self = .get
        case "HEAD", "head": self = .head
        default:
            let upper = name.uppercased()
            self = upper == "POST" ? .post : upper == "GET" ? .get : upper == "HEAD" ? .head : .other(upper)
        }
    }

    /// GET and HEAD send no body; a GET with a body goes out as a POST, as before.
    var sendsBody: Bool { if case .get = self { return false } else if case .head = self { return false } else { return true } }
}

/// The options a handle was last configured with.
private struct HandleSettings {
    var method: Method
    var url: String
    var version: Int
    var fresh: Bool
    var multiplexed: Bool
    var pipewait: Bool
}

/// A curl header list and the lines it was made from; freed when no handle holds it.
private final class HeaderList {
    let lines: [String]
    /// Made for a body larger than `expectThreshold`.
    let largeBody: Bool
    let list: UnsafeMutablePointer<curl_slist>?

    /// libcurl 7.88 sends `Expect: 100-continue` (and waits for the answer to it) only for an
    /// HTTP/1.1 body larger than this (its EXPECT_100_THRESHOLD, 1 MiB).
    static let expectThreshold = 1024 * 1024

    init?(_ lines: [String], largeBody: Bool) {
        var list: UnsafeMutablePointer<curl_slist>?
        var all = lines
        // An empty `Expect:` stops curl from waiting for 100 Continue on large HTTP/1.1 bodies.
        // Smaller bodies go without it: every custom header costs curl a look at each request.
        if largeBody && !all.contains(where: { $0.lowercased().hasPrefix("expect:") }) { all.append("Expect:") }
        for line in all {
            guard let appended = curl_slist_append(list, line) else {
                curl_slist_free_all(list)
                return nil
            }
            list = appended
        }
        self.lines = lines
        self.largeBody = largeBody
        self.list = list
    }

    deinit { curl_slist_free_all(list) }
}

/// An easy handle as a dictionary key. Its address is libcurl's allocation, not outside input, so
/// a multiply-and-fold hash serves: it spares the standard SipHash on the two look-ups of every
/// request.
private struct HandleKey: Hashable {
    let handle: UnsafeMutableRawPointer
    init(_ handle: UnsafeMutableRawPointer) { self.handle = handle }
    static func == (a: HandleKey, b: HandleKey) -> Bool { a.handle == b.handle }
    func hash(into hasher: inout Hasher) { hasher.combine(handle) }
    func _rawHashValue(seed: Int) -> Int {
        let mixed = (Int(bitPattern: handle) ^ seed) &* -7_046_029_254_386_353_131
        return mixed ^ (mixed &>> 31)
    }
}

/// A URL as curl parsed it (`CURLU`); freed when no handle holds it.
private final class ParsedURL {
    let handle: OpaquePointer

    init?(_ url: String) {
        guard let handle = curl_url() else { return nil }
        guard curl_url_set(handle, CURLUPART_URL, url, 0) == CURLUE_OK else {
            curl_url_cleanup(handle)
            return nil
        }
        self.handle = handle
    }

    deinit { curl_url_cleanup(handle) }
}

/// An easy handle, its error buffer and its body buffer, reused request after request with
/// the options it was last given.
private final class EasyHandle {
    let handle: UnsafeMutableRawPointer
    let errorBuffer: UnsafeMutablePointer<CChar>
    var settings: HandleSettings?
    var headerList: HeaderList?
    /// `SocketRegistry.closed` when the handle's last multiplexed transfer started (nil: none yet).
    var closesSeen: UInt64?
    var parsedURL: ParsedURL?
    private var body: UnsafeMutableRawPointer
    private var bodyCapacity: Int

    init?() {
        guard let handle = curl_easy_init() else { return nil }
        self.handle = handle
        errorBuffer = .allocate(capacity: Int(CURL_ERROR_SIZE) + 1)
        errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE) + 1)
        bodyCapacity = 1024
        body = .allocate(byteCount: bodyCapacity, alignment: 16)
    }

    /// Copies `bytes` into the handle's body buffer (grown when needed) and returns it.
    func stage(_ bytes: [UInt8]) -> UnsafeMutableRawPointer {
        if bytes.count > bodyCapacity {
            body.deallocate()
            bodyCapacity = max(bytes.count, bodyCapacity * 2)
            body = .allocate(byteCount: bodyCapacity, alignment: 16)
        }
        bytes.withUnsafeBytes { if let base = $0.baseAddress, !$0.isEmpty { body.copyMemory(from: base, byteCount: $0.count) } }
        return body
    }

    deinit {
        curl_easy_cleanup(handle)
        errorBuffer.deallocate()
        body.deallocate()
    }
}

/// What one request has received so far; curl's callbacks reach it through an unretained
/// pointer while the client (or `perform`) holds it.
private final class Transfer {
    let tag: UInt64
    let easy: EasyHandle
    /// The header lines of the answer so far, as curl handed them over.
    var headerLines: [UInt8] = []
    var body: [UInt8] = []
    var role: Role = .plain

    init(tag: UInt64, easy: EasyHandle) {
        self.tag = tag
        self.easy = easy
    }

    /// `CURL_HTTP_VERSION_*` of the answer (0 when there was none).
    var httpVersion: Int {
        var version = 0
        _ = herald_easy_getinfo_long(easy.handle, CURLINFO_HTTP_VERSION, &version)
        return version
    }

    /// Connections this transfer had to open.
    var newConnections: Int {
        var count = 0
        _ = herald_easy_getinfo_long(easy.handle, CURLINFO_NUM_CONNECTS, &count)
        return count
    }

    func result(_ code: CURLcode) -> Result<HTTPResponse, HTTPClientError> {
        guard code == CURLE_OK else {
            let detail = String(cString: easy.errorBuffer)
            let message = detail.isEmpty ? HTTPClient.text(code) : detail
            return .failure(HTTPClientError(kind: HTTPClient.kind(code, message: message), message: message))
        }
        var status = 0
        _ = herald_easy_getinfo_long(easy.handle, CURLINFO_RESPONSE_CODE, &status)
        return .success(HTTPResponse(status: status, headerLines: headerLines, body: body))
    }

    /// One header line as curl hands it over (with its CRLF), kept as bytes: `HTTPResponse`
    /// reads them only when asked.
    func header(_ line: UnsafeRawBufferPointer) {
        if line.count >= 5, line[0] == UInt8(ascii: "H"), line[1] == UInt8(ascii: "T"), line[2] == UInt8(ascii: "T"),
           line[3] == UInt8(ascii: "P"), line[4] == UInt8(ascii: "/") {
            headerLines.removeAll(keepingCapacity: true)  // a new status line: an interim answer's headers are not the final ones
            return
        }
        if headerLines.isEmpty { headerLines.reserveCapacity(256) }
        headerLines.append(contentsOf: line)
        // A line curl handed over without its LF still ends here.
        if line.last != 0x0A { headerLines.append(0x0A) }
    }
}

private let receiveBody: @convention(c) (UnsafeMutablePointer<CChar>?, Int, Int, UnsafeMutableRawPointer?) -> Int = {
    data, size, count, context in
    let length = size * count
    guard let context else { return 0 }
    let transfer = Unmanaged<Transfer>.fromOpaque(context).takeUnretainedValue()
    if let data, length > 0 { transfer.body.append(contentsOf: UnsafeRawBufferPointer(start: data, count: length)) }
    return length
}

private let receiveHeader: @convention(c) (UnsafeMutablePointer<CChar>?, Int, Int, UnsafeMutableRawPointer?) -> Int = {
    data, size, count, context in
    let length = size * count
    guard let context else { return 0 }
    let transfer = Unmanaged<Transfer>.fromOpaque(context).takeUnretainedValue()
    if let data, length > 0 { transfer.header(UnsafeRawBufferPointer(start: data, count: length)) }
    return length
}

/// The sockets of a client's connections; touched only by the thread that drives the client.
private final class SocketRegistry {
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
private let socketOpened: @convention(c) (UnsafeMutableRawPointer?, curl_socket_t, curlsocktype) -> Int32 = {
    context, socket, purpose in
    if let context, purpose == CURLSOCKTYPE_IPCXN {
        Unmanaged<SocketRegistry>.fromOpaque(context).takeUnretainedValue().open.append(socket)
    }
    return Int32(CURL_SOCKOPT_OK)
}

/// curl is done with a socket: forget it, and close it (the callback's duty).
private let socketClosing: @convention(c) (UnsafeMutableRawPointer?, curl_socket_t) -> Int32 = {
    context, socket in
    if let context {
        let registry = Unmanaged<SocketRegistry>.fromOpaque(context).takeUnretainedValue()
        registry.open.removeAll { $0 == socket }
        registry.closed &+= 1
    }
    return close(socket)
}
