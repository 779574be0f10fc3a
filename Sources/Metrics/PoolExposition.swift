import Queue

/// Everything `GET /metrics` of a pool shows, read at one scrape.
public struct PoolReading: Sendable {
    /// The pool's slots summed.
    public var totals: SlotSnapshot
    public var workerProcesses: Int
    public var quotaPaused: Bool
    public var version: String
    /// Supervisor and workers together.
    public var cpuSeconds: Double
    public var residentBytes: Int
    /// Log lines the supervisor itself dropped (its workers' are in `totals`).
    public var supervisorLogWritesDropped: Int = 0
    /// The pool's slots summed per worker group: the jobs of no project, and each registry
    /// project the pool works. Empty: one group, `totals`, with no project label.
    public var projects: [ProjectReading] = []

    public init(totals: SlotSnapshot, workerProcesses: Int, quotaPaused: Bool, version: String, cpuSeconds: Double, residentBytes: Int) {
        self.totals = totals
        self.workerProcesses = workerProcesses
        self.quotaPaused = quotaPaused
        self.version = version
        self.cpuSeconds = cpuSeconds
        self.residentBytes = residentBytes
    }
}

/// One worker group's counters: the jobs of no project (`project` nil), or one registry project's.
public struct ProjectReading: Sendable {
    /// The registry name; nil for the jobs of no project (the pool's own key).
    public var project: String?
    public var totals: SlotSnapshot
    public var quotaPaused: Bool
    /// A project of workers carrying many (a row of their slots): it has the series of
    /// answers, quota answers, snoozes, rate and pause only, the rest of its workers' series
    /// are under the jobs of no project's group.
    public var carried = false
    /// Its rate is shown (not for the overflow row, which stands for many projects).
    public var showsRate = true
    public init(project: String?, totals: SlotSnapshot, quotaPaused: Bool) {
        self.project = project
        self.totals = totals
        self.quotaPaused = quotaPaused
    }

    /// A project of workers carrying many, from its rows summed over the slots.
    public init(carried project: String, _ counts: SlotSnapshot.ProjectCounts, now: Double) {
        var totals = SlotSnapshot()
        totals.requestsByCode = counts.requestsByCode
        totals.quotaByLimit = counts.quotaByLimit
        totals.snoozed = counts.snoozed
        totals.projectRate = counts.rate
        self.init(project: project, totals: totals, quotaPaused: counts.pausedUntil > now)
        carried = true
        showsRate = project != SlotRegion.overflowLabel
    }
}

