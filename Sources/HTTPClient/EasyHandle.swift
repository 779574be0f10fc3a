import CCurl
import Glibc

// One request on one curl easy handle: the options it is given (only those that differ from
// its last request), what it receives through curl's callbacks, and how its end is told as an
// answer or an `HTTPClientError` kind.

extension HTTPClient {
    /// Adds one transfer to the multi handle; false when it failed at once (reported by the next poll).
    @discardableResult
    func start(_ request: HTTPRequest, tag: UInt64) -> Bool {
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
        if let error = configure(transfer, request, multiplexed: true) {
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

    func recycle(_ easy: EasyHandle) {
        if idle.count < HTTPClient.maxIdleHandles { idle.append(easy) }
    }

    /// The parsed handle of `url` (one whose path is not plain, see `plainPath`); nil when curl
    /// does not take it (the string then goes to curl as it is, and fails with curl's own error).
    func parsedURL(_ url: String) -> ParsedURL? {
        if let known = parsedURLs[url] { return known }
        guard let parsed = ParsedURL(url) else { return nil }
        if parsedURLs.count >= 16 { parsedURLs.removeAll() }
        parsedURLs[url] = parsed
        return parsed
    }

    /// The variables libcurl reads a proxy from (`NO_PROXY` only matters with one of them).
    static let proxyVariables = ["http_proxy", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"]

    /// Sets the options of `request` on the handle; nil when all were taken. `multiplexed`: a
    /// transfer of the multi handle (else `perform`'s, on a thread of its own).
    ///
    /// A handle keeps its options from one request to the next, so only what differs from its
    /// last request is set: for the sender's sends, the body and the transfer it reports to.
    /// Setting every option again (after `curl_easy_reset`) made libcurl free and copy the URL
    /// and headers and parse the URL for every message. A handle whose last configuration
    /// failed, or whose method changes, starts again from a reset.
    func configure(_ transfer: Transfer, _ request: HTTPRequest, multiplexed: Bool) -> HTTPClientError? {
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
            easy.headerHead = nil
            check(herald_easy_setopt_ptr(h, CURLOPT_ERRORBUFFER, easy.errorBuffer), "CURLOPT_ERRORBUFFER")
            set(CURLOPT_NOSIGNAL, 1, "CURLOPT_NOSIGNAL")
            set(CURLOPT_CONNECTTIMEOUT_MS, configuration.connectTimeoutMilliseconds, "CURLOPT_CONNECTTIMEOUT_MS")
            set(CURLOPT_TIMEOUT_MS, configuration.requestTimeoutMilliseconds, "CURLOPT_TIMEOUT_MS")
            set(CURLOPT_TCP_KEEPALIVE, 1, "CURLOPT_TCP_KEEPALIVE")
            set(CURLOPT_MAXLIFETIME_CONN, max(0, configuration.maxConnectionAgeSeconds), "CURLOPT_MAXLIFETIME_CONN")
            // HTTP/2 over TLS by ALPN (h2, else HTTP/1.1 if the server offers only that); HTTP/1.1
            // for http://, without an Upgrade (see the top of HTTPClient.swift).
            set(CURLOPT_HTTP_VERSION, Int(CURL_HTTP_VERSION_2TLS), "CURLOPT_HTTP_VERSION")
            // A transfer of the multi handle may wait for a connection still opening, to
            // multiplex on it, rather than open one of its own; `perform` sends one at a time.
            set(CURLOPT_PIPEWAIT, multiplexed ? 1 : 0, "CURLOPT_PIPEWAIT")
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
            if multiplexed, let (origin, path) = plainPath(request.url) {
                // A URL with a plain path on an origin parsed once (APNs: the device token is in
                // the path, so every request has a URL of its own): the handle's own copy of the
                // origin's parsed URL takes the path. Parsing each such URL whole, and keeping a
                // parsed handle per URL, cost a parse, an allocation and a look-up per request.
                if easy.ownURLOrigin !== origin {
                    if let own = easy.ownURL { curl_url_cleanup(own) }
                    easy.ownURL = curl_url_dup(origin.handle)
                    easy.ownURLOrigin = origin
                }
                if let own = easy.ownURL, setPath(own, request.url.utf8[path...]) {
                    check(herald_easy_setopt_ptr(h, CURLOPT_URL, nil), "CURLOPT_URL")
                    check(herald_easy_setopt_ptr(h, CURLOPT_CURLU, UnsafeRawPointer(own)), "CURLOPT_CURLU")
                    easy.parsedURL = nil
                } else {
                    check(herald_easy_setopt_ptr(h, CURLOPT_CURLU, nil), "CURLOPT_CURLU")
                    easy.parsedURL = nil
                    set(CURLOPT_URL, request.url, "CURLOPT_URL")
                }
            } else if multiplexed, let parsed = parsedURL(request.url) {
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
        // A busy connection replaced before it grows old (`HTTPClient.connectionGenerationOdd`).
        let sslOptions = multiplexed && connectionGenerationOdd(request.url) ? Int(CURLSSLOPT_NO_REVOKE) : 0
        if (previous?.sslOptions ?? 0) != sslOptions { set(CURLOPT_SSL_OPTIONS, sslOptions, "CURLOPT_SSL_OPTIONS") }

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
        var head = list.list
        if !request.varyingHeaders.isEmpty {
            // The request's own lines in the handle's memory, linked in front of the shared list
            // (curl reads the list while the transfer runs, and the handle runs one at a time).
            head = easy.ownLines.link(request.varyingHeaders, before: list.list)
        }
        easy.headerList = list  // kept alive while curl may read it
        if easy.headerHead != head {
            check(herald_easy_setopt_ptr(h, CURLOPT_HTTPHEADER, head), "CURLOPT_HTTPHEADER")
            easy.headerHead = head
        }

        let context = Unmanaged.passUnretained(transfer).toOpaque()
        check(herald_easy_setopt_ptr(h, CURLOPT_WRITEDATA, context), "CURLOPT_WRITEDATA")
        check(herald_easy_setopt_ptr(h, CURLOPT_HEADERDATA, context), "CURLOPT_HEADERDATA")
        easy.settings = failure == nil ? HandleSettings(method: method, url: request.url, sslOptions: sslOptions) : nil
        return failure
    }

    /// The origin's parsed URL and where the path begins, when `url` is `scheme://authority`
    /// followed by a plain path: `/` and letters, digits, `-`, `_` and `~` only, so curl would
    /// take it as it is (no dot segments to remove, no query, no escapes). Nil otherwise.
    func plainPath(_ url: String) -> (ParsedURL, String.UTF8View.Index)? {
        let bytes = url.utf8
        if let last = lastParsedOrigin, let path = HTTPClient.path(of: bytes, after: last.prefix) {
            return HTTPClient.isPlainPath(bytes[path...]) ? (last.parsed, path) : nil
        }
        // `scheme://authority`: up to the first slash after the `//`.
        guard let colon = bytes.firstIndex(of: UInt8(ascii: ":")), bytes[colon...].starts(with: "://".utf8),
              let slash = bytes[bytes.index(colon, offsetBy: 3)...].firstIndex(of: UInt8(ascii: "/")),
              HTTPClient.isPlainPath(bytes[slash...]) else { return nil }
        let prefix = String(url[..<slash])
        guard !prefix.utf8.contains(where: { $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") }) else { return nil }
        let parsed: ParsedURL
        if let known = parsedOrigins[prefix] {
            parsed = known
        } else {
            guard let made = ParsedURL(prefix) else { return nil }
            if parsedOrigins.count >= 16 { parsedOrigins.removeAll() }
            parsedOrigins[prefix] = made
            parsed = made
        }
        lastParsedOrigin = (prefix, parsed)
        return (parsed, slash)
    }

    /// Where the path of `url` begins when `url` starts with `prefix` and a slash follows it.
    static func path(of url: String.UTF8View, after prefix: String) -> String.UTF8View.Index? {
        var index = url.startIndex
        for byte in prefix.utf8 {
            guard index != url.endIndex, url[index] == byte else { return nil }
            index = url.index(after: index)
        }
        guard index != url.endIndex, url[index] == UInt8(ascii: "/") else { return nil }
        return index
    }

    static func isPlainPath(_ path: Substring.UTF8View) -> Bool {
        path.allSatisfy {
            ($0 >= 0x61 && $0 <= 0x7A) || ($0 >= 0x41 && $0 <= 0x5A) || ($0 >= 0x30 && $0 <= 0x39)
                || $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: "_") || $0 == UInt8(ascii: "~")
        }
    }

    /// Sets the path of a parsed URL (no escaping: the path is plain).
    func setPath(_ url: OpaquePointer, _ path: Substring.UTF8View) -> Bool {
        withUnsafeTemporaryAllocation(of: CChar.self, capacity: path.count + 1) { buffer in
            var end = 0
            for byte in path {
                buffer[end] = CChar(bitPattern: byte)
                end += 1
            }
            buffer[end] = 0
            return curl_url_set(url, CURLUPART_PATH, buffer.baseAddress, 0) == CURLUE_OK
        }
    }

    static func text(_ code: CURLcode) -> String { String(cString: curl_easy_strerror(code)) }

    static func kind(_ code: CURLcode, message: String) -> HTTPClientError.Kind {
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

/// A request method as the handle's options express it.
enum Method: Equatable {
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

/// The options a handle was last configured with (those set once after a reset are the same
/// for every request of a handle: a handle serves the multi loop or `perform`, never both).
struct HandleSettings {
    var method: Method
    var url: String
    /// `CURLOPT_SSL_OPTIONS` set (0 after a reset).
    var sslOptions: Int
}

/// A curl header list and the lines it was made from; freed when no handle holds it.
final class HeaderList {
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
struct HandleKey: Hashable {
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
final class ParsedURL {
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
final class EasyHandle {
    let handle: UnsafeMutableRawPointer
    let errorBuffer: UnsafeMutablePointer<CChar>
    var settings: HandleSettings?
    var headerList: HeaderList?
    /// The header list curl was last given: `headerList`'s, or `ownLines` linked in front of it.
    var headerHead: UnsafeMutablePointer<curl_slist>?
    /// The lines of the handle's request alone (`HTTPRequest.varyingHeaders`).
    let ownLines = LinkedLines()
    /// A copy of an origin's parsed URL whose path the handle sets per request (`plainPath`),
    /// and the origin it was copied from.
    var ownURL: OpaquePointer?
    var ownURLOrigin: ParsedURL?
    /// `SocketRegistry.closed` when the handle's last multiplexed transfer started (nil: none yet).
    var closesSeen: UInt64?
    var parsedURL: ParsedURL?
    var body: UnsafeMutableRawPointer
    var bodyCapacity: Int

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
        if let ownURL { curl_url_cleanup(ownURL) }
        errorBuffer.deallocate()
        body.deallocate()
    }
}

/// Header lines in a curl list of memory of its own, linked in front of another list: the
/// nodes and the text are kept and overwritten request after request, so a request's own lines
/// cost no allocation (curl only reads a list it is given; it frees none).
final class LinkedLines {
    private var nodes: UnsafeMutablePointer<curl_slist>
    private var nodeCapacity = 4
    private var text: UnsafeMutablePointer<CChar>
    private var textCapacity = 256

    init() {
        nodes = .allocate(capacity: nodeCapacity)
        text = .allocate(capacity: textCapacity)
    }

    /// `lines` (not empty) as a list whose last node leads on to `tail`; valid until the next call.
    func link(_ lines: [String], before tail: UnsafeMutablePointer<curl_slist>?) -> UnsafeMutablePointer<curl_slist> {
        if lines.count > nodeCapacity {
            nodes.deallocate()
            nodeCapacity = max(lines.count, nodeCapacity * 2)
            nodes = .allocate(capacity: nodeCapacity)
        }
        var bytes = 0
        for line in lines { bytes += line.utf8.count + 1 }
        if bytes > textCapacity {
            text.deallocate()
            textCapacity = max(bytes, textCapacity * 2)
            text = .allocate(capacity: textCapacity)
        }
        var offset = 0
        for (index, line) in lines.enumerated() {
            let start = text + offset
            for byte in line.utf8 {
                text[offset] = CChar(bitPattern: byte)
                offset += 1
            }
            text[offset] = 0
            offset += 1
            nodes[index] = curl_slist(data: start, next: index + 1 < lines.count ? nodes + index + 1 : tail)
        }
        return nodes
    }

    deinit {
        nodes.deallocate()
        text.deallocate()
    }
}

/// What one request has received so far; curl's callbacks reach it through an unretained
/// pointer while the client (or `perform`) holds it.
final class Transfer {
    let tag: UInt64
    let easy: EasyHandle
    /// The header lines of the answer so far, as curl handed them over.
    var headerLines: [UInt8] = []
    /// Some line of an answer (even an interim one) came.
    var answerBegun = false
    var body: [UInt8] = []

    init(tag: UInt64, easy: EasyHandle) {
        self.tag = tag
        self.easy = easy
    }

    func result(_ code: CURLcode) -> Result<HTTPResponse, HTTPClientError> {
        guard code == CURLE_OK else {
            let detail = String(cString: easy.errorBuffer)
            let message = detail.isEmpty ? HTTPClient.text(code) : detail
            if code == CURLE_HTTP2 && detail.isEmpty && !answerBegun {
                // libcurl 7.88 ends a stream this way, with no words of its own, only when the
                // connection's HTTP/2 session is over (the server's GOAWAY came and no stream is
                // left to read) and this stream was closed with an error code before any answer
                // header: the streams a GOAWAY's last-stream-id left out are closed as refused,
                // and 7.88 reports the session's end before the refusal it would retry (8.x sends
                // them again itself). Such a request was not processed: it goes again without an
                // attempt. The worker still counts a run of nothing but these as an outage
                // (SenderMachine), so a server that never processes anything is not fed forever.
                return .failure(HTTPClientError(kind: .unprocessed, message: message + " (no answer; the server ended the connection's HTTP/2 session)"))
            }
            return .failure(HTTPClientError(kind: HTTPClient.kind(code, message: message), message: message))
        }
        var status = 0
        _ = herald_easy_getinfo_long(easy.handle, CURLINFO_RESPONSE_CODE, &status)
        return .success(HTTPResponse(status: status, headerLines: headerLines, body: body))
    }

    /// One header line as curl hands it over (with its CRLF), kept as bytes: `HTTPResponse`
    /// reads them only when asked.
    func header(_ line: UnsafeRawBufferPointer) {
        answerBegun = true
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

let receiveBody: @convention(c) (UnsafeMutablePointer<CChar>?, Int, Int, UnsafeMutableRawPointer?) -> Int = {
    data, size, count, context in
    let length = size * count
    guard let context else { return 0 }
    let transfer = Unmanaged<Transfer>.fromOpaque(context).takeUnretainedValue()
    if let data, length > 0 { transfer.body.append(contentsOf: UnsafeRawBufferPointer(start: data, count: length)) }
    return length
}

let receiveHeader: @convention(c) (UnsafeMutablePointer<CChar>?, Int, Int, UnsafeMutableRawPointer?) -> Int = {
    data, size, count, context in
    let length = size * count
    guard let context else { return 0 }
    let transfer = Unmanaged<Transfer>.fromOpaque(context).takeUnretainedValue()
    if let data, length > 0 { transfer.header(UnsafeRawBufferPointer(start: data, count: length)) }
    return length
}
