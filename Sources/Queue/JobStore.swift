import Foundation
import JSON
import Postgres

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
    /// Seconds since 1970 of the job's run_at when claimed: when it became due (for the
    /// delivery-latency metric). 0 when unknown.
    public var runAt: Double
    /// For group operations: the group's notification_key and members as herald.device_groups has them.
    public var groupKey: String?
    public var groupMembers: [String]

    public init(id: Int, queue: String = "default", kind: JobKind = .send, message: [UInt8], attempt: Int = 1,
                maxAttempts: Int = 25, tokenPruned: Bool = false, lastError: String? = nil, createdAt: Double = 0,
                groupKey: String? = nil, groupMembers: [String] = [], runAt: Double = 0) {
        self.id = id; self.queue = queue; self.kind = kind; self.message = message; self.attempt = attempt
        self.maxAttempts = maxAttempts; self.tokenPruned = tokenPruned; self.lastError = lastError
        self.createdAt = createdAt; self.groupKey = groupKey; self.groupMembers = groupMembers; self.runAt = runAt
    }
}

/// A device-group change FCM confirmed, applied to herald.device_groups with the job's outcome.
public struct GroupChange: Sendable, Equatable {
    public var operation: String   // create, add, remove
    public var name: String
    public var key: String
    public var tokens: [String]
    public init(operation: String, name: String, key: String, tokens: [String]) {
        self.operation = operation; self.name = name; self.key = key; self.tokens = tokens
    }
}

/// What became of one claimed job.
public enum JobOutcome: Sendable, Equatable {
    /// Delivered: `completed`, with the name FCM returned.
    case completed(id: Int, messageName: String?, group: GroupChange? = nil)
    /// Try again no sooner than `delay` seconds from now; the attempt counts.
    case retry(id: Int, error: String, delay: Double)
    /// Move to herald.dead_letters with `reason`.
    case dead(id: Int, reason: String)
    /// `discarded` with `reason` (e.g. its token was pruned before).
    case discarded(id: Int, reason: String)
    /// FCM said the token is gone: herald.prune_token, job `discarded`.
    case pruned(id: Int, token: String, reason: String)
    /// Put back unsent, the attempt not counted, available again after `delay` seconds.
    case released(id: Int, delay: Double = 0)

    public var id: Int {
        switch self {
        case .completed(let id, _, _), .retry(let id, _, _), .dead(let id, _), .discarded(let id, _),
             .pruned(let id, _, _), .released(let id, _):
            return id
        }
    }
}

public struct RecordSummary: Sendable, Equatable {
    public var finished = 0
    public var retried = 0
    public var released = 0
    public var dead = 0
    /// Outcomes for jobs this worker no longer held (its lease ran out and another took it).
    public var stale = 0
    public init() {}
}

/// The SQL of the claim path and of recording outcomes: one statement claims a batch, one
/// statement records a batch. One JobStore per connection.
public final class JobStore: @unchecked Sendable {
    public let connection: PGConnection
    /// Who holds a lease (host:pid:random), stored in herald.jobs.locked_by.
    public let workerID: String
    /// Seconds finished jobs stay in herald.jobs; 0 deletes them when they finish.
    public let retention: Double

    /// The FCM project this worker sends for: claims wait while herald.sender_pauses holds it
    /// back (nil: no such check, e.g. the PostgreSQL ceiling benchmark).
    public var projectID: String?

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

