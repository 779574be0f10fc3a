import JSON
import Postgres

/// Which dead letters an operator means: a queue, text the reason contains, an age. Every part
/// is optional; an empty filter means every dead letter.
public struct DeadLetterFilter: Sendable, Equatable {
    /// The queue, matched exactly.
    public var queue: String?
    /// Text the reason contains, matched literally (case-sensitive): `%`, `_` and `\` are not
    /// wildcards, so `THIRD_PARTY_AUTH_ERROR` matches just what it says.
    public var reason: String?
    /// Only letters dead for longer than this many seconds (discard only).
    public var olderThanSeconds: Double?
    /// The registry project (herald.projects) of the job, matched exactly.
    public var project: String?

    public init(queue: String? = nil, reason: String? = nil, olderThanSeconds: Double? = nil, project: String? = nil) {
        self.queue = queue
        self.reason = reason
        self.olderThanSeconds = olderThanSeconds
        self.project = project
    }

    public var isEmpty: Bool { queue == nil && reason == nil && olderThanSeconds == nil && project == nil }

    /// The reason as a LIKE pattern for herald.requeue_dead_letters and friends.
    public var reasonPattern: String? {
        reason.map { text in
            var escaped = ""
            for character in text {
                if character == "\\" || character == "%" || character == "_" { escaped.append("\\") }
                escaped.append(character)
            }
            return "%" + escaped + "%"
        }
    }

    /// Longest filter value accepted; a longer one is a mistake, not a reason.
    public static let maximumLength = 200

    /// Checks what a user typed; the error names the field and says what to do.
    public func validated() throws(AdminError) -> DeadLetterFilter {
        for (field, value) in [("queue", queue), ("reason", reason), ("project", project)] {
            guard let value else { continue }
            if value.isEmpty {
                throw AdminError(.badInput, "\(field) is empty; leave it out to match every \(field)")
            }
            if value.count > Self.maximumLength {
                throw AdminError(.badInput, "\(field) is \(value.count) characters long; give at most \(Self.maximumLength)")
            }
            if value.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7f }) {
                throw AdminError(.badInput, "\(field) contains a control character; give printable text")
            }
        }
        if let age = olderThanSeconds, !(age >= 0 && age.isFinite) {
            throw AdminError(.badInput, "older-than must be a duration of 0 or more")
        }
        return self
    }

    /// For messages: `queue=default reason="INTERNAL"`, or `every dead letter`.
    public var summary: String {
        var parts: [String] = []
        if let queue { parts.append("queue=\(JSONValue.quoted(queue))") }
        if let reason { parts.append("reason=\(JSONValue.quoted(reason))") }
        if let project { parts.append("project=\(JSONValue.quoted(project))") }
        if let olderThanSeconds { parts.append("older than \(Int(olderThanSeconds)) s") }
        return parts.isEmpty ? "every dead letter" : parts.joined(separator: " ")
    }

    var json: JSONValue {
        var object = JSONObject()
        if let queue { object["queue"] = .string(queue) }
        if let reason { object["reason"] = .string(reason) }
        if let project { object["project"] = .string(project) }
        if let olderThanSeconds { object["older_than_seconds"] = .number(String(Int(olderThanSeconds))) }
        return .object(object)
    }
}

/// One row of herald.dead_letters, as pages, the API and the shell show it.
public struct DeadLetter: Sendable {
    public var id: Int
    public var jobID: Int
    public var queue: String
    public var kind: String
    public var reason: String
    public var attempts: Int
    public var maxAttempts: Int
    public var dedupeKey: String?
    /// RFC 3339 timestamps (UTC).
    public var deadAt: String
    public var createdAt: String
    /// The message and the error history as stored (JSON).
    public var message: JSONValue
    public var errors: JSONValue
    /// The registry project it was sent for (nil: the pool's own credentials).
    public var project: String? = nil

    /// Whom the message was for, from the message itself: `token`, `topic` or `condition` for an
    /// FCM send, `apns_token` for an APNs push, `group` (the notification_key_name) for a
    /// device-group operation; nil when the message names none of them.
    public var target: (type: String, value: String)? {
        if kind == "group" {
            return message["notification_key_name"]?.stringValue.map { ("group", $0) }
        }
        for type in ["token", "topic", "condition", "apns_token"] {
            if let value = message[type]?.stringValue { return (type, value) }
        }
        return nil
    }

