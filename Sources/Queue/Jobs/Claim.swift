import JSON
import Postgres

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

/// The claimer: the FCM project's tokens, then one claim statement (claim_due_jobs.sql);
/// promoting due jobs, what a drain asks, and the leases' heartbeat. One per connection
/// (`JobStore.claimer`).
public final class Claimer: @unchecked Sendable {
    let connection: PGConnection
    /// Who holds the leases it takes (JobStore.workerID).
    public let workerID: String
    /// The FCM project this worker sends for: claims wait while herald.project_pauses holds it
    /// back (nil: no such check, e.g. the PostgreSQL ceiling benchmark).
    public let fcmProject: String?
    /// Whose jobs this worker claims: a registry entry's name (herald.projects; it sends them
    /// with that project's credentials) or nil for jobs of no project (the pool's own credentials).
    public var project: String?
    /// The FCM project's rate, per second, shared by every pool of the project (0: none).
    public var fcmProjectRate: Double = 0
    /// The time the claim takes place at, in seconds since 1970 (nil: the database's clock), so a
    /// test can move it (a bucket refilled, a job due) without waiting.
    public var claimTime: Double?
    /// The last claim took all it asked for, or a limit held jobs back: more are probably waiting.
    var inBacklog = false

    init(connection: PGConnection, workerID: String, fcmProject: String?) {
        self.connection = connection
        self.workerID = workerID
        self.fcmProject = fcmProject
    }

    /// Claims up to `limit` available jobs (all queues when `queues` is empty) into `running`
    /// under a lease of `leaseSeconds`: each queue and campaign in turn, priority first within
    /// each, within every rate limit.
    public func claim(queues: [String], limit: Int, leaseSeconds: Double) throws(PostgresError) -> [ClaimedJob] {
        try claimBatch(queues: queues, limit: limit, leaseSeconds: leaseSeconds).jobs
    }

    /// `claim`, and whether a limit held jobs back (and for how long).
    public func claimBatch(queues: [String], limit: Int, leaseSeconds: Double) throws(PostgresError) -> Claim {
        var target = ClaimTarget(project: project, fcmProject: fcmProject, fcmProjectRate: fcmProjectRate)
        target.inBacklog = inBacklog
        let claim = try claimBatch(queues: queues, limit: limit, leaseSeconds: leaseSeconds, for: &target)
        inBacklog = target.inBacklog
        return claim
    }

    /// Whose jobs one claim takes, and under which FCM project's rate and pauses: a worker that
    /// carries several projects keeps one of these per project and claims each in turn on the
    /// same connection. `inBacklog` is the target's own (see `Claimer.inBacklog`).
    public struct ClaimTarget: Sendable {
        public var project: String?
        public var fcmProject: String?
        public var fcmProjectRate: Double
        public var inBacklog = false
        public init(project: String?, fcmProject: String?, fcmProjectRate: Double) {
            self.project = project
            self.fcmProject = fcmProject
            self.fcmProjectRate = fcmProjectRate
        }
    }

    /// A project with available jobs, and its registry entry's pause (nil: none, or no entry).
    public struct DueProject: Sendable, Equatable {
        public var project: String?
        public var pausedReason: String?
        public init(project: String?, pausedReason: String? = nil) { self.project = project; self.pausedReason = pausedReason }
    }

    /// The projects that have available jobs (nil: jobs of no project), one probe of the claim's
    /// index each (projects_with_due_jobs.sql), so a worker carrying many projects claims only
    /// for those with work and never reads a backlog to learn it is there.
    public func projectsWithDueJobs() throws(PostgresError) -> [DueProject] {
        let result = try connection.query(SQL.projectsWithDueJobs, [])
        let project = try result.column("project"), paused = try result.column("paused_reason")
        return (0..<result.rowCount).map { DueProject(project: result[$0, project], pausedReason: result[$0, paused]) }
    }

