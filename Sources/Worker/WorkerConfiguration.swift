import Logging
import Queue

/// Everything one worker process needs; `herald work` fills it from flags and environment.
public struct WorkerConfiguration: Sendable {
    public var databaseURL: String
    /// FCM's base URL (HERALD_FCM_URL), e.g. https://fcm.googleapis.com or the emulator's.
    public var fcmBaseURL: String = "https://fcm.googleapis.com"
    /// Where every APNs app's requests go (HERALD_APNS_URL, `herald work --apns-url`), e.g. the
    /// emulator's; nil: each app's own, Apple's production or sandbox endpoint.
    public var apnsBaseURL: String? = nil
    /// FCM's Data API (HERALD_FCM_DATA_URL), where the maintenance leader fetches each project's
    /// delivery data once a day; its CA file and environment are the pool's.
    public var deliveryData = DeliveryDataSettings()
    /// Instance ID's base URL (HERALD_IID_URL) for topic subscriptions (batchAdd / batchRemove).
    public var iidBaseURL: String = "https://iid.googleapis.com"
    /// Test mode: the base URL of the emulator in the pool's process (`herald work --emulator`,
    /// the embedded default; passed to workers as `emulatorVariable`). Every provider's requests
    /// go there, whatever the three URLs above and the registry say (`endpoints`).
    public var emulatorURL: String? = nil
    /// The variable a supervisor in test mode hands its workers the emulator's URL in.
    public static let emulatorVariable = "HERALD_WORKER_EMULATOR"

    /// Where each provider's requests go: the one place that decides it (`ProviderEndpoints`).
    public var endpoints: ProviderEndpoints {
        ProviderEndpoints(emulator: emulatorURL, fcmBaseURL: fcmBaseURL, iidBaseURL: iidBaseURL, apnsBaseURL: apnsBaseURL)
    }
    /// The service-account JSON (GOOGLE_APPLICATION_CREDENTIALS).
    public var credentialsPath: String
    /// `--project NAME`: work only that registry project's jobs (herald.projects), sent with the
    /// credentials the registry points at (`credentialsPath` is then unused); nil: the jobs of no
    /// project, sent with `credentialsPath`.
    public var project: String? = nil
    /// A worker that carries several projects in one process (`herald work` without `--project`,
    /// or with it given several times): nil: the one of `project` (or the jobs of no project).
    public var carries: Carried? = nil
    /// Which projects a worker carries.
    public enum Carried: Sendable, Equatable {
        /// Every project of the registry (read again every `registryPollSeconds`), and the jobs
        /// of no project when `credentialsPath` is given.
        case registry
        /// These registry projects only.
        case named([String])
    }
    /// How often a worker carrying the registry reads it again (HERALD_REGISTRY_POLL_SECONDS).
    public var registryPollSeconds: Double = 10
    /// A CA bundle for TLS verification (verification itself is always on).
    public var caFile: String? = nil
    /// Queues to work; empty means every queue.
    public var queues: [String] = []
    /// Requests in flight per process at most: the adaptive window's ceiling, a memory bound (it
    /// starts at 256 and grows only while FCM answers steadily; docs/fcm-limits.md).
    public var concurrency: Int = WorkerConfiguration.defaultConcurrency
    public static let defaultConcurrency = 1024
    /// Seconds a claimed job is held before another worker may take it back.
    public var leaseSeconds: Double = 60
    /// Jobs claimed per statement (0: derived from concurrency).
    public var claimBatch: Int = 0
    /// Seconds finished jobs stay in herald.jobs.
    public var retentionSeconds: Double = 86_400
    public var shutdownTimeout: Double = 30
    /// PostgreSQL's statement_timeout for the store thread's statements; an answer that has not
    /// come 5 s after it means a silent network path, and the connection is reopened.
    public var statementTimeout: Double = 20
    /// Exit once the queues hold no available, scheduled or running job.
    public var drain: Bool = false
    /// With `drain`: scheduled jobs due within this many seconds are waited for, later ones not.
    public var drainHorizon: Double = 60
    /// Seconds between polls when no notification arrives.
    public var pollInterval: Double = 1
    public var requestTimeout: Double = 30
    public var connectTimeout: Double = 10
    public var maxStreamsPerConnection: Int = 100
    public var retryPolicy = RetryPolicy()
    /// Messages per second for the whole FCM project, shared by every pool that sends for it
    /// (herald.project_rates); 0: no limit. FCM's default quota is 600,000 a minute.
    public var maxRate: Double = 10_000
    /// Worker processes in this pool (`--processes`): what one process sees FCM accept is about
    /// this share of the pool's, when it judges the project's rate after a quota answer.
    public var poolProcesses: Int = 1
    /// This worker's place among them (0 ..< poolProcesses), from its supervisor; nil: not known
    /// (it then takes up every project as its jobs come, as a worker alone does).
    public var poolIndex: Int?
    /// Adapt the requests in flight to FCM's answer times (between `minConcurrency` and
    /// `concurrency`); false: always `concurrency` (`--fixed-concurrency`).
    public var adaptiveConcurrency = true
    public var minConcurrency = 16
    public var logLevel: Logger.Level = .info
    public var logFormat: Logger.Format = .text
    /// Message fields allowed beyond the validation rules (herald.message_extra_fields, read when
    /// the process starts).
    public var extraMessageFields: Set<String> = []
    /// `--skip-project NAME` (HERALD_SKIP_PROJECTS): registry projects a pool carrying the
    /// registry leaves alone (their jobs and topic subscriptions), for a pool of their own.
    public var skippedProjects: Set<String> = []

    public init(databaseURL: String, credentialsPath: String) {
        self.databaseURL = databaseURL
        self.credentialsPath = credentialsPath
    }

    var effectiveClaimBatch: Int {
        claimBatch > 0 ? claimBatch : max(1, min(concurrency, 256))
    }
}
