import JSON
import Postgres

/// A queue's settings (herald.queues) and what it holds now.
public struct QueueSettings: Sendable, Equatable {
    public var name: String
    public var paused: Bool
    /// Messages per second across every pool; nil: no limit.
    public var maxPerSecond: Double?
    /// Requests in flight across every pool; nil: no limit.
    public var maxInFlight: Int?
    public var available: Int
    public var running: Int
    public var deadLetters: Int
    /// Jobs waiting for their run_at (send_at, a campaign's start, a quiet hour).
    public var scheduled: Int = 0

    public var json: JSONValue {
        var object = JSONObject()
        object["queue"] = .string(name)
        object["paused"] = .bool(paused)
        object["max_per_second"] = maxPerSecond.map { .number(numberText($0)) } ?? .null
        object["max_in_flight"] = maxInFlight.map { JSONValue($0) } ?? .null
        object["available"] = JSONValue(available)
        object["scheduled"] = JSONValue(scheduled)
        object["running"] = JSONValue(running)
        object["dead"] = JSONValue(deadLetters)
        return .object(object)
    }
}

/// How `setLimits` treats one limit.
public enum LimitChange<Value: Sendable & Equatable>: Sendable, Equatable {
    /// Keep what is set.
    case unchanged
    /// No limit.
    case removed
    case set(Value)
}

/// The SQL of steering queues (herald.pause_queue, resume_queue, set_queue_limits). Every
/// action that changed something is recorded in herald.admin_log with the queue's name.
public enum Queues {
    /// Queues with settings, available, scheduled or running jobs, or dead letters, by name. The counts come
    /// from the partial indexes of pending jobs, so finished history costs nothing.
    public static func list(_ connection: PGConnection) throws(PostgresError) -> [QueueSettings] {
        let rows = try connection.query(SQL.queuesList)
        return (0..<rows.rowCount).map { row in
            QueueSettings(name: rows[row, 0] ?? "", paused: rows.bool(row, 1) ?? false, maxPerSecond: rows.double(row, 2),
                          maxInFlight: rows.int(row, 3), available: rows.int(row, 4) ?? 0, running: rows.int(row, 5) ?? 0,
                          deadLetters: rows.int(row, 6) ?? 0, scheduled: rows.int(row, 7) ?? 0)
        }
    }

    /// Checks a queue name as typed; the error says what to give.
    static func checked(_ name: String) throws(AdminError) -> String {
        if name.isEmpty { throw AdminError(.badInput, "the queue name is empty; give the name of a queue (herald queues list shows them)") }
        if name.count > 200 { throw AdminError(.badInput, "the queue name is \(name.count) characters long; give at most 200") }
        if name.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7f }) {
            throw AdminError(.badInput, "the queue name \(JSONValue.quoted(name)) contains a control character")
        }
        return name
    }

    static func settingsRow(_ connection: PGConnection, _ name: String) throws(PostgresError) -> PGResult {
        try connection.query(SQL.queueSettingsLock, [.text(name)])
    }

    /// No job of the queue is claimed until it is resumed; requests in flight finish. Returns
    /// false when it was paused already.
    public static func pause(_ connection: PGConnection, name: String, source: String) throws -> Bool {
        let name = try checked(name)
        return try connection.transaction {
            let wasPaused = try settingsRow(connection, name).bool(0, 0) ?? false
            try AdminError.translating { try connection.query(SQL.pauseQueue, [.text(name)]) }
            if !wasPaused {
                try AdminLog.record(connection, action: "pause_queue", ids: [], details: ["queue": .string(name)], source: source)
            }
            return !wasPaused
        }
    }

    /// Claims of the queue go on. Returns false when it was not paused.
    public static func resume(_ connection: PGConnection, name: String, source: String) throws -> Bool {
        let name = try checked(name)
        return try connection.transaction {
            let wasPaused = try settingsRow(connection, name).bool(0, 0) ?? false
            try AdminError.translating { try connection.query(SQL.resumeQueue, [.text(name)]) }
            if wasPaused {
                try AdminLog.record(connection, action: "resume_queue", ids: [], details: ["queue": .string(name)], source: source)
            }
            return wasPaused
        }
    }

    /// What `setLimits` left in place, and whether the name was new to Herald (no job, dead
    /// letter or settings used it before: a typo, or a queue prepared before its first job).
    public struct LimitsResult: Sendable {
        public var maxPerSecond: Double?
        public var maxInFlight: Int?
        public var newName: Bool
    }

    /// Sets or removes a queue's limits; a limit left `.unchanged` keeps its value.
    public static func setLimits(_ connection: PGConnection, name: String, maxPerSecond: LimitChange<Double>,
                                 maxInFlight: LimitChange<Int>, source: String) throws -> LimitsResult {
        let name = try checked(name)
        if case .set(let rate) = maxPerSecond, !(rate > 0 && rate.isFinite) {
            throw AdminError(.badInput, "max_per_second must be more than 0, not \(numberText(rate)); remove the limit instead to send without one")
        }
        if case .set(let count) = maxInFlight, count < 1 || count > Int(Int32.max) {
            throw AdminError(.badInput, "max_in_flight must be a whole number from 1 to \(Int32.max), not \(count); remove the limit instead to allow any number")
        }
        if maxPerSecond == .unchanged && maxInFlight == .unchanged {
            throw AdminError(.badInput, "give max_per_second or max_in_flight (a number, or none to remove the limit)")
        }
        return try connection.transaction {
            let current = try settingsRow(connection, name)
            let used = try connection.query(SQL.queueNameUsed, [.text(name)]).bool(0, 0) ?? false
            let known = current.rowCount > 0 || used
            let oldRate = current.rowCount > 0 ? current.double(0, 1) : nil
            let oldInFlight = current.rowCount > 0 ? current.int(0, 2) : nil
            let rate: Double?
            switch maxPerSecond {
            case .unchanged: rate = oldRate
            case .removed: rate = nil
            case .set(let value): rate = value
            }
            let inFlight: Int?
            switch maxInFlight {
            case .unchanged: inFlight = oldInFlight
            case .removed: inFlight = nil
            case .set(let value): inFlight = value
            }
            try AdminError.translating(stateError: .badInput) {
                try connection.query(SQL.setQueueLimits,
                                     [.text(name), rate.map { .double($0) }, inFlight.map { .int($0) }])
            }
            if rate != oldRate || inFlight != oldInFlight || current.rowCount == 0 {
                var details = JSONObject()
                details["queue"] = .string(name)
                details["max_per_second"] = rate.map { .number(numberText($0)) } ?? .null
                details["max_in_flight"] = inFlight.map { JSONValue($0) } ?? .null
                details["before"] = ["max_per_second": oldRate.map { .number(numberText($0)) } ?? .null,
                                     "max_in_flight": oldInFlight.map { JSONValue($0) } ?? .null]
                try AdminLog.record(connection, action: "set_queue_limits", ids: [], details: .object(details), source: source)
            }
            return LimitsResult(maxPerSecond: rate, maxInFlight: inFlight, newName: !known)
        }
    }
}