    /// `claimBatch` for `target`: its project's jobs, its FCM project's tokens and pauses.
    public func claimBatch(queues: [String], limit: Int, leaseSeconds: Double, for target: inout ClaimTarget) throws(PostgresError) -> Claim {
        let fcmProject = target.fcmProject, fcmProjectRate = target.fcmProjectRate, project = target.project
        var granted: Int?
        if let fcmProject, fcmProjectRate > 0, target.inBacklog {
            // The FCM project's bucket is shared by every worker of it: taking its tokens in a
            // transaction of their own keeps its row locked for that statement only, not for the
            // whole claim, so the workers' claims do not queue behind each other on it. Outside a
            // backlog the claim takes them itself, which saves a round trip on every claim of a
            // one-time code while claims rarely meet on the row.
            let tokens = try connection.query(SQL.takeFcmProjectTokens, [.text(fcmProject), .double(fcmProjectRate), .int(limit),
                                                                      claimTime.map { .double($0) }])
            let taken = tokens.int(0, try tokens.column("granted")) ?? 0
            guard taken > 0 else { return Claim(jobs: [], heldBackFor: tokens.double(0, try tokens.column("wait_seconds"))) }  // still a backlog
            granted = taken
        }
        let result = try connection.query(SQL.claimDueJobs, [queues.isEmpty ? nil : .textArray(queues), .int(limit),
                                                             .double(leaseSeconds), .text(workerID), fcmProject.map { .text($0) },
                                                             .double(fcmProjectRate), granted.map { .int($0) }, claimTime.map { .double($0) },
                                                             project.map { .text($0) }])
        let comeBackIn = try result.column("come_back_in")
        // Every row carries come_back_in; a claim of no job is one row without a job.
        var claim = Claim(jobs: [], heldBackFor: result.rowCount > 0 ? result.double(0, comeBackIn) : nil)
        let columns = try JobColumns(result)
        claim.jobs.reserveCapacity(result.rowCount)
        for row in 0..<result.rowCount {
            guard var job = columns.job(result, row) else { continue }
            job.project = project
            claim.jobs.append(job)
        }
        claim.jobs.sort { $0.id < $1.id }
        target.inBacklog = claim.jobs.count >= limit || claim.heldBackFor != nil
        return claim
    }

    /// The columns of herald.claimed_job in a claim statement's result.
    struct JobColumns {
        let id, queue, kind, message, attempt, maxAttempts, tokenPruned, lastError, createdAt, dueAt: Int
        let groupKey, groupMembers, validateOnly, campaignID: Int

        init(_ result: PGResult) throws(PostgresError) {
            id = try result.column("id"); queue = try result.column("queue"); kind = try result.column("kind")
            message = try result.column("message"); attempt = try result.column("attempt")
            maxAttempts = try result.column("max_attempts"); tokenPruned = try result.column("token_pruned")
            lastError = try result.column("last_error"); createdAt = try result.column("created_at")
            dueAt = try result.column("due_at"); groupKey = try result.column("group_key")
            groupMembers = try result.column("group_members"); validateOnly = try result.column("validate_only")
            campaignID = try result.column("campaign_id")
        }

        /// The job of `row` (nil: a row without one).
        func job(_ result: PGResult, _ row: Int) -> ClaimedJob? {
            guard let jobID = result.int(row, id) else { return nil }
            return ClaimedJob(
                id: jobID, queue: result[row, queue]!, kind: result.equals(row, kind, "group") ? .group : .send,
                message: result.bytes(row, message)!, attempt: result.int(row, attempt)!, maxAttempts: result.int(row, maxAttempts)!,
                tokenPruned: result.bool(row, tokenPruned) ?? false, lastError: result[row, lastError],
                createdAt: result.double(row, createdAt) ?? 0, dueAt: result.double(row, dueAt) ?? 0,
                groupKey: result[row, groupKey], groupMembers: Claimer.members(fromJSON: result[row, groupMembers]),
                validateOnly: result.bool(row, validateOnly) ?? false, campaignID: result.int(row, campaignID))
        }
    }

    /// What one project's visit of `claimProjects` took.
    public struct ProjectVisit: Sendable {
        public var project: String?
        public var jobs: [ClaimedJob]
        /// It took its whole share: more of its jobs are probably waiting.
        public var wholeShare: Bool
        /// A limit held its jobs back (its FCM project's bucket, a queue's or campaign's rate,
        /// max_in_flight, or a bucket another claim held): in how many seconds it lets them go.
        public var heldBackFor: Double?
        /// Its FCM project's adapted rate as stored after the visit (nil: no FCM project).
        public var rate: AdaptiveRate.State?
    }

