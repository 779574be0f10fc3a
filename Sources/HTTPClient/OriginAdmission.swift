import CCurl
import Glibc

// libcurl 7.88.1 (Debian 12) breaks a prior-knowledge (h2c) transfer that reuses an existing
// connection: it stacks a second HTTP/2 layer onto it and fails with "Error in the HTTP2 framing
// layer" (curl issue 10634, fixed after 7.88.1). A transfer asking for plain HTTP/2
// (CURL_HTTP_VERSION_2_0) reuses an h2c connection fine, but opens a new one as HTTP/1.1 with an
// Upgrade the emulator does not take. So for cleartext origins the client decides itself: a
// request that needs a new connection goes out with prior knowledge on a fresh connection (an
// "opener"); the rest go as HTTP/2 streams, at most `maxStreamsPerConnection` per connection
// known to be open, and wait in `Origin.pending` otherwise.

extension HTTPClient {
    func origin(of url: String) -> Origin? {
        if let last = lastURL, last.url == url { return last.origin }
        if let known = lastURL?.origin, HTTPClient.path(of: url.utf8, after: known.key) != nil {
            // Another URL on the last one's origin (an APNs sender's: one URL per device): its
            // bytes begin with the origin's key and a slash, so its key is that one, found
            // without building it.
            lastURL = (url, known)
            return known
        }
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
    func admit(_ origin: Origin) {
        let streams = max(1, configuration.maxStreamsPerConnection)
        while origin.head < origin.pending.count && origin.streams < origin.connections * streams {
            let next = origin.pending[origin.head]
            origin.head += 1
            if start(next.request, tag: next.tag, role: .stream(origin), submitted: next.submitted) { origin.streams += 1 }
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

    /// Updates what is known of a cleartext origin's connections after one of its transfers.
    func settle(_ transfer: Transfer, _ result: Result<HTTPResponse, HTTPClientError>, into finished: inout [HTTPCompletion]) {
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

    /// A stream curl found no open connection for (`socketOpening` refused it a new one): one of
    /// the connections counted is gone or going (a GOAWAY), so one fewer is counted, at most once
    /// per pass (several streams of one lost connection come back together; a count still too
    /// high is lowered by the next pass's refusals). The request goes back to the front of the
    /// queue with its first submission time, so the request timeout still bounds its wait.
    func requeue(_ transfer: Transfer, origin: Origin) {
        origin.streams -= 1
        if !origin.lostCounted {
            origin.lostCounted = true
            origin.connections = max(0, origin.connections - 1)
        }
        if let request = transfer.request {
            let again = Pending(request: request, tag: transfer.tag, submitted: transfer.submitted)
            if origin.head > 0 {
                origin.head -= 1
                origin.pending[origin.head] = again
            } else {
                origin.pending.insert(again, at: 0)
            }
        }
        touch(origin)
    }

    func touch(_ origin: Origin) {
        if !origin.touched {
            origin.touched = true
            touched.append(origin)
        }
    }

    /// Fails cleartext requests that waited in the queue for longer than the request timeout.
    func expireQueued(into finished: inout [HTTPCompletion]) {
        let now = HTTPClient.monotonicMilliseconds()
        let limit = UInt64(max(0, configuration.requestTimeoutMilliseconds))
        for (key, origin) in origins {
            guard origin.head < origin.pending.count,
                  now - origin.pending[origin.head].submitted >= limit else { continue }
            while origin.head < origin.pending.count && now - origin.pending[origin.head].submitted >= limit {
                let queued = origin.pending[origin.head]
                origin.head += 1
                finished.append(HTTPCompletion(tag: queued.tag, result: .failure(HTTPClientError(
                    kind: .notSent, message: "no HTTP/2 stream to \(key) became free within \(limit) ms"))))
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
}

/// What a transfer is for the cleartext bookkeeping.
enum Role {
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

struct Pending {
    var request: HTTPRequest
    var tag: UInt64
    var submitted: UInt64
}

/// One cleartext origin: connections believed open, openers and streams in flight, and the
/// requests waiting for a stream (`pending[head...]`).
final class Origin {
    /// `http://host:port`
    let key: String
    var connections = 0
    var openers = 0
    var streams = 0
    var pending: [Pending] = []
    var head = 0
    /// Listed in the client's `touched`.
    var touched = false
    /// A lost connection was counted in this pass (`requeue`).
    var lostCounted = false

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
