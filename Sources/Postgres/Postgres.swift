// The Postgres module: a small, direct binding of libpq. Every statement takes its values as
// parameters (PQexecParams / PQexecPrepared in text format); nothing here pastes a value into SQL.
import CLibPQ
import Foundation

public struct PostgresError: Error, Sendable, CustomStringConvertible {
    /// The SQLSTATE code when the server sent one (e.g. "40001"), otherwise nil.
    public var sqlState: String?
    public var message: String
    /// The server's own one-line message (what a RAISE EXCEPTION said), without the severity,
    /// CONTEXT and HINT lines around it; nil when the error did not come from the server.
    public var serverMessage: String?
    /// The server could not be reached or refused the connection (as opposed to a bad connection
    /// string or a failed statement): the commands exit with their own status for it.
    public var isConnectionFailure = false
    public init(_ message: String, sqlState: String? = nil, serverMessage: String? = nil) {
        self.message = message
        self.sqlState = sqlState
        self.serverMessage = serverMessage
    }
    public var description: String { sqlState.map { "\(message) (SQLSTATE \($0))" } ?? message }
}

/// A parameter value, sent in text format; PostgreSQL casts it to the parameter's type.
public enum PGValue: Sendable, Equatable {
    case text(String)
    case int(Int)
    case bool(Bool)
    case double(Double)
    /// Text given as its UTF-8 bytes (no NUL), for a value built as bytes, such as a JSON
    /// document written for `jsonb_to_recordset`: it reaches libpq without becoming a String.
    case utf8([UInt8])

    /// Appends the value's text and a terminating NUL, as libpq reads a parameter.
    func appendCString(to buffer: inout [UInt8]) {
        switch self {
        case .text(let s): buffer.append(contentsOf: s.utf8)
        case .int(let i): buffer.append(contentsOf: String(i).utf8)
        case .bool(let b): buffer.append(b ? UInt8(ascii: "t") : UInt8(ascii: "f"))
        case .double(let d): buffer.append(contentsOf: String(d).utf8)
        case .utf8(let bytes): buffer.append(contentsOf: bytes)
        }
        buffer.append(0)
    }
}

