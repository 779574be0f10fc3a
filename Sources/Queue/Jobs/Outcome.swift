import JSON
import Postgres

/// What becomes of a claimed job.
public enum OutcomeAction: Sendable, Equatable {
    /// Delivered: `completed`, with the name FCM returned.
    case completed(messageName: String?, group: GroupChange? = nil)
    /// Try again no sooner than `delay` seconds from now; the attempt counts.
    case retry(error: String, delay: Double)
    /// Move to herald.dead_letters with `reason`.
    case dead(reason: String)
    /// `discarded` with `reason` (e.g. its token was pruned before).
    case discarded(reason: String)
    /// FCM (or APNs) said the token is gone: herald.prune_token, job `discarded`.
    /// `invalidSince` (seconds since 1970): APNs's timestamp of when the token stopped being
    /// valid; a token registered again after it is not pruned (`OutcomeRecorder.record`).
    case pruned(token: String, reason: String, invalidSince: Double? = nil)
    /// Put back unsent, the attempt not counted, due again after `delay` seconds.
    case released(delay: Double = 0)
    /// A quota answer (a device's, a topic's or the FCM project's limit): try again no sooner than
    /// `delay` seconds from now. The attempt does not count against max_attempts while the job
    /// has been snoozed fewer than `cap` times (herald.jobs.snoozes); after that it does.
    /// `backoff`: the delay grows with the job's own durable count of quota answers, whichever
    /// process claims it next: at least `first` times 2^snoozes (the snoozes before this one),
    /// at most `most` (both with the jitter drawn in); nil: `delay` alone.
    case snoozed(error: String, delay: Double, cap: Int, backoff: Backoff? = nil)

    /// Its word: the `a` of its row in record_outcomes.sql, its metrics label and log field.
    public var outcome: MessageOutcome {
        switch self {
        case .completed: .completed
        case .retry: .retried
        case .dead: .dead
        case .discarded: .discarded
        case .pruned: .pruned
        case .released: .released
        case .snoozed: .snoozed
        }
    }

