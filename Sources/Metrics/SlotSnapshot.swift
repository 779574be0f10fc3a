import Queue

/// What a slot (or, summed, a pool) had counted at one moment.
public struct SlotSnapshot: Sendable, Equatable {
    public struct QueueCounts: Sendable, Equatable {
        /// Indexed by `MessageOutcome.index`.
        public var outcomes = [UInt64](repeating: 0, count: MessageOutcome.allCases.count)
        /// Per bucket of `SlotRegion.latencyBounds`, plus one above the last bound (not cumulative).
        public var latencyCounts = [UInt64](repeating: 0, count: SlotRegion.latencyBounds.count + 1)
        public var latencySumSeconds: Double = 0
        public init() {}

        public subscript(outcome: MessageOutcome) -> UInt64 { outcomes[outcome.index] }
    }

    /// One project's counts in a worker carrying many projects (its row of the slot).
    public struct ProjectCounts: Sendable, Equatable {
        public var requestsByCode: [String: UInt64] = [:]
        public var quotaByLimit: [String: UInt64] = [:]
        public var snoozed: UInt64 = 0
        /// The adapted rate in force (the lowest over the slots that carry the project).
        public var rate: Double = 0
        /// Seconds since 1970 until which the project sends nothing new (the latest over the slots).
        public var pausedUntil: Double = 0
        public init() {}

        /// FCM requests (APNs answers are counted apart, `SlotSnapshot.apns`).
        public var requests: UInt64 { SlotSnapshot.fcm(requestsByCode).values.reduce(0, +) }
    }

    public var pid: Int32 = 0
    public var databaseConnected = false
    public var tokenHeld = false
    public var inFlight: UInt64 = 0
    public var projectPausedUntil: Double = 0
    public var tokenFetches: UInt64 = 0
    public var staleOutcomes: UInt64 = 0
    public var logWritesDropped: UInt64 = 0
    /// Quota answers by the limit they were taken for (`device`, `topic`, `project`).
    public var quotaByLimit: [String: UInt64] = [:]
    public var snoozed: UInt64 = 0
    /// The project's adapted rate in force (per slot; the pool shows the lowest).
    public var projectRate: Double = 0
    /// Requests in flight the workers' senders want at most (summed over the pool).
    public var window: UInt64 = 0
    public var durationCounts = [UInt64](repeating: 0, count: SlotRegion.durationBounds.count + 1)
    public var durationSumSeconds: Double = 0
    /// APNs requests' durations.
    public var apnsDurationCounts = [UInt64](repeating: 0, count: SlotRegion.durationBounds.count + 1)
    public var apnsDurationSumSeconds: Double = 0
    /// Answers by code: FCM's as they are, APNs's under `SlotRegion.apnsCodePrefix` (see `fcm`
    /// and `apns`).
    public var requestsByCode: [String: UInt64] = [:]
    public var queues: [String: QueueCounts] = [:]
    /// The projects of a worker carrying many, by name (`SlotRegion.overflowLabel` for those
    /// beyond its table); their counts are part of the totals above too.
    public var projects: [String: ProjectCounts] = [:]

    public init() {}

    /// Reads a slot's region (relaxed loads: each counter is exact, counters read a moment
    /// apart may differ by what was added in between).
    public init(_ region: SlotRegion) {
        typealias H = SlotRegion.Header
        // The project rows first, then the totals: a row's counts are added after the slot's,
        // so the totals read after them are never less than the rows' sum.
        let codeNames = region.names(.codes)
        typealias W = SlotRegion.ProjectWord
        for row in 0..<SlotRegion.projectCapacity {
            guard let found = region.readProject(row: row) else { continue }
            var counts = ProjectCounts()
            for (index, code) in codeNames.enumerated() where found.words[index] > 0 {
                counts.requestsByCode[code, default: 0] += found.words[index]
            }
            for (position, limit) in SlotRegion.quotaLimits.enumerated() { counts.quotaByLimit[limit.label] = found.words[W.quota - W.codes + position] }
            counts.snoozed = found.words[W.snoozed - W.codes]
            counts.rate = Double(found.words[W.rateMilli - W.codes]) / 1000
            counts.pausedUntil = Double(found.words[W.pausedUntilMilliseconds - W.codes]) / 1000
            projects[found.name, default: ProjectCounts()].add(counts)
        }
        pid = Int32(truncatingIfNeeded: region.load(H.pid.rawValue))
        databaseConnected = region.load(H.databaseConnected.rawValue) != 0
        tokenHeld = region.load(H.tokenHeld.rawValue) != 0
        inFlight = region.load(H.inFlight.rawValue)
        projectPausedUntil = Double(region.load(H.projectPausedUntilMilliseconds.rawValue)) / 1000
        tokenFetches = region.load(H.tokenRefreshes.rawValue)
        staleOutcomes = region.load(H.staleOutcomes.rawValue)
        logWritesDropped = region.load(H.logWritesDropped.rawValue)
        for (label, word) in SlotRegion.quotaLimits { quotaByLimit[label] = region.load(word) }
        snoozed = region.load(H.snoozed.rawValue)
        projectRate = Double(region.load(H.projectRateMilli.rawValue)) / 1000
        window = region.load(H.window.rawValue)
        for index in 0..<durationCounts.count { durationCounts[index] = region.load(SlotRegion.durationStart + index) }
        durationSumSeconds = Double(region.load(SlotRegion.durationStart + durationCounts.count)) / 1_000_000
        for index in 0..<apnsDurationCounts.count { apnsDurationCounts[index] = region.load(SlotRegion.apnsDurationStart + index) }
        apnsDurationSumSeconds = Double(region.load(SlotRegion.apnsDurationStart + apnsDurationCounts.count)) / 1_000_000
        for (index, code) in region.names(.codes).enumerated() {
            requestsByCode[code, default: 0] += region.load(region.entryStart(.codes, index) + SlotRegion.nameWords)
        }
        for (index, name) in region.names(.queues).enumerated() {
            let start = region.entryStart(.queues, index) + SlotRegion.nameWords
            var counts = QueueCounts()
            for outcome in MessageOutcome.allCases { counts.outcomes[outcome.index] = region.load(start + outcome.index) }
            let latencyStart = start + SlotRegion.outcomeCount
            for bucket in 0..<counts.latencyCounts.count { counts.latencyCounts[bucket] = region.load(latencyStart + bucket) }
            counts.latencySumSeconds = Double(region.load(latencyStart + counts.latencyCounts.count)) / 1_000_000
            queues[name, default: QueueCounts()].add(counts)
        }
    }

