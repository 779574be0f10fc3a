import CEpoll
import Glibc

/// The protocol a connection speaks once it is known.
enum ProtocolEngine {
    /// Cleartext, too few bytes yet to tell the HTTP/2 preface from an HTTP/1.1 request line.
    case detecting
    case http1(HTTP1Session)
    case http2(HTTP2Session)
}

/// One accepted socket: its transport (plain or TLS), its output buffer, and the protocol engine
/// reading from it. Owned and touched by its event loop's thread only.
final class Connection {
    let fd: Int32
    let serial: UInt64
    unowned let loop: EventLoop
    var tls: TLSSession?
    private var handshaking: Bool
    var engine: ProtocolEngine = .detecting
    /// Bytes read before the protocol was known.
    private var sniffed: [UInt8] = []
    /// Bytes waiting to be written, from `outputStart` on.
    var output: [UInt8] = []
    private var outputStart = 0
    private var registeredEvents: UInt32 = EPOLLIN.rawValue
    private var readingPaused = false
    /// Close once the output is written (HTTP/1.1 `Connection: close`, protocol errors).
    var closeAfterFlush = false
    /// Half-close once the output is written (after an HTTP/2 GOAWAY has been answered): a FIN
    /// after the last answer, then reading on until the client closes. A full close with the
    /// client's later requests unread would send a reset, which may destroy answers it has not
    /// read yet.
    var halfCloseAfterFlush = false
    private var halfClosed = false
    private(set) var isClosed = false
    var lastActivity: UInt64
    /// Set by the loop while collecting connections to flush after timers fired.
    var flushScheduled = false

    /// Stop reading while this much output waits for a slow reader.
    static let outputHighWater = 4 << 20