public enum PoolExposition {
    /// The pool's metrics in the Prometheus text format. Every queue a worker has seen gets all
    /// six outcomes (zeros included), so `rate()` and `increase()` have a series from the start.
    public static func render(_ reading: PoolReading) -> String {
        var out = Exposition()
        // Each group's series carry its project as the label `project`; the jobs of no project
        // carry none (to Prometheus the same as project=""), so a pool without projects shows
        // exactly the series it always did, and a sum over `project` is the pool's total.
        let groups = reading.projects.isEmpty
            ? [ProjectReading(project: nil, totals: reading.totals, quotaPaused: reading.quotaPaused)] : reading.projects
        // The projects of workers carrying many have some series only (`ProjectReading.carried`).
        let full = groups.filter { !$0.carried }
        func labels(_ group: ProjectReading, _ base: [(String, String)] = []) -> [(String, String)] {
            group.project.map { base + [("project", $0)] } ?? base
        }

        out.family("herald_messages_total", .counter, help: "Jobs whose outcome a worker recorded in PostgreSQL, by queue, outcome, provider (fcm, apns) and registry project (none: the jobs of no project).")
        for group in full {
            for key in group.totals.queues.keys.sorted() {
                let counts = group.totals.queues[key]!
                let (provider, queue) = SlotRegion.providerQueue(key)
                for outcome in MessageOutcome.allCases {
                    out.sample("herald_messages_total", labels: labels(group, [("queue", queue), ("outcome", outcome.rawValue), ("provider", provider)]), counts[outcome])
                }
            }
        }

        out.family("herald_fcm_requests_total", .counter,
                   help: "FCM requests (sends and device-group operations) by answer: OK for 2xx, FCM's error code, UNAUTHENTICATED for our access token, TRANSPORT when no answer came.")
        for group in groups {
            let answers = SlotSnapshot.fcm(group.totals.requestsByCode)
            for code in answers.keys.sorted() {
                out.sample("herald_fcm_requests_total", labels: labels(group, [("code", code)]), answers[code]!)
            }
        }

        out.family("herald_fcm_request_duration_seconds", .histogram, help: "Time from handing a request to the HTTP/2 client to its answer.")
        for group in full {
            out.histogram("herald_fcm_request_duration_seconds", labels: labels(group), bounds: SlotRegion.durationBounds,
                          counts: group.totals.durationCounts, sum: group.totals.durationSumSeconds)
        }

        // APNs apps' answers, apart from FCM's (an app's `Unregistered` is not an FCM error): a
        // series appears once a worker sent an APNs request.
        let apnsGroups = groups.map { ($0, SlotSnapshot.apns($0.totals.requestsByCode)) }.filter { !$0.1.isEmpty }
        if !apnsGroups.isEmpty {
            out.family("herald_apns_requests_total", .counter,
                       help: "APNs requests by answer, by app (the label project): OK for 200, Apple's reason otherwise, TRANSPORT when no answer came, UNPROCESSED for a stream Apple's front end did not process.")
            for (group, answers) in apnsGroups {
                for code in answers.keys.sorted() {
                    out.sample("herald_apns_requests_total", labels: labels(group, [("code", code)]), answers[code]!)
                }
            }
            out.family("herald_apns_request_duration_seconds", .histogram, help: "Time from handing an APNs request to the HTTP/2 client to its answer.")
            for group in full where group.totals.apnsDurationCounts.contains(where: { $0 > 0 }) {
                out.histogram("herald_apns_request_duration_seconds", labels: labels(group), bounds: SlotRegion.durationBounds,
                              counts: group.totals.apnsDurationCounts, sum: group.totals.apnsDurationSumSeconds)
            }
        }

        out.family("herald_delivery_latency_seconds", .histogram, help: "Time from when a job was due (run_at) to its provider's acceptance (FCM's 200, APNs's 200), by queue and provider.")
        for group in full {
            for key in group.totals.queues.keys.sorted() {
                let counts = group.totals.queues[key]!
                let (provider, queue) = SlotRegion.providerQueue(key)
                out.histogram("herald_delivery_latency_seconds", labels: labels(group, [("queue", queue), ("provider", provider)]), bounds: SlotRegion.latencyBounds,
                              counts: counts.latencyCounts, sum: counts.latencySumSeconds)
            }
        }

        out.family("herald_in_flight", .gauge, help: "FCM requests sent and not yet answered, over the pool's worker processes.")
        for group in full { out.sample("herald_in_flight", labels: labels(group), Int(group.totals.inFlight)) }

        out.family("herald_in_flight_limit", .gauge,
                   help: "Requests the pool's senders keep in flight at most now: it follows FCM's answer times, between 16 and --concurrency per process.")
        for group in full { out.sample("herald_in_flight_limit", labels: labels(group), Int(group.totals.window)) }

        out.family("herald_worker_processes", .gauge, help: "Worker processes running under this supervisor.")
        out.sample("herald_worker_processes", reading.workerProcesses)

        out.family("herald_quota_paused", .gauge, help: "1 while a worker of this pool holds back new sends after FCM's QUOTA_EXCEEDED.")
        for group in groups where group.showsRate { out.sample("herald_quota_paused", labels: labels(group), group.quotaPaused ? 1 : 0) }

        out.family("herald_fcm_quota_exceeded_total", .counter,
                   help: "FCM's QUOTA_EXCEEDED answers by the limit they were taken for: a device's, a topic's or the project's.")
        for group in groups {
            for (label, _) in SlotRegion.quotaLimits {
                out.sample("herald_fcm_quota_exceeded_total", labels: labels(group, [("limit", label)]), group.totals.quotaByLimit[label] ?? 0)
            }
        }

        out.family("herald_jobs_snoozed_total", .counter,
                   help: "Jobs put back after a quota answer, or held back while their device or topic backs off, without using up an attempt.")
        for group in groups { out.sample("herald_jobs_snoozed_total", labels: labels(group), group.totals.snoozed) }

        out.family("herald_project_rate_per_second", .gauge,
                   help: "The FCM project's adapted send rate in force (at most herald work --max-rate; lowered on a project quota answer, raised again while FCM accepts).")
        for group in groups where group.showsRate { out.sample("herald_project_rate_per_second", labels: labels(group), group.totals.projectRate) }

        out.family("herald_access_token_refreshes_total", .counter, help: "OAuth2 access tokens fetched from the token endpoint.")
        for group in full { out.sample("herald_access_token_refreshes_total", labels: labels(group), group.totals.tokenFetches) }

        out.family("herald_stale_outcomes_total", .counter,
                   help: "Outcomes PostgreSQL did not apply because the job's lease had run out and another worker held it (herald_messages_total counts them too).")
        for group in full { out.sample("herald_stale_outcomes_total", labels: labels(group), group.totals.staleOutcomes) }

        out.family("herald_log_lines_dropped_total", .counter,
                   help: "Log lines the supervisor and its workers could not write because stderr was closed (a log reader that went away); the pool works on.")
        out.sample("herald_log_lines_dropped_total", reading.totals.logWritesDropped + UInt64(reading.supervisorLogWritesDropped))

        out.family("herald_build_info", .gauge, help: "Always 1; the version label says which herald runs.")
        out.sample("herald_build_info", labels: [("version", reading.version)], 1)

        out.family("process_resident_memory_bytes", .gauge, help: "Resident memory of the supervisor and its worker processes.")
        out.sample("process_resident_memory_bytes", reading.residentBytes)

        out.family("process_cpu_seconds_total", .counter, help: "User and system CPU time of the supervisor and its worker processes, exited ones included.")
        out.sample("process_cpu_seconds_total", reading.cpuSeconds)
        return out.text
    }
}
