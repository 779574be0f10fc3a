import CHTTPParser
import Glibc

/// One connection's HTTP/1.1 side: http_parser tokenises, this class assembles requests, calls
/// the handler, and writes responses in request order (pipelined requests may finish out of
/// order when some are delayed; their answers wait for the ones before them).
final class HTTP1Session {
    unowned let connection: Connection
    private let parser: UnsafeMutablePointer<http_parser>
    private let maxBody: Int

    private var url: [UInt8] = []
    private var fieldName: [UInt8] = []
    private var fieldValue: [UInt8] = []
    private var inValue = false
    private var headers: [HTTPHeader] = []
    private var body: [UInt8] = []
    private var bodyTooLarge = false
    private var expectsContinue = false

    private var nextSequence: UInt64 = 0
    private var nextToWrite: UInt64 = 0
    private var waiting: [UInt64: [UInt8]] = [:]
    private var closeAfterSequence: UInt64? = nil
    private var stopped = false
    /// When the request being read began (its first byte), or 0 between requests: the loop ends a
    /// request that takes longer than `requestTimeoutSeconds` to arrive whole.
    private(set) var requestStartedAt: UInt64 = 0

    nonisolated(unsafe) private static let settings: UnsafeMutablePointer<http_parser_settings> = makeSettings()

    init(connection: Connection) {
        self.connection = connection
        self.maxBody = connection.loop.configuration.maxBodyBytes
        parser = UnsafeMutablePointer<http_parser>.allocate(capacity: 1)
        http_parser_init(parser, HTTP_REQUEST)
        parser.pointee.data = Unmanaged.passUnretained(self).toOpaque()
    }

    deinit { parser.deallocate() }

    var hasPendingResponses: Bool { nextToWrite < nextSequence }

    func teardown() {
        stopped = true
        waiting.removeAll()
    }

    /// The request being read took too long to arrive whole (a body that never comes): answer
    /// 408 and close once it is written.
    func timeOut() {
        guard !stopped else { return }
        requestStartedAt = 0
        fail(status: 408, reason: "the request did not arrive whole within \(connection.loop.configuration.requestTimeoutSeconds) s\n")
    }

    func receive(_ bytes: UnsafeRawBufferPointer) {
        guard !stopped, let base = bytes.baseAddress else { return }
        var offset = 0
        while offset < bytes.count && !stopped {
            let chunk = base.assumingMemoryBound(to: CChar.self) + offset
            let parsed = http_parser_execute(parser, HTTP1Session.settings, chunk, bytes.count - offset)
            offset += parsed
            let error = herald_http_errno(parser)
            if error == HPE_PAUSED.rawValue {
                // Paused after a request that closes the connection: ignore what follows it.
                stopped = true
                return
            }
            if error != HPE_OK.rawValue {
                let reason = String(cString: http_errno_description(http_errno(rawValue: error)))
                fail(status: 400, reason: "malformed HTTP/1.1 request: \(reason)\n")
                return
            }
            if herald_http_upgrade(parser) != 0 {
                // We do not switch protocols (no h2c upgrade; use prior knowledge); the request was
                // answered as HTTP/1.1, so read whatever follows as a fresh HTTP/1.1 request.
                http_parser_init(parser, HTTP_REQUEST)
                parser.pointee.data = Unmanaged.passUnretained(self).toOpaque()
                continue
            }
            if parsed == 0 { break }
        }
    }

    private func fail(status: Int, reason: String) {
        stopped = true
        requestStartedAt = 0
        let sequence = nextSequence
        nextSequence += 1
        closeAfterSequence = sequence
        complete(sequence: sequence, with: HTTPServerResponse(status: status, body: Array(reason.utf8)))
    }

    // MARK: parser events

    fileprivate func messageBegin() {
        url.removeAll(keepingCapacity: true)
        fieldName.removeAll(keepingCapacity: true)
        fieldValue.removeAll(keepingCapacity: true)
        inValue = false
        headers = []
        headers.reserveCapacity(8)
        body = []
        bodyTooLarge = false
        expectsContinue = false
        requestStartedAt = monotonicNanoseconds()
    }