    /// Which provider the message was for: `apns` for a message with `apns_token`, `fcm` for any
    /// other (an FCM send or device-group operation).
    public var provider: String { message["apns_token"] != nil ? "apns" : "fcm" }

    /// `type:value` for a table, the value cut to about `width` characters (its start and its
    /// end kept, an ellipsis between) so a 160-character token still tells tokens apart.
    public func shortTarget(width: Int = 32) -> String {
        guard let (type, value) = target else { return "-" }
        let flat = value.replacingNewlines()
        guard flat.count > width else { return "\(type):\(flat)" }
        let tail = max(4, width / 4)
        return "\(type):\(flat.prefix(width - tail - 1))…\(flat.suffix(tail))"
    }

    /// The API's shape: `id`, `job_id`, `queue`, `target_type` and `target` (whom it was for, in
    /// full; null when the message names no target), `project`, `provider` (fcm, apns), `reason`, `attempts`, `dead_at`, `message`, and
    /// with `detail` also `kind`, `max_attempts`, `dedupe_key`, `created_at`, `errors`.
    public func json(detail: Bool = false) -> JSONValue {
        var object = JSONObject()
        object["id"] = JSONValue(id)
        object["job_id"] = JSONValue(jobID)
        object["queue"] = .string(queue)
        let target = self.target
        object["target_type"] = target.map { .string($0.type) } ?? .null
        object["target"] = target.map { .string($0.value) } ?? .null
        object["project"] = project.map { .string($0) } ?? .null
        object["provider"] = .string(provider)
        object["reason"] = .string(reason)
        object["attempts"] = JSONValue(attempts)
        object["dead_at"] = .string(deadAt)
        object["message"] = message
        if detail {
            object["kind"] = .string(kind)
            object["max_attempts"] = JSONValue(maxAttempts)
            object["dedupe_key"] = dedupeKey.map { .string($0) } ?? .null
            object["created_at"] = .string(createdAt)
            object["errors"] = errors
        }
        return .object(object)
    }
}

/// The result of a retry: which letters became which jobs, and which stayed because their
/// dedupe key is held by a pending job.
public struct RetryResult: Sendable, Equatable {
    public var retried: [(deadLetterID: Int, jobID: Int)]
    public var kept: [Int]
    public static func == (a: RetryResult, b: RetryResult) -> Bool {
        a.kept == b.kept && a.retried.map(\.deadLetterID) == b.retried.map(\.deadLetterID)
            && a.retried.map(\.jobID) == b.retried.map(\.jobID)
    }
}

/// The SQL of looking at, replaying and removing dead letters, each action that changed something
/// recorded in herald.admin_log in the same transaction as the change (a retry that kept every
/// letter, or a filter that matched none, changed nothing and leaves no row).
public enum DeadLetters {
    /// The rows of dead_letters_list.sql, dead_letter.sql and dead_letter_of_job.sql, which share their columns.
    static func letters(_ rows: PGResult) -> [DeadLetter] {
        (0..<rows.rowCount).map { row in
            DeadLetter(id: rows.int(row, 0) ?? 0, jobID: rows.int(row, 1) ?? 0, queue: rows[row, 2] ?? "",
                       kind: rows[row, 3] ?? "send", reason: rows[row, 4] ?? "", attempts: rows.int(row, 5) ?? 0,
                       maxAttempts: rows.int(row, 6) ?? 0, dedupeKey: rows[row, 7], deadAt: rows[row, 8] ?? "",
                       createdAt: rows[row, 9] ?? "",
                       message: (try? JSONValue.parse(rows.bytes(row, 10) ?? [])) ?? .null,
                       errors: (try? JSONValue.parse(rows.bytes(row, 11) ?? [])) ?? .array([]),
                       project: rows[row, 12])
        }
    }

    /// The newest dead letters matching `filter`, at most `limit`, older than id `before` when
    /// given (the next page starts below the last id shown).
    public static func list(_ connection: PGConnection, filter: DeadLetterFilter, limit: Int, before: Int? = nil) throws -> [DeadLetter] {
        let filter = try filter.validated()
        try requireQueueKnown(connection, filter)
        let rows = try connection.query(SQL.deadLettersList, [filter.queue.map { .text($0) }, filter.reasonPattern.map { .text($0) }, before.map { .int($0) },
                  .int(max(0, limit)), filter.project.map { .text($0) }])
        return letters(rows)
    }