    static let claimSQL = """
        WITH picked AS (
            SELECT id FROM herald.jobs
            WHERE state = 'available' AND run_at <= now() AND ($1::text[] IS NULL OR queue = ANY ($1::text[]))
              AND ($5::text IS NULL OR NOT EXISTS (
                  SELECT 1 FROM herald.sender_pauses p WHERE p.project_id = $5::text AND p.paused_until > now()))
            ORDER BY priority, run_at, id
            LIMIT $2
            FOR UPDATE SKIP LOCKED
        )
        UPDATE herald.jobs j
        SET state = 'running', attempts = j.attempts + 1,
            locked_until = now() + make_interval(secs => $3::float8), locked_by = $4
        FROM picked WHERE j.id = picked.id
        RETURNING j.id, j.queue, j.kind, j.message::text, j.attempts, j.max_attempts,
            (j.kind = 'send' AND j.message ? 'token'
                AND EXISTS (SELECT 1 FROM herald.pruned_tokens p WHERE p.token = j.message->>'token')),
            j.last_error, extract(epoch FROM j.created_at)::float8,
            (SELECT g.notification_key FROM herald.device_groups g
                WHERE j.kind = 'group' AND g.name = j.message->>'notification_key_name'),
            (SELECT array_to_json(g.members)::text FROM herald.device_groups g
                WHERE j.kind = 'group' AND g.name = j.message->>'notification_key_name'),
            extract(epoch FROM j.run_at)::float8
        """

    /// Claims up to `limit` available jobs (all queues when `queues` is empty), by priority then
    /// run_at, into `running` under a lease of `leaseSeconds`.
    public func claim(queues: [String], limit: Int, leaseSeconds: Double) throws(PostgresError) -> [ClaimedJob] {
        let result = try connection.query(Self.claimSQL, [queues.isEmpty ? nil : Self.textArray(queues), .int(limit),
                                                          .double(leaseSeconds), .text(workerID), projectID.map { .text($0) }])
        var jobs: [ClaimedJob] = []
        jobs.reserveCapacity(result.rowCount)
        for row in 0..<result.rowCount {
            jobs.append(ClaimedJob(
                id: result.int(row, 0)!, queue: result[row, 1]!, kind: JobKind(rawValue: result[row, 2]!) ?? .send,
                message: result.bytes(row, 3)!, attempt: result.int(row, 4)!, maxAttempts: result.int(row, 5)!,
                tokenPruned: result.bool(row, 6) ?? false, lastError: result[row, 7],
                createdAt: result.double(row, 8) ?? 0, groupKey: result[row, 9], groupMembers: Self.members(fromJSON: result[row, 10]),
                runAt: result.double(row, 11) ?? 0))
        }
        return jobs.sorted { $0.id < $1.id }
    }

    /// The members of a device group from `array_to_json(members)::text` (none for NULL).
    static func members(fromJSON text: String?) -> [String] {
        guard let text, let items = (try? JSONValue.parse(text))?.arrayValue else { return [] }
        return items.compactMap(\.stringValue)
    }