    /// One claim statement over several projects (herald.claim_projects): `targets` served in
    /// that order, each at least `minimumShare` of the `limit` in turn, then the rest to those
    /// that took their whole share; each project's jobs as `claimBatch` would claim them for it.
    public func claimProjects(_ targets: [ClaimTarget], queues: [String], limit: Int, leaseSeconds: Double,
                              minimumShare: Int) throws(PostgresError) -> [ProjectVisit] {
        let result = try connection.query(SQL.claimDueJobsOfProjects, [
            .textArray(targets.map { $0.project ?? "" }), .nullableTextArray(targets.map(\.fcmProject)),
            .doubleArray(targets.map(\.fcmProjectRate)), queues.isEmpty ? nil : .textArray(queues), .int(limit),
            .double(leaseSeconds), .text(workerID), .int(minimumShare), claimTime.map { .double($0) }])
        let visit = try result.column("visit"), project = try result.column("visit_project")
        let whole = try result.column("whole_share"), comeBackIn = try result.column("come_back_in")
        let adapted = try result.column("adapted_per_second"), adaptedAt = try result.column("adapted_at")
        let regain = try result.column("regain_per_second"), stated = try result.column("stated_per_second")
        let statedAt = try result.column("stated_at"), windowHeld = try result.column("window_held_until")
        let columns = try JobColumns(result)
        var withFCMProject: Set<String?> = []
        for target in targets where target.fcmProject != nil { withFCMProject.insert(target.project) }
        var visits: [ProjectVisit] = []
        var current = -1
        for row in 0..<result.rowCount {
            let number = result.int(row, visit) ?? 0
            if number != current {
                current = number
                let name = result[row, project]
                visits.append(ProjectVisit(
                    project: name, jobs: [], wholeShare: result.bool(row, whole) ?? false, heldBackFor: result.double(row, comeBackIn),
                    rate: !withFCMProject.contains(name) ? nil : AdaptiveRate.State(
                        adapted: result.double(row, adapted), at: result.double(row, adaptedAt), regain: result.double(row, regain),
                        stated: result.double(row, stated), statedAt: result.double(row, statedAt),
                        windowHeldUntil: result.double(row, windowHeld))))
            }
            guard var job = columns.job(result, row) else { continue }
            job.project = visits[visits.count - 1].project
            visits[visits.count - 1].jobs.append(job)
        }
        return visits
    }

    /// Makes up to `limit` scheduled jobs that are due available (earliest first) and reports
    /// when the next scheduled job is due.
    public func promoteDueJobs(limit: Int = 10_000) throws(PostgresError) -> Promotion {
        let result = try connection.query(SQL.promoteDueJobs, [.int(limit)])
        return Promotion(promoted: result.int(0, try result.column("promoted")) ?? 0,
                         nextDueIn: result.double(0, try result.column("next_due_in")))
    }

    /// What a drain asks before it stops: whether a job is due, and what waits beyond.
    public struct PendingWork: Sendable, Equatable {
        /// A job available, running, or scheduled within the horizon.
        public var due: Bool
        /// Scheduled jobs due after the horizon, and in how many seconds the first of them is.
        public var later: Int
        public var nextDueIn: Double?
        /// Registry entries with due jobs that a pause holds back (a drain leaves them waiting).
        public var paused: [String] = []
        public init(due: Bool, later: Int = 0, nextDueIn: Double? = nil) {
            self.due = due
            self.later = later
            self.nextDueIn = nextDueIn
        }
    }

    /// Whether the queues (all when empty) hold a job of this worker's project (`project`)
    /// that is due: available, running, or scheduled within `horizon` seconds; and how many are
    /// scheduled beyond it.
    public func pendingWork(queues: [String], horizon: Double) throws(PostgresError) -> PendingWork {
        let result = try connection.query(SQL.hasPendingWork, [queues.isEmpty ? nil : .textArray(queues),
                                                               project.map { .text($0) }, .double(horizon)])
        return PendingWork(due: result.bool(0, try result.column("pending")) ?? false,
                           later: result.int(0, try result.column("later")) ?? 0,
                           nextDueIn: result.double(0, try result.column("next_due")))
    }

    /// Extends the leases of jobs this worker still holds (a heartbeat for requests that take
    /// long, so a healthy worker's job is never taken back). Returns how many were extended.
    @discardableResult
    public func extendLeases(ids: [Int], leaseSeconds: Double) throws(PostgresError) -> Int {
        guard !ids.isEmpty else { return 0 }
        return try connection.query(SQL.extendLeases, [.text("{" + ids.map(String.init).joined(separator: ",") + "}"),
                                                       .text(workerID), .double(leaseSeconds)]).affectedRows
    }

    /// The members of a device group from `array_to_json(members)::text` (none for NULL).
    static func members(fromJSON text: String?) -> [String] {
        guard let text, let items = (try? JSONValue.parse(text))?.arrayValue else { return [] }
        return items.compactMap(\.stringValue)
    }
}