    /// Appends this outcome's fields (after `id`, `att` and `a`) to a record_outcomes row.
    func appendRecordFields(to row: inout [UInt8]) {
        func field(_ key: StaticString, _ text: String) {
            row.append(UInt8(ascii: ","))
            row.append(UInt8(ascii: "\""))
            row.append(contentsOf: UnsafeBufferPointer(start: key.utf8Start, count: key.utf8CodeUnitCount))
            row.append(UInt8(ascii: "\""))
            row.append(UInt8(ascii: ":"))
            JSONValue.writeString(OutcomeRecorder.clean(text), into: &row)
        }
        func delay(_ seconds: Double) {
            row.append(contentsOf: #","delay":"#.utf8)
            row.append(contentsOf: String(max(0, seconds)).utf8)
        }
        switch self {
        case .completed(let name, _):
            if let name { field("name", name) }
        case .retry(let error, let seconds):
            delay(seconds)
            field("err", error)
        case .dead(let reason), .discarded(let reason):
            field("err", reason)
        case .pruned(let token, let reason, _):
            field("err", reason)
            field("token", token)
        case .released(let seconds):
            delay(seconds)
        case .snoozed(let error, let seconds, let cap, let backoff):
            delay(seconds)
            field("err", error)
            row.append(contentsOf: #","cap":"#.utf8)
            JSONValue.writeInteger(max(0, cap), into: &row)
            if let backoff, backoff.first.isFinite, backoff.most.isFinite, backoff.first > 0 {
                row.append(contentsOf: #","grow":"#.utf8)
                row.append(contentsOf: String(backoff.first).utf8)
                row.append(contentsOf: #","most":"#.utf8)
                row.append(contentsOf: String(max(backoff.first, backoff.most)).utf8)
            }
        }
    }
}

/// A snooze's delay that grows with the job's durable count of quota answers
/// (record_outcomes.sql): `first` for a job never snoozed, doubling with each snooze it had, up
/// to `most`.
public struct Backoff: Sendable, Equatable {
    public var first: Double
    public var most: Double
    public init(first: Double, most: Double) {
        self.first = first
        self.most = most
    }
}

/// What became of one claimed job: the attempt it settles travels with it, so an outcome that
/// arrives late never settles a later claim of the same job.
public struct JobOutcome: Sendable, Equatable {
    public var id: Int
    public var attempt: Int
    public var action: OutcomeAction

    public init(id: Int, attempt: Int, _ action: OutcomeAction) {
        self.id = id
        self.attempt = attempt
        self.action = action
    }
}

public struct RecordSummary: Sendable, Equatable {
    public var finished = 0
    public var retried = 0
    public var released = 0
    public var snoozed = 0
    public var dead = 0
    /// Outcomes for jobs this worker no longer held (its lease ran out and another took it).
    public var stale = 0
    public init() {}
}

/// The outcome recorder: one statement for a batch of outcomes (record_outcomes.sql), then the
/// prune_token hook and the device groups' changes. One per connection (`JobStore.recorder`).
public final class OutcomeRecorder: @unchecked Sendable {
    let connection: PGConnection
    /// Whose leases the outcomes settle (JobStore.workerID).
    public let workerID: String
    /// Seconds finished jobs stay in herald.jobs; 0 deletes them when they finish.
    public let retention: Double

    init(connection: PGConnection, workerID: String, retention: Double) {
        self.connection = connection
        self.workerID = workerID
        self.retention = retention
    }

    /// Records a batch of outcomes: one statement for all of them, then the prune_token hook and
    /// device-group changes, in one transaction. An outcome applies only to the attempt it
    /// carries, and only while this worker still holds that job's lease; others are counted as
    /// stale (another worker holds the job now).
    @discardableResult
    public func record(_ outcomes: [JobOutcome], log: (String) -> Void = { _ in }) throws(PostgresError) -> RecordSummary {
        guard !outcomes.isEmpty else { return RecordSummary() }
        let outcomes = try keepingRegisteredAgain(outcomes)
        let rows = Self.recordRows(outcomes)
        var prunes: [JSONValue] = []
        var groups: [GroupChange] = []
        for outcome in outcomes {
            switch outcome.action {
            case .completed(_, let group?):
                groups.append(group)
            case .pruned(let token, let reason, _):
                var hook = JSONObject()
                hook["id"] = .number(String(outcome.id)); hook["token"] = .string(token); hook["err"] = .string(Self.clean(reason))
                prunes.append(.object(hook))
            default:
                break
            }
        }
        func summarize(_ result: PGResult) throws(PostgresError) -> RecordSummary {
            var summary = RecordSummary()
            summary.finished = result.int(0, try result.column("finished")) ?? 0
            summary.retried = result.int(0, try result.column("retried")) ?? 0
            summary.released = result.int(0, try result.column("released")) ?? 0
            summary.snoozed = result.int(0, try result.column("snoozed")) ?? 0
            summary.dead = result.int(0, try result.column("dead")) ?? 0
            summary.stale = outcomes.count - summary.finished - summary.retried - summary.released - summary.snoozed - summary.dead
            return summary
        }
        if prunes.isEmpty && groups.isEmpty {
            // One statement is a transaction of its own: no BEGIN and COMMIT round trips around
            // it, which at a trickle of a few jobs per batch cost as much as the statement.
            return try summarize(try connection.query(SQL.recordOutcomes, [.utf8(rows), .text(workerID), .double(retention)]))
        }
        return try connection.transaction { () throws(PostgresError) -> RecordSummary in
            let summary = try summarize(try connection.query(SQL.recordOutcomes, [.utf8(rows), .text(workerID), .double(retention)]))
            if !prunes.isEmpty {
                // The hook may be an application's own function; its failure must not lose the outcomes.
                do {
                    try connection.savepoint("prune_hook") { () throws(PostgresError) in
                        _ = try connection.query(SQL.callPruneHook, [.text(JSONValue.array(prunes).serialized)])
                    }
                } catch {
                    log("herald.prune_token failed (the tokens are still recorded in herald.pruned_tokens): \(error)")
                }
            }
            for change in groups { try Self.apply(change, on: connection) }
            return summary
        }
    }

    /// APNs's 410s carry when the token stopped being valid: a token registered again after that
    /// (herald.device_tokens) is not pruned; its job is discarded saying so.
    func keepingRegisteredAgain(_ outcomes: [JobOutcome]) throws(PostgresError) -> [JobOutcome] {
        var asked: [JSONValue] = []
        for outcome in outcomes {
            guard case .pruned(let token, _, let since?) = outcome.action else { continue }
            asked.append(["token": .string(token), "since": .number(String(since))])
        }
        guard !asked.isEmpty else { return outcomes }
        let result = try connection.query(SQL.apnsTokensRegisteredAfter, [.text(JSONValue.array(asked).serialized)])
        let again = Set((0..<result.rowCount).compactMap { result[$0, 0] })
        guard !again.isEmpty else { return outcomes }
        return outcomes.map { outcome in
            guard case .pruned(let token, let reason, _?) = outcome.action, again.contains(token) else { return outcome }
            var kept = outcome
            kept.action = .discarded(reason: reason + "; the token is not pruned: it was registered again after APNs's timestamp")
            return kept
        }
    }

    /// The `$1` of record_outcomes.sql: a JSON array with one object per outcome
    /// (`{"id":1,"att":1,"a":"completed","name":"..."}`, `a` an `MessageOutcome`), written straight into bytes because it
    /// runs for every job.
    static func recordRows(_ outcomes: [JobOutcome]) -> [UInt8] {
        var rows: [UInt8] = []
        rows.reserveCapacity(2 + outcomes.count * 96)
        rows.append(UInt8(ascii: "["))
        for (index, outcome) in outcomes.enumerated() {
            if index > 0 { rows.append(UInt8(ascii: ",")) }
            rows.append(contentsOf: #"{"id":"#.utf8)
            JSONValue.writeInteger(outcome.id, into: &rows)
            rows.append(contentsOf: #","att":"#.utf8)
            JSONValue.writeInteger(outcome.attempt, into: &rows)
            rows.append(contentsOf: #","a":""#.utf8)
            rows.append(contentsOf: outcome.action.outcome.rawValue.utf8)
            rows.append(UInt8(ascii: "\""))
            outcome.action.appendRecordFields(to: &rows)
            rows.append(UInt8(ascii: "}"))
        }
        rows.append(UInt8(ascii: "]"))
        return rows
    }

    /// Applies a confirmed device-group change to herald.device_groups (inside the caller's transaction).
    public static func apply(_ change: GroupChange, on connection: PGConnection) throws(PostgresError) {
        switch change.operation {
        case .create, .add:
            try connection.query(SQL.addGroupMembers, [.text(change.name), .text(change.key), .textArray(change.tokens)])
        case .remove:
            try connection.query(SQL.removeGroupMembers, [.text(change.name), .textArray(change.tokens)])
            try connection.query(SQL.deleteEmptyGroup, [.text(change.name)])
        }
    }

    /// An error text as PostgreSQL can store it: no NUL (jsonb and text refuse it), no other
    /// control characters but newline and tab, at most 2,000 characters.
    public static func clean(_ text: String) -> String {
        // Nearly every text is already fine (message names, FCM's messages): check bytes first.
        var copy = text
        let storable = copy.withUTF8 { bytes in
            guard bytes.count <= 2000, let base = bytes.baseAddress else { return bytes.count <= 2000 }
            var index = 0
            while index < bytes.count {
                // Eight bytes at a time: a word without a byte below 0x20 or 0x7F needs no look.
                if index + 8 <= bytes.count, !mayHoldControl(UnsafeRawPointer(base + index).loadUnaligned(as: UInt64.self)) {
                    index += 8
                    continue
                }
                for byte in bytes[index..<min(index + 8, bytes.count)] where (byte < 0x20 && byte != 0x0A && byte != 0x09) || byte == 0x7F {
                    return false
                }
                index += 8
            }
            return true
        }
        if storable { return text }
        var scalars = String.UnicodeScalarView()
        for scalar in text.unicodeScalars.prefix(2000) {
            if scalar.value < 0x20 && scalar != "\n" && scalar != "\t" { scalars.append(" ") }
            else if scalar.value == 0x7F { scalars.append(" ") }
            else { scalars.append(scalar) }
        }
        return String(scalars)
    }

    /// Whether one of the eight bytes of `word` may be below 0x20 or be 0x7F (false: none is).
    @inline(__always) static func mayHoldControl(_ word: UInt64) -> Bool {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let highs: UInt64 = 0x8080_8080_8080_8080
        let delete = word ^ (ones &* 0x7F)
        return ((word &- ones &* 0x20) & ~word & highs) | ((delete &- ones) & ~delete & highs) != 0
    }
}
