import CNGHTTP2
import Glibc

/// The state of one HTTP/2 request stream.
final class HTTP2Stream {
    var method = ""
    var path = ""
    var headers: [HTTPHeader] = []
    var body: [UInt8] = []
    var bodyTooLarge = false
    /// Content-Length said more than the server accepts: answered 413 when the headers end.
    var declaredTooLarge = false
    var responded = false
    /// Its response was submitted (`responded` is also set for one scheduled to go later).
    var answered = false
    /// When its headers began: a request still incomplete `requestTimeoutSeconds` later ends the connection.
    let began = monotonicNanoseconds()
    var responseBody: [UInt8] = []
    var responseOffset = 0

    init() { headers.reserveCapacity(8) }
}

/// One connection's HTTP/2 side: nghttp2 parses and frames, this class keeps the streams and
/// calls the handler when a request is complete. Bytes go in through `receive`, come out through
/// `pumpOutput` into the connection's output buffer (nghttp2's memory-based API, so the event
/// loop, not nghttp2, owns the socket).
final class HTTP2Session {
    unowned let connection: Connection
    private var session: OpaquePointer?
    private var streams: [Int32: HTTP2Stream] = [:]
    private let maxBody: Int
    /// Requests handed to the handler on this connection, and streams begun (for `refuseEveryStream`).
    private var requestsServed = 0
    private var streamsBegun = 0
    private let openedAt = monotonicNanoseconds()
    /// The last-stream-id of the GOAWAY this side sent (nil: none yet). nghttp2 sends it only at
    /// the next write, and hands over streams the client opened meanwhile: those above it are
    /// dropped here, never processed, so what the GOAWAY says stays true.
    private var goawayLastStream: Int32?

    /// nghttp2 copies the callback table into each session, so one table serves them all.
    nonisolated(unsafe) private static let callbacks: OpaquePointer = makeCallbacks()
    nonisolated(unsafe) private static let options: OpaquePointer = makeOptions()

    init?(connection: Connection) {
        self.connection = connection
        self.maxBody = connection.loop.configuration.maxBodyBytes
        var created: OpaquePointer? = nil
        let rc = nghttp2_session_server_new2(&created, HTTP2Session.callbacks, Unmanaged.passUnretained(self).toOpaque(),
                                             HTTP2Session.options)
        guard rc == 0, let created else { return nil }
        session = created
    }