    static let http2Preface: [UInt8] = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)

    init(fd: Int32, serial: UInt64, loop: EventLoop, tls: TLSSession?) {
        self.fd = fd
        self.serial = serial
        self.loop = loop
        self.tls = tls
        self.handshaking = tls != nil
        self.lastActivity = monotonicNanoseconds()
        output.reserveCapacity(16 * 1024)
    }

    var isSecure: Bool { tls != nil }

    /// The client's address, read once, when the first request on the connection is handed out.
    lazy var peerAddress: String = Listener.peerAddress(fd)

    /// True while a response is still owed (a delayed one), so idle sweeping leaves it alone.
    var hasPendingWork: Bool {
        switch engine {
        case .detecting: return false
        case .http1(let session): return session.hasPendingResponses
        case .http2(let session): return session.owesResponses
        }
    }

    /// When the oldest request still arriving on this connection began, or 0 when none is.
    var incompleteRequestSince: UInt64 {
        switch engine {
        case .detecting: return 0
        case .http1(let session): return session.requestStartedAt
        case .http2(let session): return session.oldestIncompleteRequest
        }
    }

    /// Ends a request that took longer than `requestTimeoutSeconds` to arrive whole.
    func timeOutRequest() {
        switch engine {
        case .detecting: close(); return
        case .http1(let session): session.timeOut()
        case .http2(let session): session.timeOut()
        }
        flush()
    }

    // MARK: events

    func handle(events: UInt32) {
        if events & (EPOLLERR.rawValue | EPOLLHUP.rawValue) != 0 && events & EPOLLIN.rawValue == 0 {
            close()
            return
        }
        lastActivity = monotonicNanoseconds()
        if handshaking {
            continueHandshake()
            return
        }
        if events & EPOLLOUT.rawValue != 0 {
            flush()
            if isClosed { return }
        }
        if events & EPOLLIN.rawValue != 0 && !readingPaused {
            readAvailable()
        }
    }

    private func continueHandshake() {
        guard let tls else { return }
        switch tls.handshake() {
        case .done:
            handshaking = false
            loop.counters.tlsConnections.wrappingAdd(1, ordering: .relaxed)
            if tls.negotiatedProtocol == "h2" {
                startHTTP2(with: [])
            } else {
                startHTTP1(with: [])
            }
            updateInterest(wantWrite: !output.isEmpty)
            // The client's first request may already sit decrypted-ready behind the handshake.
            readAvailable()
        case .wantRead: updateInterest(wantWrite: false)
        case .wantWrite: updateInterest(wantWrite: true)
        case .failed: close()
        }
    }

    private func readAvailable() {
        let buffer = loop.readBuffer
        var rounds = 0
        while !isClosed {
            rounds += 1
            if let tls {
                switch tls.read(buffer.baseAddress!, buffer.count) {
                case .bytes(let n):
                    consume(UnsafeRawBufferPointer(start: buffer.baseAddress, count: n))
                case .wantRead:
                    flush()
                    return
                case .wantWrite:
                    flush()
                    updateInterest(wantWrite: true)
                    return
                case .closed, .failed:
                    flush()
                    close()
                    return
                }
            } else {
                let n = Glibc.read(fd, buffer.baseAddress, buffer.count)
                if n > 0 {
                    consume(UnsafeRawBufferPointer(start: buffer.baseAddress, count: n))
                    // A short read means the socket is drained; level-triggered epoll tells us of more.
                    if n < buffer.count || rounds >= 8 {
                        flush()
                        return
                    }
                } else if n == 0 {
                    flush()
                    close()
                    return
                } else {
                    let code = errno
                    if code == EINTR { continue }
                    if code == EAGAIN || code == EWOULDBLOCK {
                        flush()
                        return
                    }
                    close()
                    return
                }
            }
            if output.count - outputStart >= Connection.outputHighWater {
                flush()
                return
            }
        }
    }

    private func consume(_ bytes: UnsafeRawBufferPointer) {
        switch engine {
        case .http1(let session): session.receive(bytes)
        case .http2(let session): session.receive(bytes)
        case .detecting:
            sniffed.append(contentsOf: bytes)
            let preface = Connection.http2Preface
            let compared = min(sniffed.count, preface.count)
            if sniffed[0..<compared].elementsEqual(preface[0..<compared]) {
                if compared == preface.count { startHTTP2(with: sniffed) }
                // else: a prefix of the preface; wait for more bytes.
            } else {
                startHTTP1(with: sniffed)
            }
        }
    }

    private func startHTTP2(with bytes: [UInt8]) {
        sniffed = []
        guard let session = HTTP2Session(connection: self) else {
            close()
            return
        }
        engine = .http2(session)
        session.start()
        if !bytes.isEmpty { bytes.withUnsafeBytes { session.receive($0) } }
    }

    private func startHTTP1(with bytes: [UInt8]) {
        sniffed = []
        let session = HTTP1Session(connection: self)
        engine = .http1(session)
        if !bytes.isEmpty { bytes.withUnsafeBytes { session.receive($0) } }
    }

    // MARK: delayed responses

    func deliverDelayed(_ response: HTTPServerResponse, to target: ResponseTarget) {
        switch (engine, target) {
        case (.http2(let session), .stream(let stream)): session.respond(stream: stream, with: response)
        case (.http1(let session), .sequence(let sequence)): session.complete(sequence: sequence, with: response)
        default: break
        }
    }

    func afterDelayedDelivery() {
        if case .http2(let session) = engine { session.pumpOutput() }
        flush()
    }

    // MARK: output

    /// Writes as much output as the socket takes; arms EPOLLOUT for the rest.
    func flush() {
        guard !isClosed else { return }
        while true {
            while outputStart < output.count {
                let remaining = output.count - outputStart
                let written: Int = output.withUnsafeBytes { raw in
                    let start = raw.baseAddress! + outputStart
                    if let tls {
                        switch tls.write(start, remaining) {
                        case .bytes(let n): return n
                        case .wantRead, .wantWrite: return 0
                        case .closed, .failed: return -1
                        }
                    }
                    // MSG_NOSIGNAL: a client that hung up is a closed connection, not a SIGPIPE.
                    let n = Glibc.send(fd, start, remaining, Int32(MSG_NOSIGNAL))
                    if n >= 0 { return n }
                    let code = errno
                    return code == EAGAIN || code == EWOULDBLOCK || code == EINTR ? 0 : -1
                }
                if written < 0 {
                    close()
                    return
                }
                if written == 0 {
                    updateInterest(wantWrite: true)
                    return
                }
                outputStart += written
            }
            output.removeAll(keepingCapacity: output.capacity <= 1 << 20)
            outputStart = 0
            // HTTP/2 output is pulled from nghttp2 in bounded slices; pull the next one now.
            if case .http2(let session) = engine, session.wantsToWrite {
                session.pumpOutput()
                if !output.isEmpty { continue }
            }
            break
        }
        updateInterest(wantWrite: false)
        if closeAfterFlush {
            close()
            return
        }
        if halfCloseAfterFlush && !halfClosed {
            halfClosed = true
            if let tls, !handshaking { tls.shutdown() }
            _ = Glibc.shutdown(fd, Int32(SHUT_WR))
        }
        // After a graceful GOAWAY nghttp2 is finished once its streams are, but the client may
        // still be writing requests it sent before it read the GOAWAY: closing now would reset
        // them (a send failure, not an unprocessed stream). The half-close waits for its EOF.
        if case .http2(let session) = engine, session.isFinished, !halfCloseAfterFlush {
            close()
        }
    }

    private func updateInterest(wantWrite: Bool) {
        let backlog = output.count - outputStart
        readingPaused = backlog >= Connection.outputHighWater
        var events: UInt32 = readingPaused ? 0 : EPOLLIN.rawValue
        if wantWrite { events |= EPOLLOUT.rawValue }
        guard events != registeredEvents, !isClosed else { return }
        registeredEvents = events
        loop.modify(fd, tag: serial, events: events)
    }

    func close() {
        guard !isClosed else { return }
        isClosed = true
        switch engine {
        case .http2(let session): session.teardown()
        case .http1(let session): session.teardown()
        case .detecting: break
        }
        engine = .detecting
        if let tls {
            if !handshaking { tls.shutdown() }
            tls.free()
            self.tls = nil
        }
        Glibc.close(fd)
        loop.forget(self)
    }
}
