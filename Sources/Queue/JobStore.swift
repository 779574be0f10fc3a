import FCM
import Foundation
import JSON
import Postgres

/// The states of `herald.jobs.state`, as its CHECK constraint lists them.
///
/// scheduled -> available -> running -> completed | discarded (or back to scheduled/available on
/// a retry or release); a dead job leaves herald.jobs for herald.dead_letters. `cancelled` is a
/// final state set from SQL for jobs that must not be sent; workers never claim it and retention
/// deletes it like the other finished states.
public enum JobState: String, Sendable, CaseIterable {
    /// Due later (run_at in the future): outside the claim index until a worker promotes it.
    case scheduled
    /// Due: claimable.
    case available
    /// Claimed under a lease by one worker.
    case running
    case completed
    case discarded
    case cancelled

    /// Finished: kept for the retention period, then deleted.
    public var isFinished: Bool { self == .completed || self == .discarded || self == .cancelled }
}

public enum JobKind: String, Sendable {
    case send
    case group
}

/// A job a worker holds under a lease.
public struct ClaimedJob: Sendable {
    public var id: Int
    public var queue: String
    public var kind: JobKind
    /// The job's `message` column as JSON text (a v1 Message, or a group operation).
    public var message: [UInt8]
    /// This attempt's number (1 for the first).
    public var attempt: Int
    public var maxAttempts: Int
    /// The message's token was pruned earlier: discard without a request.
    public var tokenPruned: Bool
    public var lastError: String?
    /// Seconds since 1970 of the job's created_at.
    public var createdAt: Double
    /// Seconds since 1970 of the job's run_at: when it was due.
    public var dueAt: Double
    /// For group operations: the group's notification_key and members as herald.device_groups has them.
    public var groupKey: String?
    public var groupMembers: [String]
    /// herald.jobs.validate_only: a dry run, FCM validates and delivers nothing.
    public var validateOnly: Bool
    /// The campaign the job belongs to (herald.campaigns), if any.
    public var campaignID: Int?

    public init(id: Int, queue: String = "default", kind: JobKind = .send, message: [UInt8], attempt: Int = 1,
                maxAttempts: Int = 25, tokenPruned: Bool = false, lastError: String? = nil, createdAt: Double = 0,
                dueAt: Double = 0, groupKey: String? = nil, groupMembers: [String] = [], validateOnly: Bool = false,
                campaignID: Int? = nil) {
        self.id = id; self.queue = queue; self.kind = kind; self.message = message; self.attempt = attempt
        self.maxAttempts = maxAttempts; self.tokenPruned = tokenPruned; self.lastError = lastError
        self.createdAt = createdAt; self.dueAt = dueAt; self.groupKey = groupKey; self.groupMembers = groupMembers
        self.validateOnly = validateOnly
        self.campaignID = campaignID
    }

    /// This claim's outcome: it settles this attempt and no later one.
    public func outcome(_ action: OutcomeAction) -> JobOutcome {
        JobOutcome(id: id, attempt: attempt, action)
    }
}