    /// Sends our SETTINGS: many concurrent streams and large windows, so we never throttle a client.
    func start() {
        guard let session else { return }
        let streamsLimit = UInt32(clamping: connection.loop.configuration.maxConcurrentStreams)
        var settings = [
            nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS.rawValue), value: streamsLimit),
            nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE.rawValue), value: 1 << 20),
        ]
        nghttp2_submit_settings(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), &settings, settings.count)
        nghttp2_session_set_local_window_size(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), 0, 16 << 20)
        pumpOutput()
    }

    /// Whether a stream still waits for its answer (a delayed one, or a request still arriving).
    /// A stream answered early (413) that the client keeps open does not count, so an idle
    /// connection holding only such streams is still closed.
    var owesResponses: Bool { streams.values.contains { !$0.answered } }

    /// When the oldest request still arriving (not answered yet, body incomplete) began, or 0.
    var oldestIncompleteRequest: UInt64 {
        var oldest: UInt64 = 0
        for stream in streams.values where !stream.responded && (oldest == 0 || stream.began < oldest) { oldest = stream.began }
        return oldest
    }

    /// A request took too long to arrive whole: end the session (GOAWAY) and close once it is written.
    func timeOut() {
        guard let session else { return }
        nghttp2_session_terminate_session(session, UInt32(NGHTTP2_NO_ERROR.rawValue))
        pumpOutput()
        connection.closeAfterFlush = true
    }

    var wantsToWrite: Bool {
        guard let session else { return false }
        return nghttp2_session_want_write(session) != 0
    }

    /// True when both sides are done (GOAWAY exchanged or a fatal error): close the socket.
    var isFinished: Bool {
        guard let session else { return true }
        return nghttp2_session_want_read(session) == 0 && nghttp2_session_want_write(session) == 0
    }

    func receive(_ bytes: UnsafeRawBufferPointer) {
        guard session != nil, !bytes.isEmpty else { return }
        var failed = false
        let lastStream = session.map { nghttp2_session_get_last_proc_stream_id($0) } ?? 0
        resets.filter(bytes, isClosed: { id in id <= lastStream && self.streams[id] == nil }) { piece in
            guard !failed, let session = self.session, let base = piece.baseAddress, !piece.isEmpty else { return }
            if nghttp2_session_mem_recv(session, base.assumingMemoryBound(to: UInt8.self), piece.count) < 0 { failed = true }
        }
        if failed {
            // A protocol error: nghttp2 has queued a GOAWAY where it could; send it and close.
            pumpOutput()
            connection.closeAfterFlush = true
            return
        }
        pumpOutput()
    }

    /// Resets of streams this side has closed already, kept from nghttp2 (see `ClosedStreamResets`).
    private var resets = ClosedStreamResets()

    /// Moves nghttp2's pending frames into the connection's output, up to a bounded amount so a
    /// slow reader cannot make the buffer grow without end.
    func pumpOutput() {
        guard let session else { return }
        while connection.output.count < Connection.outputHighWater {
            var data: UnsafePointer<UInt8>? = nil
            let n = nghttp2_session_mem_send(session, &data)
            if n < 0 {
                connection.closeAfterFlush = true
                return
            }
            guard n > 0, let data else { return }
            connection.output.append(contentsOf: UnsafeBufferPointer(start: data, count: n))
        }
    }

    func teardown() {
        for _ in streams.values { connection.loop.counters.streamClosed() }
        streams.removeAll()
        if let session { nghttp2_session_del(session) }
        session = nil
    }

    // MARK: requests and responses

    fileprivate func beginStream(_ id: Int32) {
        let configuration = connection.loop.configuration
        if let last = goawayLastStream, id > last {
            connection.loop.counters.unprocessedStreams.wrappingAdd(1, ordering: .relaxed)
            return
        }
        streamsBegun += 1
        if configuration.refuseEveryStream > 0, streamsBegun % configuration.refuseEveryStream == 0, let session {
            // Refused before anything of it reaches the handler: the client may send it again.
            nghttp2_submit_rst_stream(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), id, NGHTTP2_REFUSED_STREAM.rawValue)
            return
        }
        streams[id] = HTTP2Stream()
        connection.loop.counters.streamOpened(perConnection: streams.count)
    }

    fileprivate func header(stream id: Int32, name: UnsafeBufferPointer<UInt8>, value: UnsafeBufferPointer<UInt8>) {
        guard let stream = streams[id] else { return }
        if name.first == UInt8(ascii: ":") {
            if name.count == 7, name[1] == UInt8(ascii: "m") {  // :method
                stream.method = String(decoding: value, as: UTF8.self)
            } else if name.count == 5, name[1] == UInt8(ascii: "p") {  // :path
                stream.path = String(decoding: value, as: UTF8.self)
            } else if name.count == 10, name[1] == UInt8(ascii: "a") {  // :authority, kept as host
                stream.headers.append(HTTPHeader(name: "host", value: String(decoding: value, as: UTF8.self)))
            }
            return
        }
        let header = HTTPHeader(name: String(decoding: name, as: UTF8.self), value: String(decoding: value, as: UTF8.self))
        if header.name == "content-length", let declared = Int(header.value), declared > maxBody { stream.declaredTooLarge = true }
        stream.headers.append(header)
    }

    /// The request's headers ended and a body follows: one declared over the limit is answered
    /// 413 now, before the client sends it; what it sends anyway is dropped.
    fileprivate func headersEnded(stream id: Int32) {
        guard let stream = streams[id], stream.declaredTooLarge, !stream.responded else { return }
        connection.loop.counters.http2Requests.wrappingAdd(1, ordering: .relaxed)
        respond(stream: id, with: HTTPServerResponse(status: 413, body: Array("request body too large: its Content-Length is over the limit of \(maxBody) bytes\n".utf8)))
    }

    fileprivate func data(stream id: Int32, _ bytes: UnsafeBufferPointer<UInt8>) {
        guard let stream = streams[id], !stream.responded else { return }
        if stream.body.count + bytes.count > maxBody {
            stream.bodyTooLarge = true
            return
        }
        stream.body.append(contentsOf: bytes)
    }

    fileprivate func requestComplete(stream id: Int32) {
        guard let stream = streams[id], !stream.responded else { return }
        let loop = connection.loop
        loop.counters.http2Requests.wrappingAdd(1, ordering: .relaxed)
        requestsServed += 1
        if goawayLastStream == nil, goawayDue(loop.configuration) { goAway(lastStream: id) }
        if stream.bodyTooLarge {
            respond(stream: id, with: HTTPServerResponse(status: 413, body: Array("request body too large\n".utf8)))
            return
        }
        var path = stream.path
        var query = ""
        if let mark = path.utf8.firstIndex(of: UInt8(ascii: "?")) {
            query = String(path[path.index(after: mark)...])
            path = String(path[..<mark])
        }
        let request = HTTPServerRequest(method: stream.method, path: path, query: query, headers: stream.headers,
                                        body: stream.body, version: .http2, isSecure: connection.isSecure, remoteAddress: connection.peerAddress)
        stream.body = []
        stream.headers = []
        let response = loop.handler(request)
        if response.delayMilliseconds > 0 {
            stream.responded = true
            loop.schedule(response, for: connection.serial, target: .stream(id))
        } else {
            respond(stream: id, with: response)
        }
    }

    /// Submits the response of a stream still open (a client may have reset it meanwhile).
    func respond(stream id: Int32, with response: HTTPServerResponse) {
        guard let session, let stream = streams[id] else { return }
        stream.responded = true
        stream.answered = true
        stream.responseBody = response.body
        stream.responseOffset = 0

        // One scratch buffer holds every name and value; nghttp2 copies them during submit.
        var scratch = connection.loop.headerScratch
        scratch.removeAll(keepingCapacity: true)
        var spans: [(Int, Int, Int, Int)] = []
        spans.reserveCapacity(response.headers.count + 2)
        func add(_ name: String, _ value: String) {
            let nameStart = scratch.count
            scratch.append(contentsOf: name.utf8)
            let valueStart = scratch.count
            scratch.append(contentsOf: value.utf8)
            spans.append((nameStart, valueStart - nameStart, valueStart, scratch.count - valueStart))
        }
        add(":status", String(response.status))
        add("content-length", String(response.body.count))
        for header in response.headers where header.name != "content-length" { add(header.name, header.value) }
        if scratch.isEmpty { scratch.append(0) }

        scratch.withUnsafeMutableBufferPointer { raw in
            let base = raw.baseAddress!
            var nva = spans.map { span in
                nghttp2_nv(name: base + span.0, value: base + span.2, namelen: span.1, valuelen: span.3,
                           flags: UInt8(NGHTTP2_NV_FLAG_NONE.rawValue))
            }
            if response.body.isEmpty {
                nghttp2_submit_response(session, id, &nva, nva.count, nil)
            } else {
                var provider = nghttp2_data_provider(source: nghttp2_data_source(ptr: nil), read_callback: { session, streamID, buffer, length, flags, _, user in
                    let me = Unmanaged<HTTP2Session>.fromOpaque(user!).takeUnretainedValue()
                    return me.readResponse(stream: streamID, into: buffer!, length: length, flags: flags!)
                })
                nghttp2_submit_response(session, id, &nva, nva.count, &provider)
            }
        }
        connection.loop.headerScratch = scratch
    }

    fileprivate func readResponse(stream id: Int32, into buffer: UnsafeMutablePointer<UInt8>, length: Int,
                                  flags: UnsafeMutablePointer<UInt32>) -> Int {
        guard let stream = streams[id] else {
            flags.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue
            return 0
        }
        let remaining = stream.responseBody.count - stream.responseOffset
        let count = min(remaining, length)
        if count > 0 {
            stream.responseBody.withUnsafeBufferPointer { source in
                buffer.update(from: source.baseAddress! + stream.responseOffset, count: count)
            }
            stream.responseOffset += count
        }
        if stream.responseOffset >= stream.responseBody.count {
            flags.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue
            stream.responseBody = []
        }
        return count
    }

    fileprivate func streamClosed(_ id: Int32) {
        if streams.removeValue(forKey: id) != nil { connection.loop.counters.streamClosed() }
        if goawayLastStream != nil && streams.isEmpty { connection.halfCloseAfterFlush = true }
    }

    // MARK: graceful end

    private func goawayDue(_ configuration: HTTPServer.Configuration) -> Bool {
        if configuration.goawayAfterRequests > 0 && requestsServed >= configuration.goawayAfterRequests { return true }
        if configuration.goawayAfterSeconds > 0 {
            return Double(monotonicNanoseconds() - openedAt) / 1e9 >= configuration.goawayAfterSeconds
        }
        return false
    }

    /// Stops taking streams above `lastStream`: a GOAWAY (NO_ERROR) says so, streams already
    /// begun above it are dropped unprocessed, the ones up to it are answered, and then the
    /// connection is half-closed (see `Connection.halfCloseAfterFlush`).
    private func goAway(lastStream: Int32) {
        guard let session else { return }
        goawayLastStream = lastStream
        nghttp2_submit_goaway(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), lastStream, NGHTTP2_NO_ERROR.rawValue, nil, 0)
        for id in streams.keys where id > lastStream {
            streams.removeValue(forKey: id)
            connection.loop.counters.streamClosed()
            connection.loop.counters.unprocessedStreams.wrappingAdd(1, ordering: .relaxed)
        }
    }

    fileprivate func frameSent(type: UInt8, errorCode: UInt32) {
        let counters = connection.loop.counters
        if type == UInt8(NGHTTP2_GOAWAY.rawValue) {
            counters.goawaysSent.wrappingAdd(1, ordering: .relaxed)
        } else if type == UInt8(NGHTTP2_RST_STREAM.rawValue) && errorCode == NGHTTP2_REFUSED_STREAM.rawValue {
            counters.refusedStreams.wrappingAdd(1, ordering: .relaxed)
        }
    }

    // MARK: the C callback table

    private static func makeOptions() -> OpaquePointer {
        var option: OpaquePointer? = nil
        nghttp2_option_new(&option)
        return option!
    }

    private static func makeCallbacks() -> OpaquePointer {
        var callbacks: OpaquePointer? = nil
        nghttp2_session_callbacks_new(&callbacks)
        nghttp2_session_callbacks_set_on_begin_headers_callback(callbacks) { _, frame, user in
            guard let frame, let user else { return 0 }
            if frame.pointee.hd.type == UInt8(NGHTTP2_HEADERS.rawValue) && frame.pointee.headers.cat == NGHTTP2_HCAT_REQUEST {
                Unmanaged<HTTP2Session>.fromOpaque(user).takeUnretainedValue().beginStream(frame.pointee.hd.stream_id)
            }
            return 0
        }
        nghttp2_session_callbacks_set_on_header_callback(callbacks) { _, frame, name, nameLength, value, valueLength, _, user in
            guard let frame, let user, let name, let value else { return 0 }
            guard frame.pointee.hd.type == UInt8(NGHTTP2_HEADERS.rawValue) else { return 0 }
            Unmanaged<HTTP2Session>.fromOpaque(user).takeUnretainedValue().header(
                stream: frame.pointee.hd.stream_id,
                name: UnsafeBufferPointer(start: name, count: nameLength),
                value: UnsafeBufferPointer(start: value, count: valueLength))
            return 0
        }
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks) { _, _, streamID, data, length, user in
            guard let user, let data else { return 0 }
            Unmanaged<HTTP2Session>.fromOpaque(user).takeUnretainedValue().data(stream: streamID, UnsafeBufferPointer(start: data, count: length))
            return 0
        }
        nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks) { _, frame, user in
            guard let frame, let user else { return 0 }
            let type = UInt32(frame.pointee.hd.type)
            if (type == NGHTTP2_DATA.rawValue || type == NGHTTP2_HEADERS.rawValue)
                && frame.pointee.hd.flags & UInt8(NGHTTP2_FLAG_END_STREAM.rawValue) != 0 {
                Unmanaged<HTTP2Session>.fromOpaque(user).takeUnretainedValue().requestComplete(stream: frame.pointee.hd.stream_id)
            } else if type == NGHTTP2_HEADERS.rawValue && frame.pointee.headers.cat == NGHTTP2_HCAT_REQUEST {
                Unmanaged<HTTP2Session>.fromOpaque(user).takeUnretainedValue().headersEnded(stream: frame.pointee.hd.stream_id)
            }
            return 0
        }
        // Counts GOAWAYs and refused streams, nghttp2's own (a stream beyond the announced limit)
        // as well as ours.
        nghttp2_session_callbacks_set_on_frame_send_callback(callbacks) { _, frame, user in
            guard let frame, let user else { return 0 }
            let type = frame.pointee.hd.type
            guard type == UInt8(NGHTTP2_GOAWAY.rawValue) || type == UInt8(NGHTTP2_RST_STREAM.rawValue) else { return 0 }
            let code = type == UInt8(NGHTTP2_GOAWAY.rawValue) ? frame.pointee.goaway.error_code : frame.pointee.rst_stream.error_code
            Unmanaged<HTTP2Session>.fromOpaque(user).takeUnretainedValue().frameSent(type: type, errorCode: code)
            return 0
        }
        nghttp2_session_callbacks_set_on_stream_close_callback(callbacks) { _, streamID, _, user in
            guard let user else { return 0 }
            Unmanaged<HTTP2Session>.fromOpaque(user).takeUnretainedValue().streamClosed(streamID)
            return 0
        }
        return callbacks!
    }
}


