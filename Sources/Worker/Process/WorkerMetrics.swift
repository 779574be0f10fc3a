import FCM
import Foundation
import Metrics
import Queue

/// What one worker process counts for its pool's `/metrics`: a thin layer over its slot's
/// shared-memory counters (see `SlotRegion` for why shared memory). The store thread calls
/// `claimed` and `recorded`; the sender thread the rest.
public final class WorkerMetrics: @unchecked Sendable {
    /// The variable naming the descriptor of the slot's region a supervisor hands its workers.
    public static let descriptorVariable = "HERALD_METRICS_FD"

    let slot: SlotWriter?
    /// The queue of every job claimed and not yet recorded (store thread only).
    private var queueOfJob: [JobKey: String] = [:]

    init(slot: SlotWriter?) { self.slot = slot }

    /// Jobs whose queue is kept until their outcome is recorded.
    var jobsAwaitingRecord: Int { queueOfJob.count }

    /// The slot the supervisor passed on; none (nothing counted) when no supervisor reads one,
    /// as in `herald bench`'s pools.
    static func fromEnvironment(log: Logger) -> WorkerMetrics {
        guard let text = ProcessInfo.processInfo.environment[descriptorVariable] else { return WorkerMetrics(slot: nil) }
        do {
            guard let descriptor = Int32(text) else { throw SlotRegionError("\(descriptorVariable)=\(text) is not a file descriptor") }
            return WorkerMetrics(slot: SlotWriter(region: try SlotRegion.attach(fileDescriptor: descriptor)))
        } catch {
            // Delivery does not depend on metrics: keep working, and say why the pool's totals lack this process.
            log.error("this worker's counts will be missing from the pool's /metrics: \(error)")
            return WorkerMetrics(slot: nil)
        }
    }

    // MARK: store thread

    /// `isAPNs`: whether a job of this project goes to APNs (its outcome is counted under the
    /// label provider="apns" of herald_messages_total; every other job's under "fcm").
    func claimed(_ jobs: [ClaimedJob], isAPNs: (String?) -> Bool = { _ in false }) {
        // Without a slot nothing is counted, and nothing may be kept: `recorded` would never
        // take the entries back, and the map would grow by one entry per job for good.
        guard slot != nil else { return }
        for job in jobs {
            queueOfJob[JobKey(job.id)] = job.project != nil && isAPNs(job.project) ? SlotRegion.queueEntry(job.queue, provider: "apns") : job.queue
        }
    }

    /// Outcomes PostgreSQL has just committed; `stale` of them were for jobs another worker held by then.
    func recorded(_ outcomes: [JobOutcome], stale: Int) {
        guard let slot else { return }
        // One add per queue and outcome rather than per job: a batch is up to a few hundred jobs.
        // A batch holds jobs of a few queues at most: a list found by comparing names costs
        // less than hashing each job's queue name.
        var counts: [(queue: String, byOutcome: [Int])] = []
        for outcome in outcomes {
            let queue = queueOfJob.removeValue(forKey: JobKey(outcome.id)) ?? "(unknown)"
            let position: Int
            if let found = counts.lastIndex(where: { $0.queue == queue }) {
                position = found
            } else {
                counts.append((queue, Array(repeating: 0, count: MessageOutcome.allCases.count)))
                position = counts.count - 1
            }
            counts[position].byOutcome[outcome.action.outcome.index] += 1
        }
        for (queue, byOutcome) in counts {
            for outcome in MessageOutcome.allCases where byOutcome[outcome.index] > 0 {
                slot.recorded(queue: queue, outcome: outcome, count: byOutcome[outcome.index])
            }
        }
        slot.stale(stale)
    }

    func databaseConnected(_ connected: Bool) { slot?.setDatabaseConnected(connected) }

    // MARK: sender thread

    /// FCM answered a request (`code`: `OK`, FCM's error code, `UNAUTHENTICATED`, or `TRANSPORT`
    /// when no answer came) `seconds` after it was handed to the HTTP client.
    /// `project`: a registry project of a worker carrying many (its row in the slot); nil for
    /// the jobs of no project, and in a worker of one project (its slot is labelled as a whole).
    func answered(code: String, seconds: Double, project: String? = nil) { slot?.answered(code: code, seconds: seconds, project: project) }

    /// APNs answered a request (`code`: `OK`, Apple's reason, `TRANSPORT` or `UNPROCESSED`), kept
    /// apart from FCM's answers; `app` labels it as `project` does an FCM project's.
    func answeredAPNs(code: String, seconds: Double, app: String) {
        slot?.answered(code: code, seconds: seconds, project: app, apns: true)
    }

    /// FCM's (or APNs's, `provider` "apns") 200 for `job`, at `now` (seconds since 1970).
    func delivered(_ job: ClaimedJob, now: Double, provider: String = "fcm") {
        guard job.dueAt > 0 else { return }
        slot?.delivered(queue: SlotRegion.queueEntry(job.queue, provider: provider), secondsSinceDue: now - job.dueAt)
    }

    func inFlight(_ count: Int) { slot?.setInFlight(count) }
    func tokenHeld(_ held: Bool) { slot?.setTokenHeld(held) }
    func tokenFetches(_ count: Int) { slot?.setTokenFetches(count) }
    func logWritesDropped(_ count: Int) { slot?.setLogWritesDropped(count) }
    func fcmProjectPausedUntil(_ seconds: Double) { slot?.setProjectPausedUntil(seconds) }
    /// A quota answer, by the limit it was taken for (herald_fcm_quota_exceeded_total).
    func quotaExceeded(_ limit: QuotaLimit, project: String? = nil) { slot?.quotaExceeded(limit.rawValue, project: project) }
    /// A job snoozed by a quota answer or its target's hold (herald_jobs_snoozed_total).
    func snoozed(project: String? = nil) { slot?.snoozed(project: project) }
    /// The sender's window of requests in flight (herald_in_flight_limit).
    func window(_ size: Int) { slot?.setWindow(size) }
    /// The FCM project's adapted rate in force (herald_project_rate_per_second, a name dashboards use).
    func fcmProjectRate(_ perSecond: Double) { slot?.setProjectRate(perSecond) }

    // MARK: the projects of a worker carrying many (either thread)

    /// A carried project's adapted rate in force (herald_project_rate_per_second{project}).
    func fcmProjectRate(_ perSecond: Double, project: String) { slot?.setProjectRate(perSecond, project: project) }
    /// Until when a carried project sends nothing new (herald_quota_paused{project}).
    func fcmProjectPausedUntil(_ seconds: Double, project: String) { slot?.setProjectPausedUntil(seconds, project: project) }
    /// The worker dropped a carried project; its row may be given to another later.
    func projectDropped(_ project: String) { slot?.projectDropped(project) }
}