/// A device-group change FCM confirmed, applied to herald.device_groups with the job's outcome.
public struct GroupChange: Sendable, Equatable {
    public var operation: DeviceGroupOperation
    public var name: String
    public var key: String
    public var tokens: [String]
    public init(operation: DeviceGroupOperation, name: String, key: String, tokens: [String]) {
        self.operation = operation; self.name = name; self.key = key; self.tokens = tokens
    }
}

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
    /// FCM said the token is gone: herald.prune_token, job `discarded`.
    case pruned(token: String, reason: String)
    /// Put back unsent, the attempt not counted, due again after `delay` seconds.
    case released(delay: Double = 0)
    /// A quota answer (a device's, a topic's or the project's limit): try again no sooner than
    /// `delay` seconds from now. The attempt does not count against max_attempts while the job
    /// has been snoozed fewer than `cap` times (herald.jobs.snoozes); after that it does.
    case snoozed(error: String, delay: Double, cap: Int)

    /// The `a` of this outcome's row in record_outcomes.sql.
    var recordKind: StaticString {
        switch self {
        case .completed: return "complete"
        case .retry: return "retry"
        case .dead: return "dead"
        case .discarded: return "discard"
        case .pruned: return "prune"
        case .released: return "release"
        case .snoozed: return "snooze"
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
            JSONValue.writeString(JobStore.clean(text), into: &row)
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
        case .pruned(let token, let reason):
            field("err", reason)
            field("token", token)
        case .released(let seconds):
            delay(seconds)
        case .snoozed(let error, let seconds, let cap):
            delay(seconds)
            field("err", error)
            row.append(contentsOf: #","cap":"#.utf8)
            JSONValue.writeInteger(max(0, cap), into: &row)
        }
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

/// What one claim statement gave.
public struct Claim: Sendable {
    public var jobs: [ClaimedJob]
    /// A rate limit or max_in_flight held jobs back: in how many seconds they may go.
    public var heldBackFor: Double?
    public init(jobs: [ClaimedJob], heldBackFor: Double? = nil) { self.jobs = jobs; self.heldBackFor = heldBackFor }
}

/// What `promoteDueJobs` did: how many scheduled jobs became available, and when the next one is due.
public struct Promotion: Sendable, Equatable {
    public var promoted: Int
    /// In how many seconds the earliest scheduled job still ahead is due (nil: none is).
    public var nextDueIn: Double?
    public init(promoted: Int, nextDueIn: Double?) { self.promoted = promoted; self.nextDueIn = nextDueIn }
}

/// The job life cycle's SQL (the named statements in Sources/Queue/SQL): one statement claims a
/// batch, one records a batch. One JobStore per connection.
public final class JobStore: @unchecked Sendable {
    public let connection: PGConnection
    /// Who holds a lease (host:pid:random), stored in herald.jobs.locked_by.
    public let workerID: String
    /// Seconds finished jobs stay in herald.jobs; 0 deletes them when they finish.
    public let retention: Double

    /// The FCM project this worker sends for: claims wait while herald.sender_pauses holds it
    /// back (nil: no such check, e.g. the PostgreSQL ceiling benchmark).
    public var projectID: String?
    /// The project's rate, per second, shared by every pool of the project (0: none).
    public var projectRate: Double = 0
    /// The last claim took all it asked for, or a limit held jobs back: more are probably waiting.
    private var inBacklog = false

    public init(connection: PGConnection, workerID: String = JobStore.defaultWorkerID(), retention: Double = 86_400,
                projectID: String? = nil) {
        self.projectID = projectID
        self.connection = connection
        self.workerID = workerID
        self.retention = retention
    }

    /// `host:pid:random`: the random part keeps two containers that share a host name and a pid apart.
    public static func defaultWorkerID() -> String {
        "\(ProcessInfo.processInfo.hostName):\(getpid()):\(String(UInt32.random(in: 0...UInt32.max), radix: 16))"
    }

    /// A text[] parameter value (PostgreSQL array literal, every element quoted).
    public static func textArray(_ values: [String]) -> PGValue {
        let items = values.map { value -> String in
            "\"" + value.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") + "\""
        }
        return .text("{" + items.joined(separator: ",") + "}")
    }

    /// Claims up to `limit` available jobs (all queues when `queues` is empty) into `running`
    /// under a lease of `leaseSeconds`: each queue and campaign in turn, priority first within
    /// each, within every rate limit.
    public func claim(queues: [String], limit: Int, leaseSeconds: Double) throws(PostgresError) -> [ClaimedJob] {
        try claimBatch(queues: queues, limit: limit, leaseSeconds: leaseSeconds).jobs
    }

    /// `claim`, and whether a limit held jobs back (and for how long).
    public func claimBatch(queues: [String], limit: Int, leaseSeconds: Double) throws(PostgresError) -> Claim {
        var granted: Int?
        if let projectID, projectRate > 0, inBacklog {
            // The project's bucket is shared by every worker of the project: taking its tokens in a
            // transaction of their own keeps its row locked for that statement only, not for the
            // whole claim, so the workers' claims do not queue behind each other on it. Outside a
            // backlog the claim takes them itself, which saves a round trip on every claim of a
            // one-time code while claims rarely meet on the row.
            let tokens = try connection.query(SQL.takeProjectTokens, [.text(projectID), .double(projectRate), .int(limit)])
            let taken = tokens.int(0, try tokens.column("granted")) ?? 0
            guard taken > 0 else { return Claim(jobs: [], heldBackFor: tokens.double(0, try tokens.column("wait_seconds"))) }  // still a backlog
            granted = taken
        }
        let result = try connection.query(SQL.claimJobs, [queues.isEmpty ? nil : Self.textArray(queues), .int(limit),
                                                          .double(leaseSeconds), .text(workerID), projectID.map { .text($0) },
                                                          .double(projectRate), granted.map { .int($0) }])
        let id = try result.column("id"), queue = try result.column("queue"), kind = try result.column("kind")
        let message = try result.column("message"), attempt = try result.column("attempt")
        let maxAttempts = try result.column("max_attempts"), tokenPruned = try result.column("token_pruned")
        let lastError = try result.column("last_error"), createdAt = try result.column("created_at")
        let dueAt = try result.column("due_at"), groupKey = try result.column("group_key")
        let groupMembers = try result.column("group_members"), validateOnly = try result.column("validate_only")
        let campaignID = try result.column("campaign_id"), waitSeconds = try result.column("wait_seconds")
        var claim = Claim(jobs: [])
        claim.jobs.reserveCapacity(result.rowCount)
        for row in 0..<result.rowCount {
            guard let jobID = result.int(row, id) else {
                claim.heldBackFor = result.double(row, waitSeconds)
                continue
            }
            claim.jobs.append(ClaimedJob(
                id: jobID, queue: result[row, queue]!, kind: result.equals(row, kind, "group") ? .group : .send,
                message: result.bytes(row, message)!, attempt: result.int(row, attempt)!, maxAttempts: result.int(row, maxAttempts)!,
                tokenPruned: result.bool(row, tokenPruned) ?? false, lastError: result[row, lastError],
                createdAt: result.double(row, createdAt) ?? 0, dueAt: result.double(row, dueAt) ?? 0,
                groupKey: result[row, groupKey], groupMembers: Self.members(fromJSON: result[row, groupMembers]),
                validateOnly: result.bool(row, validateOnly) ?? false, campaignID: result.int(row, campaignID)))
        }
        claim.jobs.sort { $0.id < $1.id }
        inBacklog = claim.jobs.count >= limit || claim.heldBackFor != nil
        return claim
    }

    /// Makes up to `limit` scheduled jobs that are due available (earliest first) and reports
    /// when the next scheduled job is due.
    public func promoteDueJobs(limit: Int = 10_000) throws(PostgresError) -> Promotion {
        let result = try connection.query(SQL.promoteDueJobs, [.int(limit)])
        return Promotion(promoted: result.int(0, try result.column("promoted")) ?? 0,
                         nextDueIn: result.double(0, try result.column("next_due_in")))
    }

    /// The members of a device group from `array_to_json(members)::text` (none for NULL).
    static func members(fromJSON text: String?) -> [String] {
        guard let text, let items = (try? JSONValue.parse(text))?.arrayValue else { return [] }
        return items.compactMap(\.stringValue)
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

    /// Records a batch of outcomes: one statement for all of them, then the prune_token hook and
    /// device-group changes, in one transaction. An outcome applies only to the attempt it
    /// carries, and only while this worker still holds that job's lease; others are counted as
    /// stale (another worker holds the job now).
    @discardableResult
    public func record(_ outcomes: [JobOutcome], log: (String) -> Void = { _ in }) throws(PostgresError) -> RecordSummary {
        guard !outcomes.isEmpty else { return RecordSummary() }
        let rows = Self.recordRows(outcomes)
        var prunes: [JSONValue] = []
        var groups: [GroupChange] = []
        for outcome in outcomes {
            switch outcome.action {
            case .completed(_, let group?):
                groups.append(group)
            case .pruned(let token, let reason):
                var hook = JSONObject()
                hook["id"] = .number(String(outcome.id)); hook["token"] = .string(token); hook["err"] = .string(Self.clean(reason))
                prunes.append(.object(hook))
            default:
                break
            }
        }
        return try connection.transaction { () throws(PostgresError) -> RecordSummary in
            let result = try connection.query(SQL.recordOutcomes, [.utf8(rows), .text(workerID), .double(retention)])
            var summary = RecordSummary()
            summary.finished = result.int(0, try result.column("finished")) ?? 0
            summary.retried = result.int(0, try result.column("retried")) ?? 0
            summary.released = result.int(0, try result.column("released")) ?? 0
            summary.snoozed = result.int(0, try result.column("snoozed")) ?? 0
            summary.dead = result.int(0, try result.column("dead")) ?? 0
            summary.stale = outcomes.count - summary.finished - summary.retried - summary.released - summary.snoozed - summary.dead
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
            for change in groups { try apply(change) }
            return summary
        }
    }

    /// The `$1` of record_outcomes.sql: a JSON array with one object per outcome
    /// (`{"id":1,"att":1,"a":"complete","name":"..."}`), written straight into bytes because it
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
            let kind = outcome.action.recordKind
            rows.append(contentsOf: UnsafeBufferPointer(start: kind.utf8Start, count: kind.utf8CodeUnitCount))
            rows.append(UInt8(ascii: "\""))
            outcome.action.appendRecordFields(to: &rows)
            rows.append(UInt8(ascii: "}"))
        }
        rows.append(UInt8(ascii: "]"))
        return rows
    }

    /// Applies a confirmed device-group change to herald.device_groups (inside the caller's transaction).
    public func apply(_ change: GroupChange) throws(PostgresError) {
        switch change.operation {
        case .create, .add:
            try connection.query(SQL.addGroupMembers, [.text(change.name), .text(change.key), Self.textArray(change.tokens)])
        case .remove:
            try connection.query(SQL.removeGroupMembers, [.text(change.name), Self.textArray(change.tokens)])
            try connection.query(SQL.deleteEmptyGroup, [.text(change.name)])
        }
    }

    /// pg_try_advisory_lock key of the process that vacuums herald.jobs: "heraldv" in ASCII.
    public static let vacuumLockKey = 0x68_6572_616c_6476

    /// Whether this session holds (or now takes) the vacuum advisory lock.
    public func tryVacuumLock() throws(PostgresError) -> Bool {
        try connection.query(SQL.tryMaintenanceLock, [.int(Self.vacuumLockKey)]).bool(0, 0) ?? false
    }

    /// herald.jobs' live and dead row versions from PostgreSQL's statistics, and whether this
    /// role may VACUUM it.
    public func jobsRowCounts() throws(PostgresError) -> (live: Int, dead: Int, mayVacuum: Bool) {
        let result = try connection.query(SQL.jobsRowCounts)
        return (result.int(0, try result.column("live")) ?? 0, result.int(0, try result.column("dead")) ?? 0,
                result.bool(0, try result.column("may_vacuum")) ?? false)
    }

    /// VACUUMs herald.jobs (not inside a transaction).
    public func vacuumJobs() throws(PostgresError) {
        try connection.execute(SQL.vacuumJobs)
    }

    /// Takes back jobs whose lease ran out (their worker died): they become available again and
    /// are sent again. Returns how many.
    @discardableResult
    public func rescueExpiredLeases() throws(PostgresError) -> Int {
        try connection.query(SQL.rescueExpiredLeases).affectedRows
    }

    /// pg_try_advisory_lock key of the maintenance leader: "heraldm" in ASCII.
    public static let maintenanceLockKey = 0x68_6572_616c_646d

    /// Tries to become the maintenance leader (lease rescue, retention) for as long as this
    /// connection lives; true when this connection holds the lock.
    public func tryMaintenanceLock() throws(PostgresError) -> Bool {
        let result = try connection.query(SQL.tryMaintenanceLock, [.int(Self.maintenanceLockKey)])
        return result.bool(0, try result.column("leader")) ?? false
    }

    /// Holds back every worker of `projectID` for `seconds` (a project or topic quota answer).
    public func pauseProject(_ projectID: String, seconds: Double, reason: String) throws(PostgresError) {
        try connection.query(SQL.pauseProject, [.text(projectID), .double(seconds), .text(Self.clean(reason))])
    }

    /// Spreads the retries due before a project pause ends (`until`, seconds since 1970) over the
    /// `window` seconds after it (at most `limit` jobs). Returns how many moved.
    @discardableResult
    public func spreadHeldRetries(until: Double, window: Double, limit: Int = 50_000) throws(PostgresError) -> Int {
        try connection.query(SQL.spreadHeldRetries, [.double(until), .double(max(0, window)), .int(limit)]).affectedRows
    }

    /// The shared adapted-rate state of `projectID` (nil members: never lowered) and until when
    /// it is paused (nil: it is not).
    public func projectRateState(_ projectID: String) throws(PostgresError) -> (adapted: Double?, at: Double?, pausedUntil: Double?) {
        let result = try connection.query(SQL.projectRate, [.text(projectID)])
        return (result.double(0, try result.column("adapted_per_second")), result.double(0, try result.column("adapted_at")),
                result.double(0, try result.column("paused_until")))
    }

    /// Sets the adapted rate of `projectID` to `perSecond` unless another worker lowered it since
    /// `since` (the adapted_at last read; nil: never). Returns the new state, nil when another
    /// worker's lowering came first.
    public func lowerProjectRate(_ projectID: String, to perSecond: Double, since: Double?, ceiling: Double)
        throws(PostgresError) -> (adapted: Double, at: Double)? {
        let result = try connection.query(SQL.lowerProjectRate, [.text(projectID), .double(perSecond), since.map { .double($0) },
                                                                 .double(ceiling)])
        guard result.rowCount > 0, let adapted = result.double(0, try result.column("adapted_per_second")),
              let at = result.double(0, try result.column("adapted_at")) else { return nil }
        return (adapted, at)
    }

    /// Extends the leases of jobs this worker still holds (a heartbeat for requests that take
    /// long, so a healthy worker's job is never taken back). Returns how many were extended.
    @discardableResult
    public func extendLeases(ids: [Int], leaseSeconds: Double) throws(PostgresError) -> Int {
        guard !ids.isEmpty else { return 0 }
        return try connection.query(SQL.extendLeases, [.text("{" + ids.map(String.init).joined(separator: ",") + "}"),
                                                       .text(workerID), .double(leaseSeconds)]).affectedRows
    }

    /// Deletes up to `batch` finished jobs older than the retention period. Returns how many.
    @discardableResult
    public func deleteFinished(batch: Int = 10_000) throws(PostgresError) -> Int {
        try connection.query(SQL.deleteFinishedJobs, [.double(retention), .int(batch)]).affectedRows
    }

    /// Marks finished the running campaigns with nothing left to send. Returns how many.
    @discardableResult
    public func finishCampaigns() throws(PostgresError) -> Int {
        try connection.query(SQL.finishCampaigns).affectedRows
    }

    /// Whether the queues (all when empty) hold a job not yet finished (scheduled, available or running).
    public func hasPendingWork(queues: [String]) throws(PostgresError) -> Bool {
        let result = try connection.query(SQL.hasPendingWork, [queues.isEmpty ? nil : Self.textArray(queues)])
        return result.bool(0, try result.column("pending")) ?? false
    }
}
