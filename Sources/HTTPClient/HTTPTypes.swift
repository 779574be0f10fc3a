// The public face of the HTTP client: what a caller builds (a request, the configuration) and
// what comes back (an answer, a completion, an error of one kind). No curl type appears here.

/// One request. `headers` are whole header lines (`"Name: value"`).
public struct HTTPRequest: Sendable {
    /// `GET`, `POST`, or any other method name (sent as a custom request).
    public var method: String
    public var url: String
    public var headers: [String]
    /// Lines of this request alone (an ID, a time), sent before `headers`. A sender whose other
    /// lines repeat request after request passes those as `headers` (best the same array each
    /// time) and only the changing ones here: the client keeps one curl list of `headers` while
    /// they stay the same and links these in front of it, copied into memory the request's
    /// handle owns, instead of making and freeing a whole list per request.
    public var varyingHeaders: [String]
    public var body: [UInt8]

    public init(method: String = "POST", url: String, headers: [String] = [], varyingHeaders: [String] = [], body: [UInt8] = []) {
        self.method = method
        self.url = url
        self.headers = headers
        self.varyingHeaders = varyingHeaders
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
    /// A connection older than this is not used for another request: the next one opens a fresh
    /// connection, and the old one is closed (`CURLOPT_MAXLIFETIME_CONN`). Google's front ends
    /// end long-lived connections with a GOAWAY anyway; a connection replaced first, at a moment
    /// of the client's choosing, lands on whichever front end is least loaded then, instead of
    /// holding one for hours. libcurl checks the age only of a connection no request is using;
    /// a connection busy without pause is replaced by the client's generations of connections
    /// (`HTTPClient.connectionGenerationOdd`): after this age new requests go to fresh
    /// connections while the old one finishes its streams. 0: no limit.
    /// Default `defaultMaxConnectionAgeSeconds` (10 minutes).
    public var maxConnectionAgeSeconds: Int = HTTPClientConfiguration.defaultMaxConnectionAgeSeconds

    /// Ten minutes: long enough that opening a connection (TCP and TLS handshakes) is a rounding
    /// error next to the requests it carries, short enough that load moves between front ends
    /// within minutes of one being added.
    public static let defaultMaxConnectionAgeSeconds = 600

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