    /// How many dead letters match `filter`.
    public static func count(_ connection: PGConnection, filter: DeadLetterFilter) throws -> Int {
        let filter = try filter.validated()
        return try connection.query(SQL.deadLettersCount, [filter.queue.map { .text($0) }, filter.reasonPattern.map { .text($0) },
                                                           filter.project.map { .text($0) }]).int(0, 0) ?? 0
    }

    public static func get(_ connection: PGConnection, id: Int) throws(PostgresError) -> DeadLetter? {
        letters(try connection.query(SQL.deadLetter, [.int(id)])).first
    }

    /// The dead letter a job became, if it is still in herald.dead_letters.
    public static func forJob(_ connection: PGConnection, jobID: Int) throws(PostgresError) -> DeadLetter? {
        letters(try connection.query(SQL.deadLetterOfJob, [.int(jobID)])).first
    }

    /// Queues that hold dead letters, by name (an index-only walk of dead_letters_queue).
    public static func queues(_ connection: PGConnection) throws(PostgresError) -> [String] {
        let rows = try connection.query(SQL.deadLetterQueues)
        return (0..<rows.rowCount).compactMap { rows[$0, 0] }
    }

    /// A queue filter that names a queue nothing knows (no job, no dead letter, no settings) is a
    /// typo until shown otherwise: say so, with the queues that hold dead letters. A known queue
    /// without dead letters just matches none (a nightly discard with nothing to do succeeds).
    static func requireQueueKnown(_ connection: PGConnection, _ filter: DeadLetterFilter) throws {
        guard let queue = filter.queue else { return }
        let exists = try connection.query(SQL.deadLetterQueueExists, [.text(queue)])
        if exists.bool(0, 0) == true { return }
        if try connection.query(SQL.queueKnown, [.text(queue)]).bool(0, 0) == true { return }
        let known = try queues(connection)
        throw AdminError(.notFound, "no dead letters in queue \(JSONValue.quoted(queue)), and no job or setting names it"
            + (known.isEmpty ? "; there are no dead letters at all" : "; queues with dead letters: \(known.joined(separator: ", "))"))
    }

    /// Ids that name no dead letter, as an error naming them (nil when all exist).
    static func missing(_ connection: PGConnection, ids: [Int]) throws -> AdminError? {
        let rows = try connection.query(SQL.deadLettersMissing, [.textArray(ids.map(String.init))])
        let absent = (0..<rows.rowCount).compactMap { rows.int($0, 0) }
        guard !absent.isEmpty else { return nil }
        let list = absent.map(String.init).joined(separator: ", ")
        return AdminError(.notFound, absent.count == 1 ? "no dead letter with id \(list)" : "no dead letters with ids \(list)")
    }

    /// Puts the dead letters `ids` back as fresh jobs. Every id must exist, or nothing changes and
    /// the error names the missing ones. Letters whose dedupe key is pending stay (`kept`).
    public static func retry(_ connection: PGConnection, ids: [Int], source: String) throws -> RetryResult {
        try connection.transaction {
            if let error = try missing(connection, ids: ids) { throw error }
            let result = try requeue(connection, ids: ids, filter: DeadLetterFilter())
            if !result.retried.isEmpty {
                try AdminLog.record(connection, action: "retry", ids: result.retried.map(\.deadLetterID),
                                    details: details(result, filter: nil), source: source)
            }
            return result
        }
    }

    /// Puts every dead letter matching `filter` back as a fresh job.
    public static func retry(_ connection: PGConnection, matching filter: DeadLetterFilter, source: String) throws -> RetryResult {
        let filter = try filter.validated()
        return try connection.transaction {
            try requireQueueKnown(connection, filter)
            let result = try requeue(connection, ids: nil, filter: filter)
            if !result.retried.isEmpty {
                try AdminLog.record(connection, action: "retry_matching", ids: result.retried.map(\.deadLetterID),
                                    details: details(result, filter: filter), source: source)
            }
            return result
        }
    }