    fileprivate func urlBytes(_ bytes: UnsafeRawBufferPointer) { url.append(contentsOf: bytes) }

    fileprivate func headerField(_ bytes: UnsafeRawBufferPointer) {
        if inValue { finishHeader() }
        fieldName.append(contentsOf: bytes)
    }

    fileprivate func headerValue(_ bytes: UnsafeRawBufferPointer) {
        inValue = true
        fieldValue.append(contentsOf: bytes)
    }

    private func finishHeader() {
        for i in fieldName.indices where fieldName[i] >= UInt8(ascii: "A") && fieldName[i] <= UInt8(ascii: "Z") {
            fieldName[i] += 32
        }
        headers.append(HTTPHeader(name: String(decoding: fieldName, as: UTF8.self), value: String(decoding: fieldValue, as: UTF8.self)))
        fieldName.removeAll(keepingCapacity: true)
        fieldValue.removeAll(keepingCapacity: true)
        inValue = false
    }

    /// Returns true when parsing must pause: the request declared a body over the limit and was
    /// answered 413 already.
    fileprivate func headersComplete() -> Bool {
        if inValue || !fieldName.isEmpty { finishHeader() }
        // A declared body over the limit is refused now, before the client sends it: one waiting
        // for 100 Continue, or sending slowly, learns at once instead of after 10 MB (or never).
        // The connection closes after the answer, since the body that may follow is not read.
        let declared = herald_http_declared_length(parser)
        if declared > maxBody {
            connection.loop.counters.http1Requests.wrappingAdd(1, ordering: .relaxed)
            fail(status: 413, reason: "request body too large: Content-Length \(declared) is over the limit of \(maxBody) bytes\n")
            return true
        }
        for header in headers where header.name == "expect" && header.value.lowercased() == "100-continue" {
            expectsContinue = true
        }
        // Only when nothing is owed before this request, or the interim answer would jump the queue.
        if expectsContinue && nextToWrite == nextSequence {
            connection.output.append(contentsOf: "HTTP/1.1 100 Continue\r\n\r\n".utf8)
        }
        return false
    }

    fileprivate func bodyBytes(_ bytes: UnsafeRawBufferPointer) {
        if body.count + bytes.count > maxBody {
            bodyTooLarge = true
            return
        }
        body.append(contentsOf: bytes)
    }

    /// Returns true when parsing must pause (the connection closes after this request).
    fileprivate func messageComplete() -> Bool {
        let loop = connection.loop
        loop.counters.http1Requests.wrappingAdd(1, ordering: .relaxed)
        let sequence = nextSequence
        nextSequence += 1
        requestStartedAt = 0
        let keepAlive = http_should_keep_alive(parser) != 0
        if !keepAlive || bodyTooLarge { closeAfterSequence = sequence }
        if bodyTooLarge {
            complete(sequence: sequence, with: HTTPServerResponse(status: 413, body: Array("request body too large\n".utf8)))
            return true
        }
        let method = String(cString: http_method_str(http_method(rawValue: herald_http_method(parser))))
        var path: String
        var query = ""
        if let mark = url.firstIndex(of: UInt8(ascii: "?")) {
            path = String(decoding: url[..<mark], as: UTF8.self)
            query = String(decoding: url[(mark + 1)...], as: UTF8.self)
        } else {
            path = String(decoding: url, as: UTF8.self)
        }
        // An absolute-form target ("http://host/path") names the path after the authority.
        if path.hasPrefix("http://") || path.hasPrefix("https://") {
            let afterScheme = path.utf8.firstIndex(of: UInt8(ascii: "/")).map { path.utf8.index($0, offsetBy: 2) }
            if let afterScheme, let slash = path[afterScheme...].utf8.firstIndex(of: UInt8(ascii: "/")) {
                path = String(path[slash...])
            } else {
                path = "/"
            }
        }
        let request = HTTPServerRequest(method: method, path: path, query: query, headers: headers, body: body,
                                        version: .http1_1, isSecure: connection.isSecure, remoteAddress: connection.peerAddress)
        headers = []
        body = []
        let response = loop.handler(request)
        if response.delayMilliseconds > 0 {
            loop.schedule(response, for: connection.serial, target: .sequence(sequence))
        } else {
            complete(sequence: sequence, with: response, isHead: method == "HEAD")
        }
        return !keepAlive
    }

