import FCM

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
    /// The registry project it was claimed for (herald.jobs.project; nil: the pool's own key):
    /// a worker carrying several projects sends it with that project's key, to its URL.
    public var project: String? = nil

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