    static let recordSQL = """
        WITH input AS (
            SELECT * FROM jsonb_to_recordset($1::jsonb) AS x(id bigint, a text, name text, err text, delay float8, token text, att int)
        ),
        finished AS (
            UPDATE herald.jobs j
            SET state = CASE WHEN i.a = 'complete' THEN 'completed' ELSE 'discarded' END,
                finished_at = now(), fcm_message_name = i.name, locked_until = NULL,
                last_error = coalesce(i.err, j.last_error),
                errors = CASE WHEN i.err IS NULL THEN j.errors
                         ELSE j.errors || jsonb_build_array(jsonb_build_object('at', now(), 'attempt', j.attempts, 'error', i.err)) END
            FROM input i
            WHERE j.id = i.id AND i.a IN ('complete', 'discard', 'prune') AND j.state = 'running' AND j.locked_by = $2 AND (i.att IS NULL OR j.attempts = i.att) AND $3::float8 > 0
            RETURNING j.id
        ),
        removed AS (
            DELETE FROM herald.jobs j USING input i
            WHERE j.id = i.id AND i.a IN ('complete', 'discard', 'prune') AND j.state = 'running' AND j.locked_by = $2 AND (i.att IS NULL OR j.attempts = i.att) AND $3::float8 <= 0
            RETURNING j.id
        ),
        retried AS (
            UPDATE herald.jobs j
            SET state = 'available', run_at = now() + make_interval(secs => i.delay), locked_until = NULL, locked_by = NULL,
                last_error = i.err,
                errors = j.errors || jsonb_build_array(jsonb_build_object('at', now(), 'attempt', j.attempts, 'error', i.err))
            FROM input i
            WHERE j.id = i.id AND i.a = 'retry' AND j.state = 'running' AND j.locked_by = $2 AND (i.att IS NULL OR j.attempts = i.att)
            RETURNING j.id
        ),
        released AS (
            UPDATE herald.jobs j
            SET state = 'available', attempts = greatest(j.attempts - 1, 0), locked_until = NULL, locked_by = NULL,
                run_at = CASE WHEN i.delay > 0 THEN now() + make_interval(secs => i.delay) ELSE j.run_at END
            FROM input i
            WHERE j.id = i.id AND i.a = 'release' AND j.state = 'running' AND j.locked_by = $2 AND (i.att IS NULL OR j.attempts = i.att)
            RETURNING j.id
        ),
        dead AS (
            DELETE FROM herald.jobs j USING input i
            WHERE j.id = i.id AND i.a = 'dead' AND j.state = 'running' AND j.locked_by = $2 AND (i.att IS NULL OR j.attempts = i.att)
            RETURNING j.id, j.queue, j.kind, j.priority, j.message, j.attempts, j.max_attempts, j.dedupe_key,
                j.created_at, i.err,
                j.errors || jsonb_build_array(jsonb_build_object('at', now(), 'attempt', j.attempts, 'error', i.err)) AS errors
        ),
        lettered AS (
            INSERT INTO herald.dead_letters (job_id, queue, kind, priority, message, attempts, max_attempts, dedupe_key,
                                             reason, errors, created_at)
            SELECT id, queue, kind, priority, message, attempts, max_attempts, dedupe_key, err, errors, created_at FROM dead
            RETURNING 1
        ),
        ledger AS (
            INSERT INTO herald.pruned_tokens (token, reason, job_id)
            SELECT token, err, id FROM input WHERE a = 'prune' AND token IS NOT NULL
            ON CONFLICT (token) DO NOTHING
            RETURNING 1
        )
        SELECT (SELECT count(*) FROM finished) + (SELECT count(*) FROM removed), (SELECT count(*) FROM retried),
               (SELECT count(*) FROM released), (SELECT count(*) FROM lettered), (SELECT count(*) FROM ledger)
        """

    /// An error text as PostgreSQL can store it: no NUL (jsonb and text refuse it), no other
    /// control characters but newline and tab, at most 2,000 characters.
    public static func clean(_ text: String) -> String {
        // Nearly every text is already fine (message names, FCM's messages): check bytes first.
        let bytes = text.utf8
        if bytes.count <= 2000 && !bytes.contains(where: { ($0 < 0x20 && $0 != 0x0A && $0 != 0x09) || $0 == 0x7F }) {
            return text
        }
        var scalars = String.UnicodeScalarView()
        for scalar in text.unicodeScalars.prefix(2000) {
            if scalar.value < 0x20 && scalar != "\n" && scalar != "\t" { scalars.append(" ") }
            else if scalar.value == 0x7F { scalars.append(" ") }
            else { scalars.append(scalar) }
        }
        return String(scalars)
    }

    static let pruneHookSQL = """
        SELECT count(herald.prune_token(x.token, x.err, x.id))
        FROM jsonb_to_recordset($1::jsonb) AS x(id bigint, token text, err text)
        """