    // MARK: responses

    /// Records the answer to request `sequence` and writes every answer now in order.
    func complete(sequence: UInt64, with response: HTTPServerResponse, isHead: Bool = false) {
        let closing = closeAfterSequence == sequence
        var bytes: [UInt8] = []
        bytes.reserveCapacity(128 + response.body.count)
        bytes.append(contentsOf: "HTTP/1.1 ".utf8)
        bytes.append(contentsOf: String(response.status).utf8)
        bytes.append(0x20)
        bytes.append(contentsOf: HTTP1Session.reasonPhrase(response.status).utf8)
        bytes.append(contentsOf: "\r\ncontent-length: ".utf8)
        bytes.append(contentsOf: String(response.body.count).utf8)
        bytes.append(contentsOf: "\r\n".utf8)
        for header in response.headers where header.name != "content-length" && header.name != "connection" {
            bytes.append(contentsOf: header.name.utf8)
            bytes.append(contentsOf: ": ".utf8)
            bytes.append(contentsOf: header.value.utf8)
            bytes.append(contentsOf: "\r\n".utf8)
        }
        if closing { bytes.append(contentsOf: "connection: close\r\n".utf8) }
        bytes.append(contentsOf: "\r\n".utf8)
        if !isHead { bytes.append(contentsOf: response.body) }

        if sequence == nextToWrite {
            connection.output.append(contentsOf: bytes)
            nextToWrite += 1
            if closing { connection.closeAfterFlush = true }
            while let next = waiting.removeValue(forKey: nextToWrite) {
                connection.output.append(contentsOf: next)
                if closeAfterSequence == nextToWrite { connection.closeAfterFlush = true }
                nextToWrite += 1
            }
        } else {
            waiting[sequence] = bytes
        }
    }

    static func reasonPhrase(_ status: Int) -> String {
        switch status {
        case 100: return "Continue"
        case 200: return "OK"
        case 201: return "Created"
        case 204: return "No Content"
        case 400: return "Bad Request"
        case 401: return "Unauthorized"
        case 403: return "Forbidden"
        case 404: return "Not Found"
        case 405: return "Method Not Allowed"
        case 408: return "Request Timeout"
        case 413: return "Payload Too Large"
        case 421: return "Misdirected Request"
        case 429: return "Too Many Requests"
        case 500: return "Internal Server Error"
        case 502: return "Bad Gateway"
        case 503: return "Service Unavailable"
        case 504: return "Gateway Timeout"
        default: return "Status"
        }
    }

    // MARK: the C callback table

    private static func makeSettings() -> UnsafeMutablePointer<http_parser_settings> {
        let settings = UnsafeMutablePointer<http_parser_settings>.allocate(capacity: 1)
        http_parser_settings_init(settings)
        settings.pointee.on_message_begin = { parser in
            session(parser).messageBegin()
            return 0
        }
        settings.pointee.on_url = { parser, at, length in
            session(parser).urlBytes(UnsafeRawBufferPointer(start: at, count: length))
            return 0
        }
        settings.pointee.on_header_field = { parser, at, length in
            session(parser).headerField(UnsafeRawBufferPointer(start: at, count: length))
            return 0
        }
        settings.pointee.on_header_value = { parser, at, length in
            session(parser).headerValue(UnsafeRawBufferPointer(start: at, count: length))
            return 0
        }
        settings.pointee.on_headers_complete = { parser in
            if session(parser).headersComplete() { http_parser_pause(parser, 1) }
            return 0
        }
        settings.pointee.on_body = { parser, at, length in
            session(parser).bodyBytes(UnsafeRawBufferPointer(start: at, count: length))
            return 0
        }
        settings.pointee.on_message_complete = { parser in
            if session(parser).messageComplete() { http_parser_pause(parser, 1) }
            return 0
        }
        return settings
    }

}

private func session(_ parser: UnsafeMutablePointer<http_parser>?) -> HTTP1Session {
    Unmanaged<HTTP1Session>.fromOpaque(parser!.pointee.data).takeUnretainedValue()
}
