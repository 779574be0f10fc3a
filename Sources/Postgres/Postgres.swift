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

    var text: String {
        switch self {
        case .text(let s): return s
        case .int(let i): return String(i)
        case .bool(let b): return b ? "t" : "f"
        case .double(let d): return String(d)
        }
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
    public func int(_ row: Int, _ column: Int) -> Int? { self[row, column].flatMap { Int($0) } }
    public func double(_ row: Int, _ column: Int) -> Double? { self[row, column].flatMap { Double($0) } }
    public func bool(_ row: Int, _ column: Int) -> Bool? { self[row, column].map { $0 == "t" } }
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

public struct PGNotification: Sendable, Equatable {
    public var channel: String
    public var payload: String
}

/// One connection. Not thread-safe: one thread uses it at a time.
public final class PGConnection: @unchecked Sendable {
    private var handle: OpaquePointer?
    public let url: String
    private var prepared: [String: String] = [:]
    private var listening: [String] = []

    public init(url: String) throws(PostgresError) {
        self.url = url
        try open()
    }
    deinit { if let handle { PQfinish(handle) } }

    private func open() throws(PostgresError) {
        let connection = PQconnectdb(url)
        guard let connection, PQstatus(connection) == CONNECTION_OK else {
            let text = connection.map { String(cString: PQerrorMessage($0)) } ?? "out of memory"
            if let connection { PQfinish(connection) }
            throw PostgresError("cannot connect to PostgreSQL at \(Self.redacted(url)): \(text.trimmingCharacters(in: .whitespacesAndNewlines))")
        }
        handle = connection
        prepared = [:]
        // Notices (e.g. "relation already exists, skipping") are not errors; keep them off stderr.
        PQsetNoticeProcessor(connection, { _, _ in }, nil)
    }

    /// The connection string with any password replaced, for messages: the URL form's
    /// user:password@, a ?password= parameter, and the keyword form's password=...
    public static func redacted(_ url: String) -> String {
        var text = url
        if var components = URLComponents(string: url), components.scheme != nil, components.password != nil {
            components.password = "***"
            text = components.string ?? url
        }
        var result = ""
        var rest = Substring(text)
        while let range = rest.range(of: "password=", options: .caseInsensitive) {
            result += rest[..<range.upperBound] + "***"
            rest = rest[range.upperBound...]
            if rest.first == "'" {
                rest = rest.dropFirst()
                rest = rest.drop { $0 != "'" }.dropFirst()
            } else {
                rest = rest.drop { $0 != " " && $0 != "&" }
            }
        }
        return result + rest
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

    /// The socket, for poll()/epoll when waiting for notifications.
    public var socket: Int32 { handle.map { PQsocket($0) } ?? -1 }

    @discardableResult
    public func query(_ sql: String, _ parameters: [PGValue?] = []) throws(PostgresError) -> PGResult {
        guard let handle else { throw PostgresError("connection is closed") }
        let name: String
        if let existing = prepared[sql] {
            name = existing
        } else {
            name = "herald_\(prepared.count)"
            let prepareResult = PQprepare(handle, name, sql, 0, nil)
            try check(prepareResult, sql: sql)
            prepared[sql] = name
        }
        let texts = parameters.map { $0?.text }
        let result = Self.withCStrings(texts) { pointers in
            PQexecPrepared(handle, name, Int32(pointers.count), pointers, nil, nil, 0)
        }
        return try check(result, sql: sql)
    }

    /// Runs one or more statements without parameters (migrations, BEGIN/COMMIT).
    public func execute(_ sql: String) throws(PostgresError) {
        guard let handle else { throw PostgresError("connection is closed") }
        try check(PQexec(handle, sql), sql: sql)
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
            if let handle, PQstatus(handle) != CONNECTION_OK { prepared = [:] }
            throw PostgresError(message.isEmpty ? "statement failed" : message, sqlState: state, serverMessage: primary)
        }
    }

    /// Runs `body` inside BEGIN/COMMIT; rolls back when it throws.
    public func transaction<T>(_ body: () throws(PostgresError) -> T) throws(PostgresError) -> T {
        try execute("BEGIN")
        do {
            let value = try body()
            try execute("COMMIT")
            return value
        } catch {
            try? execute("ROLLBACK")
            throw error
        }
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

    private static func withCStrings<R>(_ strings: [String?], _ body: ([UnsafePointer<CChar>?]) -> R) -> R {
        var owned: [UnsafeMutablePointer<CChar>?] = strings.map { $0.map { strdup($0) } ?? nil }
        defer { for pointer in owned { free(pointer) } }
        return owned.withUnsafeMutableBufferPointer { buffer in
            body(buffer.map { $0.map { UnsafePointer($0) } })
        }
    }
}