    /// Records a batch of outcomes: one statement for all of them, then the prune_token hook and
    /// device-group changes, in one transaction. Outcomes for jobs whose lease this worker lost
    /// are ignored (another worker holds them now).
    @discardableResult
    /// `attempts` (job id to the attempt that was claimed) makes an outcome apply only to that
    /// claim, not to a later claim of the same job by this worker.
    public func record(_ outcomes: [JobOutcome], attempts: [Int: Int] = [:], log: (String) -> Void = { _ in }) throws(PostgresError) -> RecordSummary {
        guard !outcomes.isEmpty else { return RecordSummary() }
        // The rows as JSON text, written directly: this runs for every job.
        var rows = "["
        rows.reserveCapacity(outcomes.count * 72)
        var prunes: [JSONValue] = []
        var groups: [GroupChange] = []
        func field(_ key: String, _ text: String) { rows += ",\"" + key + "\":" + JSONValue.quoted(Self.clean(text)) }
        for (index, outcome) in outcomes.enumerated() {
            if index > 0 { rows += "," }
            rows += "{\"id\":" + String(outcome.id)
            if let attempt = attempts[outcome.id] { rows += ",\"att\":" + String(attempt) }
            switch outcome {
            case .completed(_, let name, let group):
                rows += ",\"a\":\"complete\""
                if let name { field("name", name) }
                if let group { groups.append(group) }
            case .retry(_, let error, let delay):
                rows += ",\"a\":\"retry\",\"delay\":" + String(max(0, delay))
                field("err", error)
            case .dead(_, let reason):
                rows += ",\"a\":\"dead\""
                field("err", reason)
            case .discarded(_, let reason):
                rows += ",\"a\":\"discard\""
                field("err", reason)
            case .pruned(let id, let token, let reason):
                rows += ",\"a\":\"prune\""
                field("err", reason)
                field("token", token)
                var hook = JSONObject()
                hook["id"] = .number(String(id)); hook["token"] = .string(token); hook["err"] = .string(Self.clean(reason))
                prunes.append(.object(hook))
            case .released(_, let delay):
                rows += ",\"a\":\"release\",\"delay\":" + String(max(0, delay))
            }
            rows += "}"
        }
        rows += "]"
        var summary = RecordSummary()
        try connection.execute("BEGIN")
        do {
            let result = try connection.query(Self.recordSQL, [.text(rows), .text(workerID),
                                                               .double(retention)])
            summary.finished = result.int(0, 0) ?? 0
            summary.retried = result.int(0, 1) ?? 0
            summary.released = result.int(0, 2) ?? 0
            summary.dead = result.int(0, 3) ?? 0
            summary.stale = outcomes.count - summary.finished - summary.retried - summary.released - summary.dead
            if !prunes.isEmpty {
                // The hook may be an application's own function; its failure must not lose the outcomes.
                try connection.execute("SAVEPOINT prune_hook")
                do {
                    try connection.query(Self.pruneHookSQL, [.text(JSONValue.array(prunes).serialized)])
                    try connection.execute("RELEASE SAVEPOINT prune_hook")
                } catch {
                    try connection.execute("ROLLBACK TO SAVEPOINT prune_hook")
                    log("herald.prune_token failed (the tokens are still recorded in herald.pruned_tokens): \(error)")
                }
            }
            for change in groups { try apply(change) }
            try connection.execute("COMMIT")
        } catch {
            try? connection.execute("ROLLBACK")
            throw error
        }
        return summary
    }

    /// Applies a confirmed device-group change to herald.device_groups (inside the caller's transaction).
    public func apply(_ change: GroupChange) throws(PostgresError) {
        switch change.operation {
        case "create", "add":
            try connection.query("""
                INSERT INTO herald.device_groups (name, notification_key, members, updated_at)
                VALUES ($1, $2, $3::text[], now())
                ON CONFLICT (name) DO UPDATE SET notification_key = excluded.notification_key,
                    members = ARRAY(SELECT DISTINCT m FROM unnest(herald.device_groups.members || excluded.members) AS m ORDER BY m),
                    updated_at = now()
                """, [.text(change.name), .text(change.key), Self.textArray(change.tokens)])
        default:
            try connection.query("""
                UPDATE herald.device_groups
                SET members = ARRAY(SELECT m FROM unnest(members) AS m WHERE m <> ALL ($2::text[]) ORDER BY m), updated_at = now()
                WHERE name = $1
                """, [.text(change.name), Self.textArray(change.tokens)])
            try connection.query("DELETE FROM herald.device_groups WHERE name = $1 AND cardinality(members) = 0",
                                 [.text(change.name)])
        }
    }