    /// Sums counters and adds gauges (in flight); readiness and pause are per slot and not summed.
    public mutating func add(_ other: SlotSnapshot) {
        inFlight += other.inFlight
        tokenFetches += other.tokenFetches
        staleOutcomes += other.staleOutcomes
        logWritesDropped += other.logWritesDropped
        for (label, count) in other.quotaByLimit { quotaByLimit[label, default: 0] += count }
        snoozed += other.snoozed
        window += other.window
        if other.projectRate > 0 { projectRate = projectRate > 0 ? min(projectRate, other.projectRate) : other.projectRate }
        for index in 0..<durationCounts.count { durationCounts[index] += other.durationCounts[index] }
        durationSumSeconds += other.durationSumSeconds
        for index in 0..<apnsDurationCounts.count { apnsDurationCounts[index] += other.apnsDurationCounts[index] }
        apnsDurationSumSeconds += other.apnsDurationSumSeconds
        for (code, count) in other.requestsByCode { requestsByCode[code, default: 0] += count }
        for (name, counts) in other.queues { queues[name, default: QueueCounts()].add(counts) }
        for (name, counts) in other.projects { projects[name, default: ProjectCounts()].add(counts) }
    }

    /// Total FCM requests answered (or given up on without an answer).
    public var requests: UInt64 { Self.fcm(requestsByCode).values.reduce(0, +) }

    /// Total APNs requests answered (or given up on without an answer).
    public var apnsRequests: UInt64 { Self.apns(requestsByCode).values.reduce(0, +) }

    /// FCM's answers of `byCode`.
    public static func fcm(_ byCode: [String: UInt64]) -> [String: UInt64] {
        byCode.filter { !$0.key.hasPrefix(SlotRegion.apnsCodePrefix) }
    }

    /// APNs's answers of `byCode`, by Apple's reason (`OK`, `TRANSPORT`, `UNPROCESSED`).
    public static func apns(_ byCode: [String: UInt64]) -> [String: UInt64] {
        var answers: [String: UInt64] = [:]
        for (code, count) in byCode where code.hasPrefix(SlotRegion.apnsCodePrefix) {
            answers[String(code.dropFirst(SlotRegion.apnsCodePrefix.count)), default: 0] += count
        }
        return answers
    }

    /// Jobs of every queue with `outcome`.
    public func messages(_ outcome: MessageOutcome) -> UInt64 { queues.values.reduce(0) { $0 + $1[outcome] } }
}

extension SlotSnapshot.QueueCounts {
    mutating func add(_ other: SlotSnapshot.QueueCounts) {
        for index in 0..<outcomes.count { outcomes[index] += other.outcomes[index] }
        for index in 0..<latencyCounts.count { latencyCounts[index] += other.latencyCounts[index] }
        latencySumSeconds += other.latencySumSeconds
    }
}

extension SlotSnapshot.ProjectCounts {
    public mutating func add(_ other: SlotSnapshot.ProjectCounts) {
        for (code, count) in other.requestsByCode { requestsByCode[code, default: 0] += count }
        for (limit, count) in other.quotaByLimit { quotaByLimit[limit, default: 0] += count }
        snoozed += other.snoozed
        if other.rate > 0 { rate = rate > 0 ? min(rate, other.rate) : other.rate }
        pausedUntil = max(pausedUntil, other.pausedUntil)
    }
}