/// Takes the RST_STREAM frames a client sends for streams this side has already answered and
/// closed out of what nghttp2 reads. libcurl 7.88 resets every stream whose answer ended with its
/// HEADERS frame (an answer without a body, as APNs's 200), after the answer; RFC 9113 has such
/// a frame ignored, but nghttp2 (since its rapid-reset limit) counts every RST_STREAM and ends
/// the connection with INTERNAL_ERROR once about a thousand came in a burst: a client sending
/// APNs-like requests lost a connection every thousand requests, and the requests in flight on
/// it were sent twice. A reset of a stream still open goes to nghttp2 as before.
struct ClosedStreamResets {
    /// Bytes of the client's connection preface still to come (passed through unread).
    private var prefaceLeft = 24
    /// A frame header split between reads.
    private var header: [UInt8] = []
    /// Bytes of the current frame's payload still to pass, or to drop.
    private var passLeft = 0
    private var dropLeft = 0

    /// Hands `deliver` the runs of `bytes` nghttp2 is to read, in order.
    mutating func filter(_ bytes: UnsafeRawBufferPointer, isClosed: (Int32) -> Bool, deliver: (UnsafeRawBufferPointer) -> Void) {
        var index = 0
        var runStart = 0
        func flush(upTo end: Int) {
            if end > runStart { deliver(UnsafeRawBufferPointer(rebasing: bytes[runStart..<end])) }
        }
        while index < bytes.count {
            let left = bytes.count - index
            if prefaceLeft > 0 {
                let n = min(prefaceLeft, left)
                prefaceLeft -= n
                index += n
            } else if passLeft > 0 {
                let n = min(passLeft, left)
                passLeft -= n
                index += n
            } else if dropLeft > 0 {
                flush(upTo: index)
                let n = min(dropLeft, left)
                dropLeft -= n
                index += n
                runStart = index
            } else if header.isEmpty && left >= 9 {
                // A whole header in this read: judged in place.
                let frame = UnsafeRawBufferPointer(rebasing: bytes[index..<index + 9])
                if judge(frame, isClosed: isClosed) {
                    flush(upTo: index)
                    index += 9
                    runStart = index
                } else {
                    index += 9
                }
            } else {
                // A header split between reads: gathered, then passed on (or dropped) whole.
                flush(upTo: index)
                let n = min(9 - header.count, left)
                header.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[index..<index + n]))
                index += n
                runStart = index
                if header.count == 9 {
                    let gathered = header
                    header.removeAll(keepingCapacity: true)
                    let dropped = gathered.withUnsafeBytes { judge($0, isClosed: isClosed) }
                    if !dropped { gathered.withUnsafeBytes { deliver($0) } }
                }
            }
        }
        flush(upTo: bytes.count)
    }

    /// Reads a frame header; true when the frame is a reset of a closed stream (its payload is
    /// then dropped), false when it goes to nghttp2 (its payload passed).
    private mutating func judge(_ frame: UnsafeRawBufferPointer, isClosed: (Int32) -> Bool) -> Bool {
        let length = Int(frame[0]) << 16 | Int(frame[1]) << 8 | Int(frame[2])
        let type = frame[3]
        let stream = Int32(bitPattern: (UInt32(frame[5]) << 24 | UInt32(frame[6]) << 16 | UInt32(frame[7]) << 8 | UInt32(frame[8])) & 0x7fff_ffff)
        if type == 3 && length == 4 && stream > 0 && isClosed(stream) {
            dropLeft = 4
            return true
        }
        passLeft = length
        return false
    }
}