    /// Takes back jobs whose lease ran out (their worker died): they become available again and
    /// are sent again. Returns how many.
    @discardableResult
    public func rescueExpiredLeases() throws(PostgresError) -> Int {
        let result = try connection.query("""
            UPDATE herald.jobs
            SET state = 'available', locked_until = NULL, locked_by = NULL,
                last_error = 'lease expired: the worker that claimed attempt ' || attempts || ' stopped before recording it'
            WHERE state = 'running' AND locked_until < now()
            """)
        return result.affectedRows
    }

    /// pg_try_advisory_lock key of the maintenance leader: "heraldm" in ASCII.
    public static let maintenanceLockKey = 0x68_6572_616c_646d

    /// Tries to become the maintenance leader (lease rescue, retention) for as long as this
    /// connection lives; true when this connection holds the lock.
    public func tryMaintenanceLock() throws(PostgresError) -> Bool {
        try connection.query("SELECT pg_try_advisory_lock($1)", [.int(Self.maintenanceLockKey)]).bool(0, 0) ?? false
    }

    /// Holds back every worker of `projectID` for `seconds` (a project or topic quota answer).
    public func pauseProject(_ projectID: String, seconds: Double, reason: String) throws(PostgresError) {
        try connection.query("""
            INSERT INTO herald.sender_pauses (project_id, paused_until, reason)
            VALUES ($1, now() + make_interval(secs => $2::float8), $3)
            ON CONFLICT (project_id) DO UPDATE
            SET paused_until = greatest(herald.sender_pauses.paused_until, excluded.paused_until), reason = excluded.reason
            """, [.text(projectID), .double(seconds), .text(Self.clean(reason))])
    }

    /// Extends the leases of jobs this worker still holds (a heartbeat for requests that take
    /// long, so a healthy worker's job is never taken back). Returns how many were extended.
    @discardableResult
    public func extendLeases(ids: [Int], leaseSeconds: Double) throws(PostgresError) -> Int {
        guard !ids.isEmpty else { return 0 }
        let result = try connection.query("""
            UPDATE herald.jobs SET locked_until = now() + make_interval(secs => $3::float8)
            WHERE id = ANY ($1::bigint[]) AND state = 'running' AND locked_by = $2
            """, [.text("{" + ids.map(String.init).joined(separator: ",") + "}"), .text(workerID), .double(leaseSeconds)])
        return result.affectedRows
    }

    /// Deletes up to `batch` finished jobs older than the retention period. Returns how many.
    @discardableResult
    public func deleteFinished(batch: Int = 10_000) throws(PostgresError) -> Int {
        let result = try connection.query("""
            DELETE FROM herald.jobs WHERE id IN (
                SELECT id FROM herald.jobs
                WHERE state IN ('completed', 'discarded', 'cancelled') AND finished_at < now() - make_interval(secs => $1::float8)
                LIMIT $2)
            """, [.double(retention), .int(batch)])
        return result.affectedRows
    }

    /// Whether the queues (all when empty) hold an available (due or scheduled) or running job.
    public func hasPendingWork(queues: [String]) throws(PostgresError) -> Bool {
        let result = try connection.query("""
            SELECT EXISTS (SELECT 1 FROM herald.jobs WHERE state IN ('available', 'running')
                           AND ($1::text[] IS NULL OR queue = ANY ($1::text[])))
            """, [queues.isEmpty ? nil : Self.textArray(queues)])
        return result.bool(0, 0) ?? false
    }
}