extension PGValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByBooleanLiteral {
    public init(stringLiteral value: String) { self = .text(value) }
    public init(integerLiteral value: Int) { self = .int(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
}

/// One result set. Values are read in place from libpq's buffer; the result is freed with it.
public final class PGResult: @unchecked Sendable {
    let handle: OpaquePointer
    public let rowCount: Int
    public let columnCount: Int
    /// For INSERT/UPDATE/DELETE: the number of rows affected.
    public let affectedRows: Int

    init(_ handle: OpaquePointer) {
        self.handle = handle
        rowCount = Int(PQntuples(handle))
        columnCount = Int(PQnfields(handle))
        affectedRows = Int(String(cString: PQcmdTuples(handle))) ?? 0
    }
    deinit { PQclear(handle) }

    public func isNull(_ row: Int, _ column: Int) -> Bool { PQgetisnull(handle, Int32(row), Int32(column)) == 1 }

    public subscript(row: Int, column: Int) -> String? {
        if isNull(row, column) { return nil }
        return String(cString: PQgetvalue(handle, Int32(row), Int32(column)))
    }
    /// The raw bytes of a value (for JSON parsing without an intermediate String).
    public func bytes(_ row: Int, _ column: Int) -> [UInt8]? {
        if isNull(row, column) { return nil }
        let length = Int(PQgetlength(handle, Int32(row), Int32(column)))
        guard let base = PQgetvalue(handle, Int32(row), Int32(column)) else { return [] }
        return base.withMemoryRebound(to: UInt8.self, capacity: length) { Array(UnsafeBufferPointer(start: $0, count: length)) }
    }
    /// The value as an integer (nil for NULL or a value that is not one). Read from libpq's
    /// buffer without making a String: a claim reads several per job.
    public func int(_ row: Int, _ column: Int) -> Int? {
        if isNull(row, column) { return nil }
        let length = Int(PQgetlength(handle, Int32(row), Int32(column)))
        guard let text = PQgetvalue(handle, Int32(row), Int32(column)) else { return nil }
        return text.withMemoryRebound(to: UInt8.self, capacity: length) { PGText.integer(UnsafeBufferPointer(start: $0, count: length)) }
    }
    /// The value as a Double (nil for NULL or a value that is not a number), as `Double(String)` reads it.
    public func double(_ row: Int, _ column: Int) -> Double? {
        if isNull(row, column) { return nil }
        let length = Int(PQgetlength(handle, Int32(row), Int32(column)))
        guard let text = PQgetvalue(handle, Int32(row), Int32(column)) else { return nil }
        return text.withMemoryRebound(to: UInt8.self, capacity: length) { PGText.double(UnsafeBufferPointer(start: $0, count: length)) }
    }
    /// The value as a boolean: true for PostgreSQL's `t`, false for anything else, nil for NULL.
    public func bool(_ row: Int, _ column: Int) -> Bool? {
        if isNull(row, column) { return nil }
        guard let text = PQgetvalue(handle, Int32(row), Int32(column)) else { return false }
        return text[0] == CChar(UInt8(ascii: "t")) && text[1] == 0
    }
    /// Whether the value is exactly `expected` (false for NULL), compared in libpq's buffer.
    public func equals(_ row: Int, _ column: Int, _ expected: StaticString) -> Bool {
        if isNull(row, column) { return false }
        let length = Int(PQgetlength(handle, Int32(row), Int32(column)))
        guard length == expected.utf8CodeUnitCount, let text = PQgetvalue(handle, Int32(row), Int32(column)) else { return false }
        return memcmp(text, expected.utf8Start, length) == 0
    }
    public func columnName(_ column: Int) -> String { String(cString: PQfname(handle, Int32(column))) }
    /// The position of the column called `name`, so results are read by name, not by position.
    public func column(_ name: String) throws(PostgresError) -> Int {
        let index = Int(PQfnumber(handle, "\"" + name + "\""))
        guard index >= 0 else {
            throw PostgresError("the result has no column \(name) (it has \((0..<columnCount).map(columnName).joined(separator: ", ")))")
        }
        return index
    }
}

/// Numbers in PostgreSQL's text output, read the way `Int(String)` and `Double(String)` read
/// them, for the plain forms PostgreSQL prints; anything else goes through those initialisers.
enum PGText {
    static func integer(_ bytes: UnsafeBufferPointer<UInt8>) -> Int? {
        var index = 0
        let negative = bytes.first == UInt8(ascii: "-")
        if negative || bytes.first == UInt8(ascii: "+") { index = 1 }
        guard index < bytes.count else { return nil }
        var value = 0
        while index < bytes.count {
            let digit = Int(bytes[index]) - Int(UInt8(ascii: "0"))
            guard digit >= 0 && digit <= 9 else { return nil }
            // Accumulated negatively, so Int.min reads as it does with Int(String).
            let (times10, overflow1) = value.multipliedReportingOverflow(by: 10)
            let (next, overflow2) = times10.subtractingReportingOverflow(digit)
            guard !overflow1 && !overflow2 else { return nil }
            value = next
            index += 1
        }
        if negative { return value }
        let (positive, overflow) = (0).subtractingReportingOverflow(value)
        return overflow ? nil : positive
    }

    /// Exact powers of ten as Doubles (10^22 is the largest a Double holds exactly).
    private static let powersOfTen: [Double] = (0...22).map { (0..<$0).reduce(1.0) { product, _ in product * 10 } }

    static func double(_ bytes: UnsafeBufferPointer<UInt8>) -> Double? {
        // [-]digits[.digits] whose digits, read as an integer, stay below 2^53, with at most 22
        // after the point (a timestamp's epoch seconds are): the integer and the power of ten
        // are both exact Doubles, so one division rounds correctly, as strtod does.
        let count = bytes.count
        var index = 0
        let negative = count > 0 && bytes[0] == UInt8(ascii: "-")
        if negative { index = 1 }
        var mantissa: UInt64 = 0
        let digitsStart = index
        while index < count, bytes[index] &- UInt8(ascii: "0") < 10, index - digitsStart < 17 {
            mantissa = mantissa &* 10 &+ UInt64(bytes[index] &- UInt8(ascii: "0"))
            index += 1
        }
        var integerDigits = index - digitsStart
        var fractionDigits = 0
        if index < count, bytes[index] == UInt8(ascii: ".") {
            index += 1
            let fractionStart = index
            while index < count, bytes[index] &- UInt8(ascii: "0") < 10, integerDigits + (index - fractionStart) < 17 {
                mantissa = mantissa &* 10 &+ UInt64(bytes[index] &- UInt8(ascii: "0"))
                index += 1
            }
            fractionDigits = index - fractionStart
            if fractionDigits == 0 && integerDigits == 0 { integerDigits = -1 }  // "." alone
        }
        if index == count, integerDigits + fractionDigits > 0, fractionDigits <= 22, mantissa < 1 << 53 {
            let value = Double(mantissa) / powersOfTen[fractionDigits]
            return negative ? -value : value
        }
        return Double(String(decoding: bytes, as: UTF8.self))
    }
}

public struct PGNotification: Sendable, Equatable {
    public var channel: String
    public var payload: String
}

/// One connection. Not thread-safe: one thread uses it at a time.
///
/// Every connection looks after a network path that goes silent (a partition, a NAT or firewall
/// that drops the flow without a reset): libpq's TCP keepalives and `tcp_user_timeout` are on
/// (`ConnectionDefaults.client`) and the server is asked to probe its side too
/// (`ConnectionDefaults.server`), unless the connection string sets them itself. A connection
/// given a statement timeout (`limitStatements(to:)`) also gives up on a statement whose answer
/// does not come, and is then closed, so its owner reconnects.
public final class PGConnection: @unchecked Sendable {
    private var handle: OpaquePointer?
    public let url: String
    private var prepared: [String: String] = [:]
    /// The same statements found by where their text is stored: the statements a worker runs
    /// are constants, and a look-up by address spares hashing a statement's whole text (some are
    /// kilobytes) for every query. Each entry keeps its text, so no other text can come to be
    /// stored at its address; a hit is still compared (by identity first, which is immediate).
    private var preparedByStorage: [Int: (sql: String, name: String)] = [:]
    private var listening: [String] = []
    /// Seconds the server runs one statement at most (its `statement_timeout`), nil: no limit.
    public private(set) var statementTimeout: Double?
    /// A statement whose answer has not come this long after `statementTimeout` has passed was
    /// lost on the way (the server would have answered with a timeout error by then).
    public static let answerGrace = 5.0

    public init(url: String) throws(PostgresError) {
        self.url = url
        try open()
    }
    deinit { if let handle { PQfinish(handle) } }

    private func open() throws(PostgresError) {
        // Parsed first: a malformed string is refused without being echoed, and libpq is given
        // only the keywords parsed (never the string to expand), so none of it can come back in
        // a message as a database name.
        let parsed: ConnectionString
        do { parsed = try ConnectionString.parse(url) } catch { throw PostgresError(error.description) }
        // Herald's defaults first, the connection string last: libpq keeps the last value of a
        // keyword, so whatever DATABASE_URL sets (keepalives_idle=..., connect_timeout=...) wins.
        let pairs = ConnectionDefaults.clientKeywords(environment: ProcessInfo.processInfo.environment) + parsed.keywords
        let connection = Self.withCStringArray(pairs.map(\.0)) { keywords in
            Self.withCStringArray(pairs.map(\.1)) { values in PQconnectdbParams(keywords, values, 0) }
        }
        guard let connection, PQstatus(connection) == CONNECTION_OK else {
            let text = connection.map { String(cString: PQerrorMessage($0)) } ?? "out of memory"
            if let connection { PQfinish(connection) }
            var failure = PostgresError("cannot connect to PostgreSQL at \(parsed.display): \(Self.redacted(text, secretsOf: url).trimmingCharacters(in: .whitespacesAndNewlines))")
            failure.isConnectionFailure = true
            throw failure
        }
        handle = connection
        forgetPrepared()
        // Notices (e.g. "relation already exists, skipping") are not errors; keep them off stderr.
        PQsetNoticeProcessor(connection, { _, _ in }, nil)
        // The server's side of a silent path: it probes the client too, and its backend (and the
        // locks and the transaction it holds) goes away when the client is gone.
        let options = Self.conninfoValue(connection, "options") ?? ""
        let settings = ConnectionDefaults.server.filter { !options.contains($0.0) }
        // In the same round trip, a search_path no other role can write to (whatever the
        // connection string or the role's settings say): no function or table another role
        // planted in `public` or "$user" can stand in for one a statement names.
        let pinned = [ConnectionDefaults.searchPath]
        do {
            try query(Self.setConfigStatement(count: settings.count + 1), (settings + pinned).flatMap { [PGValue.text($0.0), .text($0.1)] })
        } catch {
            // A server that does not know a keepalive setting (older than 12) keeps its defaults;
            // the search_path is still set, or the connection is not used.
            guard !settings.isEmpty else { throw error }
            try query(Self.setConfigStatement(count: 1), pinned.flatMap { [PGValue.text($0.0), .text($0.1)] })
        }
        if let statementTimeout { try applyStatementTimeout(statementTimeout) }
    }

    /// statement_timeout, and idle_in_transaction_session_timeout as long: a client cut off in
    /// the middle of a transaction does not keep its rows locked past it, even while the server
    /// still believes the session alive.
    private func applyStatementTimeout(_ seconds: Double) throws(PostgresError) {
        let milliseconds = String(Int((seconds * 1000).rounded()))
        try query(Self.setConfigStatement(count: 2),
                  [.text("statement_timeout"), .text(milliseconds), .text("idle_in_transaction_session_timeout"), .text(milliseconds)])
    }

    /// `SELECT pg_catalog.set_config($1, $2, false), ...` for `count` settings (names and values
    /// as parameters; qualified, since it runs before the search_path is pinned).
    static func setConfigStatement(count: Int) -> String {
        "SELECT " + (0..<count).map { "pg_catalog.set_config($\($0 * 2 + 1), $\($0 * 2 + 2), false)" }.joined(separator: ", ")
    }

    /// Runs every statement of this connection (and of every reconnection) under PostgreSQL's
    /// `statement_timeout` of `seconds`, and abandons the connection when an answer has not come
    /// `answerGrace` seconds after that: the path to the server has gone silent.
    public func limitStatements(to seconds: Double) throws(PostgresError) {
        statementTimeout = seconds
        try applyStatementTimeout(seconds)
    }

    /// A libpq keyword's value for this connection as libpq resolved it (Herald's defaults, the
    /// environment, the connection string), e.g. `keepalives_idle`; nil when closed or unset.
    public func connectionOption(_ keyword: String) -> String? {
        handle.flatMap { Self.conninfoValue($0, keyword) }
    }

    /// A keyword's value as libpq resolved it for `connection` (defaults, environment, string).
    private static func conninfoValue(_ connection: OpaquePointer, _ keyword: String) -> String? {
        guard let options = PQconninfo(connection) else { return nil }
        defer { PQconninfoFree(options) }
        var index = 0
        while let name = options[index].keyword {
            if String(cString: name) == keyword { return options[index].val.map { String(cString: $0) } }
            index += 1
        }
        return nil
    }

    private static func withCStringArray<R>(_ strings: [String], _ body: ([UnsafePointer<CChar>?]) -> R) -> R {
        let copies = strings.map { strdup($0) }
        defer { for copy in copies { free(copy) } }
        return body(copies.map { UnsafePointer($0) } + [nil])
    }

    /// The connection string for messages: what was parsed, in URL form with the password
    /// masked (`ConnectionString.display`), or, for a malformed string, a note that it is not shown.
    public static func redacted(_ url: String) -> String {
        ConnectionString.shown(url)
    }

    /// `text` (an error message about `url`, such as libpq's) with every password `url` holds
    /// masked: the parsed one, those found in the string by pattern (as written and
    /// percent-decoded), and any connection string quoted in it.
    public static func redacted(_ text: String, secretsOf url: String) -> String {
        var masked = ConnectionSecrets.mask(text)
        var secrets = ConnectionSecrets.passwords(in: url)
        if let password = (try? ConnectionString.parse(url))?.password { secrets.append(password) }
        for secret in secrets.sorted(by: { $0.count > $1.count }) where secret.count >= 3 {
            masked = masked.replacingOccurrences(of: secret, with: "***")
        }
        return masked
    }

    public var isHealthy: Bool { handle.map { PQstatus($0) == CONNECTION_OK } ?? false }

    /// Drops the connection and opens a new one (LISTENs are renewed).
    public func reconnect() throws(PostgresError) {
        if let handle { PQfinish(handle) }
        handle = nil
        try open()
        let channels = listening
        listening = []
        for channel in channels { try listen(channel) }
    }

    /// Closes a connection whose statement got no answer: it is no longer healthy, and its
    /// owner reconnects.
    private func abandon() {
        if let handle { PQfinish(handle) }
        handle = nil
        forgetPrepared()
    }

    /// Sends with `send` and waits for the answer, at most `statementTimeout + answerGrace`
    /// seconds; returns the last result (the first error stops a multi-statement string).
    private func perform(_ send: (OpaquePointer) -> Int32) throws(PostgresError) -> OpaquePointer? {
        guard let handle, let limit = statementTimeout else { return nil }
        guard send(handle) == 1 else {
            throw PostgresError(String(cString: PQerrorMessage(handle)).trimmingCharacters(in: .whitespacesAndNewlines))
        }
        let deadline = Self.monotonicSeconds() + limit + Self.answerGrace
        while PQisBusy(handle) == 1 {
            let remaining = deadline - Self.monotonicSeconds()
            if remaining <= 0 {
                abandon()
                throw PostgresError("PostgreSQL sent no answer within \(Int(limit + Self.answerGrace)) s (the network path is silent); closed the connection")
            }
            var descriptor = pollfd(fd: PQsocket(handle), events: Int16(POLLIN), revents: 0)
            _ = poll(&descriptor, 1, Int32(min(remaining * 1000, 1000).rounded(.up)))
            if PQconsumeInput(handle) == 0 { break }
        }
        var last: OpaquePointer? = nil
        while let result = PQgetResult(handle) {
            if let previous = last {
                // Keep an error over what follows it.
                if PQresultStatus(previous) == PGRES_FATAL_ERROR { PQclear(result); continue }
                PQclear(previous)
            }
            last = result
        }
        return last
    }

    private static func monotonicSeconds() -> Double {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
    }

    /// The socket, for poll()/epoll when waiting for notifications.
    public var socket: Int32 { handle.map { PQsocket($0) } ?? -1 }

    @discardableResult
    public func query(_ sql: String, _ parameters: [PGValue?] = []) throws(PostgresError) -> PGResult {
        guard let handle else { throw PostgresError("connection is closed") }
        let name: String
        if let existing = preparedName(sql) {
            name = existing
        } else {
            name = "herald_\(prepared.count)"
            let prepareResult = statementTimeout == nil ? PQprepare(handle, name, sql, 0, nil)
                : try perform { PQsendPrepare($0, name, sql, 0, nil) }
            try check(prepareResult, sql: sql)
            prepared[sql] = name
        }
        let result = try Self.withCStrings(parameters) { (pointers) throws(PostgresError) -> OpaquePointer? in
            if statementTimeout == nil { return PQexecPrepared(handle, name, Int32(pointers.count), pointers, nil, nil, 0) }
            return try perform { PQsendQueryPrepared($0, name, Int32(pointers.count), pointers, nil, nil, 0) }
        }
        return try check(result, sql: sql)
    }

    /// The name `sql` was prepared under on this connection, nil when it was not.
    private func preparedName(_ sql: String) -> String? {
        let address = Self.storageAddress(sql)
        if let address, let entry = preparedByStorage[address], entry.sql == sql { return entry.name }
        guard let name = prepared[sql] else { return nil }
        if let address, preparedByStorage.count < 256 { preparedByStorage[address] = (sql, name) }
        return name
    }

    private func forgetPrepared() {
        prepared = [:]
        preparedByStorage = [:]
    }

    /// Where the UTF-8 of `text` is stored, for texts that are stored out of line (not the
    /// short ones kept inside the String value itself).
    private static func storageAddress(_ text: String) -> Int? {
        guard text.utf8.count > 15 else { return nil }
        return text.utf8.withContiguousStorageIfAvailable { Int(bitPattern: $0.baseAddress) } ?? nil
    }

    /// Runs one or more statements without parameters (migrations, BEGIN/COMMIT).
    public func execute(_ sql: String) throws(PostgresError) {
        guard let handle else { throw PostgresError("connection is closed") }
        if statementTimeout == nil {
            try check(PQexec(handle, sql), sql: sql)
        } else {
            try check(try perform { PQsendQuery($0, sql) }, sql: sql)
        }
    }

    @discardableResult
    private func check(_ result: OpaquePointer?, sql: String) throws(PostgresError) -> PGResult {
        guard let result else {
            let text = handle.map { String(cString: PQerrorMessage($0)) } ?? "no connection"
            throw PostgresError(text.trimmingCharacters(in: .whitespacesAndNewlines))
        }
        let wrapped = PGResult(result)
        switch PQresultStatus(result) {
        case PGRES_COMMAND_OK, PGRES_TUPLES_OK, PGRES_EMPTY_QUERY:
            return wrapped
        default:
            let message = String(cString: PQresultErrorMessage(result)).trimmingCharacters(in: .whitespacesAndNewlines)
            let state = PQresultErrorField(result, Int32(UInt8(ascii: "C"))).map { String(cString: $0) }
            let primary = PQresultErrorField(result, Int32(UInt8(ascii: "M"))).map { String(cString: $0) }
            if let handle, PQstatus(handle) != CONNECTION_OK { forgetPrepared() }
            throw PostgresError(message.isEmpty ? "statement failed" : message, sqlState: state, serverMessage: primary)
        }
    }

    /// Runs `body` inside BEGIN/COMMIT; rolls back when it throws.
    public func transaction<T>(_ body: () throws(PostgresError) -> T) throws(PostgresError) -> T {
        try transaction(body, failing: { $0 })
    }

    /// Runs `body` inside BEGIN/COMMIT, rolling back when it throws anything (a refusal such as
    /// an unknown id as much as a database error), so a refused action leaves no trace.
    public func transaction<T>(_ body: () throws -> T) throws -> T {
        try transaction(body, failing: { $0 })
    }

    /// The one BEGIN/COMMIT/ROLLBACK of both: `failing` turns a failed BEGIN or COMMIT into the
    /// body's kind of error, so a caller whose body throws only PostgresError keeps that type.
    private func transaction<T, Failure: Error>(_ body: () throws(Failure) -> T,
                                                failing: (PostgresError) -> Failure) throws(Failure) -> T {
        do throws(PostgresError) { try execute("BEGIN") } catch { throw failing(error) }
        let value: T
        do throws(Failure) {
            value = try body()
        } catch {
            try? execute("ROLLBACK")
            throw error
        }
        do throws(PostgresError) {
            try execute("COMMIT")
        } catch {
            try? execute("ROLLBACK")
            throw failing(error)
        }
        return value
    }

    /// Runs `body` inside a savepoint of the current transaction: when it throws, only its own
    /// changes are rolled back and the transaction goes on.
    public func savepoint(_ name: String, _ body: () throws(PostgresError) -> Void) throws(PostgresError) {
        try execute("SAVEPOINT \(Self.quoteIdentifier(name))")
        do {
            try body()
            try execute("RELEASE SAVEPOINT \(Self.quoteIdentifier(name))")
        } catch {
            try execute("ROLLBACK TO SAVEPOINT \(Self.quoteIdentifier(name))")
            throw error
        }
    }

    public func listen(_ channel: String) throws(PostgresError) {
        try execute("LISTEN \(Self.quoteIdentifier(channel))")
        if !listening.contains(channel) { listening.append(channel) }
    }

    /// Reads what the socket holds and returns the notifications received so far (never blocks).
    public func notifications() throws(PostgresError) -> [PGNotification] {
        guard let handle else { throw PostgresError("connection is closed") }
        if PQconsumeInput(handle) == 0 {
            throw PostgresError("lost the connection to PostgreSQL: \(String(cString: PQerrorMessage(handle)).trimmingCharacters(in: .whitespacesAndNewlines))")
        }
        var found: [PGNotification] = []
        while let notify = PQnotifies(handle) {
            found.append(PGNotification(channel: String(cString: notify.pointee.relname),
                                        payload: String(cString: notify.pointee.extra)))
            PQfreemem(notify)
        }
        return found
    }

    /// The notifications libpq already read while it took the answers of other statements on this
    /// connection, without reading the socket: those never make the socket readable again, so a
    /// listener that only polls the socket would see them at the next notification.
    public func bufferedNotifications() -> [PGNotification] {
        guard let handle else { return [] }
        var found: [PGNotification] = []
        while let notify = PQnotifies(handle) {
            found.append(PGNotification(channel: String(cString: notify.pointee.relname),
                                        payload: String(cString: notify.pointee.extra)))
            PQfreemem(notify)
        }
        return found
    }

    /// Waits up to `timeout` seconds for a notification; returns what arrived (maybe nothing).
    public func waitForNotifications(timeout: Double) throws(PostgresError) -> [PGNotification] {
        let ready = try notifications()
        if !ready.isEmpty { return ready }
        var descriptor = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
        _ = poll(&descriptor, 1, Int32(max(0, timeout * 1000)))
        return try notifications()
    }

    /// An identifier quoted for SQL (for names only: LISTEN channels, CREATE DATABASE in tests).
    public static func quoteIdentifier(_ name: String) -> String {
        "\"" + name.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }

    /// Hands libpq every parameter as a NUL-terminated string (nil for NULL). They are written
    /// one after another into one buffer: one allocation per statement, not one per parameter.
    private static func withCStrings<R, E: Error>(_ parameters: [PGValue?], _ body: ([UnsafePointer<CChar>?]) throws(E) -> R) throws(E) -> R {
        var buffer: [UInt8] = []
        var starts: [Int] = []
        starts.reserveCapacity(parameters.count)
        for parameter in parameters {
            guard let parameter else {
                starts.append(-1)
                continue
            }
            starts.append(buffer.count)
            parameter.appendCString(to: &buffer)
        }
        // Typed throws through withUnsafeBufferPointer: the error is carried out as a Result.
        let result: Result<R, E> = buffer.withUnsafeBufferPointer { bytes in
            bytes.withMemoryRebound(to: CChar.self) { text in
                do throws(E) {
                    return .success(try body(starts.map { $0 < 0 ? nil : text.baseAddress! + $0 }))
                } catch {
                    return .failure(error)
                }
            }
        }
        return try result.get()
    }
}