    /// The ids a project filter chooses (nil: no project filter): herald.requeue_dead_letters and
    /// remove_dead_letters choose by queue and reason only, so a project's letters go to them by id.
    static func projectIDs(_ connection: PGConnection, _ filter: DeadLetterFilter) throws -> [Int]? {
        guard let project = filter.project else { return nil }
        let text = try connection.query(SQL.deadLetterIdsOfProject, [.text(project), filter.queue.map { .text($0) },
                                                                     filter.reasonPattern.map { .text($0) }])[0, 0] ?? "{}"
        return text.split(whereSeparator: { $0 == "{" || $0 == "}" || $0 == "," }).compactMap { Int($0) }
    }

    static func requeue(_ connection: PGConnection, ids: [Int]?, filter: DeadLetterFilter) throws -> RetryResult {
        let ids = try ids ?? projectIDs(connection, filter)
        let rows = try connection.query(SQL.requeueDeadLetters,
                                        [ids.map { .textArray($0.map(String.init)) }, filter.queue.map { .text($0) },
                                         filter.reasonPattern.map { .text($0) }])
        let retried = (0..<rows.rowCount).map { (deadLetterID: rows.int($0, 0) ?? 0, jobID: rows.int($0, 1) ?? 0) }
        let done = Set(retried.map(\.deadLetterID))
        var kept: [Int] = []
        if let ids {
            kept = ids.filter { !done.contains($0) }
        } else {
            // What still matches after the replay was kept (its dedupe key is pending) or locked by another session.
            let left = try connection.query(SQL.deadLettersLeft, [filter.queue.map { .text($0) }, filter.reasonPattern.map { .text($0) }])
            kept = (0..<left.rowCount).compactMap { left.int($0, 0) }
        }
        return RetryResult(retried: retried, kept: kept)
    }

    static func details(_ result: RetryResult, filter: DeadLetterFilter?) -> JSONValue {
        var object = JSONObject()
        if let filter { object["filter"] = filter.json }
        object["jobs"] = .array(result.retried.map { JSONValue($0.jobID) })
        if !result.kept.isEmpty { object["kept"] = .array(result.kept.map { JSONValue($0) }) }
        return .object(object)
    }

    /// Why a kept letter stayed: the pending job holding its dedupe key.
    public static func keptReason(_ connection: PGConnection, id: Int) throws(PostgresError) -> String {
        let row = try connection.query(SQL.deadLetterKeptBy, [.int(id)])
        guard row.rowCount == 1 else { return "dead letter \(id) is gone" }
        if let key = row[0, 0], let job = row[0, 1] {
            return "dead letter \(id) is kept: its dedupe_key \(JSONValue.quoted(key)) is held by pending job \(job); retry it once that job has finished"
        }
        return "dead letter \(id) is kept: another session is handling it; try again"
    }

    /// Deletes the dead letters `ids`. Every id must exist, or nothing changes.
    public static func discard(_ connection: PGConnection, ids: [Int], source: String) throws -> [Int] {
        try connection.transaction {
            if let error = try missing(connection, ids: ids) { throw error }
            let gone = try remove(connection, ids: ids, filter: DeadLetterFilter())
            if !gone.isEmpty {
                try AdminLog.record(connection, action: "discard", ids: gone, details: .object(JSONObject()), source: source)
            }
            return gone
        }
    }

    /// Deletes every dead letter matching `filter`.
    public static func discard(_ connection: PGConnection, matching filter: DeadLetterFilter, source: String) throws -> [Int] {
        let filter = try filter.validated()
        return try connection.transaction {
            try requireQueueKnown(connection, filter)
            let gone = try remove(connection, ids: nil, filter: filter)
            if !gone.isEmpty {
                try AdminLog.record(connection, action: "discard_matching", ids: gone,
                                    details: ["filter": filter.json], source: source)
            }
            return gone
        }
    }

    static func remove(_ connection: PGConnection, ids: [Int]?, filter: DeadLetterFilter) throws -> [Int] {
        let ids = try ids ?? projectIDs(connection, filter)
        let rows = try connection.query(SQL.removeDeadLetters,
                                        [ids.map { .textArray($0.map(String.init)) }, filter.queue.map { .text($0) },
                                         filter.reasonPattern.map { .text($0) }, filter.olderThanSeconds.map { .double($0) }])
        return (0..<rows.rowCount).compactMap { rows.int($0, 0) }.sorted()
    }
}
