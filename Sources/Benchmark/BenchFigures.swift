import Foundation
import JSON

/// `--with`: the features of the queue a run measures, in the order of this list.
public enum BenchFeature: String, CaseIterable, Sendable {
    case caps, quietHours = "quiet-hours", events, projects, apns
}

/// What a `herald bench` run measures with (its command line, checked).
public struct BenchSettings {
    public var jobs: Int
    public var processes: Int
    public var concurrency: Int
    public var rate: Int
    public var latencySeconds: Double
    public var jsonPath: String?
    public var workerLogLevel: String
    public var durable: Bool
    public var profile: Bool
    public var finishedRows: Int
    /// The project rate of the workers and of the ceiling's claims; 0: none.
    public var maxRate: Double
    public var fcmLatencyMilliseconds: Int
    public var tokenBytes: Int
    public var features: [BenchFeature]
    public var batch: Int { max(1, min(concurrency, 256)) }

    public init(jobs: Int, processes: Int, concurrency: Int, rate: Int, latencySeconds: Double, jsonPath: String?,
                workerLogLevel: String, durable: Bool, profile: Bool, finishedRows: Int, maxRate: Double,
                fcmLatencyMilliseconds: Int, tokenBytes: Int, features: [BenchFeature]) {
        self.jobs = jobs; self.processes = processes; self.concurrency = concurrency; self.rate = rate
        self.latencySeconds = latencySeconds; self.jsonPath = jsonPath; self.workerLogLevel = workerLogLevel
        self.durable = durable; self.profile = profile; self.finishedRows = finishedRows; self.maxRate = maxRate
        self.fcmLatencyMilliseconds = fcmLatencyMilliseconds; self.tokenBytes = tokenBytes; self.features = features
    }
}

/// What a `herald bench` run measured, as a table for people and as JSON.
public struct BenchFigures {
    public var cores = 0
    public var postgresVersion = ""
    public var build = ""
    public var database = ""
    public var fcm = ""
    public var settings: BenchSettings
    // phase 1
    public var enqueueSeconds = 0.0
    public var deliverSeconds = 0.0
    public var poolSeconds = 0.0
    public var throughputCompleted = 0
    public var messagesPerSecond = 0.0
    /// `--with events`: herald.events rows of kind completed for the phase's jobs.
    public var throughputEvents: Int?
    // phase 2
    public var latencyJobs = 0
    public var offeredRate = 0.0
    public var p50 = 0.0
    public var p99 = 0.0
    public var maxLatency = 0.0
    public var throughputCPU = CPUPerMessage()
    public var latencyWorkerCPUSeconds = 0.0
    /// The workers' CPU from after the warm-up until the offered jobs were done (/proc).
    public var latencyWindowWorkerCPUSeconds = 0.0
    // memory
    public var peakRSSBytes = 0
    // phase 3
    public var ceiling = CeilingResult(jobs: 0, seconds: 0, threads: 0, batch: 0)
    public var ceilingEnqueueSeconds = 0.0
    public var ceilingCPU = CPUPerMessage()
    // --profile
    public var throughputStatements: [StatementCost] = []
    public var ceilingStatements: [StatementCost] = []
    public var throughputStatementTotals = (calls: 0, milliseconds: 0.0)
    public var ceilingStatementTotals = (calls: 0, milliseconds: 0.0)
    // phase 4
    public var sends: SenderResult?
    public var sendsCPU = CPUPerMessage()

    public init(settings: BenchSettings) { self.settings = settings }

    public var ratio: Double { ceiling.jobsPerSecond > 0 ? messagesPerSecond / ceiling.jobsPerSecond : 0 }
    public var peakRSSMiB: Double { Double(peakRSSBytes) / 1_048_576 }

    /// `--with events`: what the throughput phase left in herald.events.
    public var featureNames: String {
        settings.features.isEmpty ? "none" : settings.features.map(\.rawValue).joined(separator: ", ")
    }

    public var eventsNote: String {
        guard let throughputEvents else { return "" }
        return "; \(grouped(throughputEvents)) completed events in herald.events"
    }

    public var table: String {
        let s = settings
        func row(_ name: String, _ value: String, _ target: String = "") -> String {
            name.padding(toLength: 50, withPad: " ", startingAt: 0)
                + String(repeating: " ", count: max(0, 12 - value.count)) + value
                + (target.isEmpty ? "" : "   target " + target)
        }
        var lines = [
            "",
            "Herald bench: \(build) build, \(cores) cores, PostgreSQL \(postgresVersion)",
            "  \(s.processes) worker processes x \(s.concurrency) in flight, claim batch \(s.batch), \(grouped(s.jobs)) jobs, "
                + (s.maxRate > 0 ? "project rate \(grouped(Int(s.maxRate)))/s (--max-rate)" : "no project rate")
                + (s.finishedRows > 0 ? " on a table holding \(grouped(s.finishedRows)) finished jobs (throughput and ceiling phases)" : ""),
            "  database: \(database); FCM: \(fcm)",
            "  features (--with): \(featureNames)",
            "",
            row("figure", "measured"),
            row("Herald end-to-end (msgs/s)", grouped(Int(messagesPerSecond.rounded())), ">= 20,000"),
            row("enqueue-to-delivered p50 @ \(grouped(s.rate))/s (ms)", fixed(p50, 1)),
            row("enqueue-to-delivered p99 @ \(grouped(s.rate))/s (ms)", fixed(p99, 1), "<= 20 at 2,000/s"),
            row("peak RSS per worker process (MiB)", fixed(peakRSSMiB, 1), "<= 64"),
            row("PostgreSQL ceiling, same SQL, no HTTP (jobs/s)", grouped(Int(ceiling.jobsPerSecond.rounded()))),
            row("end-to-end / ceiling", fixed(ratio, 2), ">= 0.8"),
            "",
            "CPU per delivered message (us, user + system)       end-to-end      ceiling  sends alone",
            cpuRow("workers (ceiling, sends alone: their threads)", throughputCPU.workers, ceilingCPU.workers, sendsCPU.workers, target: "<= 15"),
            cpuRow("PostgreSQL server processes", throughputCPU.postgres, ceilingCPU.postgres, nil,
                   target: ceilingCPU.postgres.map { "<= 1.5 x ceiling (\(fixed($0 * 1.5, 1)))" } ?? ""),
            cpuRow("FCM emulator", throughputCPU.emulator, nil, sendsCPU.emulator),
            cpuRow("all three", throughputCPU.total, ceilingCPU.total, sendsCPU.total),
            "",
            "Phases:",
            "  throughput: enqueue \(fixed(enqueueSeconds, 2)) s; first claim to last delivered \(fixed(deliverSeconds, 2)) s "
                + "(\(grouped(throughputCompleted)) completed); pool start to exit \(fixed(poolSeconds, 2)) s" + eventsNote,
            "  latency:    \(grouped(latencyJobs)) jobs offered at \(grouped(Int(offeredRate.rounded())))/s over \(fixed(s.latencySeconds, 0)) s; max \(fixed(maxLatency, 1)) ms; "
                + "worker CPU \(fixed(latencyWorkerCPUSeconds, 2)) s (\(fixed(latencyJobs > 0 ? latencyWorkerCPUSeconds * 1e6 / Double(latencyJobs) : 0, 1)) us per job offered, warm-up and idle included; "
                + "\(fixed(latencyJobs > 0 ? latencyWindowWorkerCPUSeconds * 1e6 / Double(latencyJobs) : 0, 1)) us per job while they were offered and delivered)",
            "  ceiling:    enqueue \(fixed(ceilingEnqueueSeconds, 2)) s; \(grouped(ceiling.jobs)) jobs in \(fixed(ceiling.seconds, 2)) s on \(ceiling.threads) connections",
            sends.map { "  sends alone: \(grouped($0.requests)) FCM requests (\(grouped($0.delivered)) answered 200) in \(fixed($0.seconds, 2)) s "
                + "(\(grouped(Int($0.requestsPerSecond.rounded())))/s) on \($0.threads) threads x \($0.concurrency) in flight: the workers' HTTP client, no PostgreSQL" }
                ?? "  sends alone: not run",
        ]
        if settings.profile {
            lines += profileLines("throughput", throughputStatements, throughputStatementTotals, delivered: throughputCompleted)
            lines += profileLines("ceiling", ceilingStatements, ceilingStatementTotals, delivered: ceiling.jobs)
        }
        if build == "debug" { lines.append("Note: a debug build; build with `swift build -c release` for real figures.") }
        return lines.joined(separator: "\n")
    }

    func cpuRow(_ name: String, _ live: Double?, _ ceiling: Double?, _ sends: Double?, target: String = "") -> String {
        func cell(_ value: Double?) -> String {
            let text = value.map { fixed($0, 1) } ?? "-"
            return String(repeating: " ", count: max(0, 13 - text.count)) + text
        }
        return name.padding(toLength: 50, withPad: " ", startingAt: 0) + cell(live) + cell(ceiling) + cell(sends)
            + (target.isEmpty ? "" : "   target " + target)
    }

    func profileLines(_ phase: String, _ statements: [StatementCost], _ totals: (calls: Int, milliseconds: Double), delivered: Int) -> [String] {
        let perJob = Double(max(1, delivered))
        var lines = ["", "Statements of the \(phase) phase (pg_stat_statements): \(grouped(totals.calls)) calls, "
                     + "\(fixed(totals.milliseconds, 0)) ms, \(fixed(Double(totals.calls) / perJob, 3)) calls and "
                     + "\(fixed(totals.milliseconds * 1000 / perJob, 1)) us per job",
                     "       calls        rows    total ms  us/job  statement"]
        for statement in statements {
            let text = statement.query.split(whereSeparator: { $0 == " " || $0 == "\n" || $0 == "\t" }).joined(separator: " ")
            func column(_ value: String, _ width: Int) -> String { String(repeating: " ", count: max(0, width - value.count)) + value }
            lines.append(column(grouped(statement.calls), 12) + column(grouped(statement.rows), 12)
                         + column(fixed(statement.totalMilliseconds, 0), 12) + column(fixed(statement.totalMilliseconds * 1000 / perJob, 1), 8)
                         + "  " + String(text.prefix(90)))
        }
        return lines
    }

    public var json: JSONValue {
        let s = settings
        func optional(_ value: Double?) -> JSONValue { value.map { .number(String(format: "%.2f", $0)) } ?? .null }
        func cpu(_ figures: CPUPerMessage) -> JSONValue {
            ["workers": optional(figures.workers), "postgresql": optional(figures.postgres), "emulator": optional(figures.emulator),
             "total": optional(figures.total)]
        }
        func number(_ value: Double, _ digits: Int) -> JSONValue { .number(String(format: "%.\(digits)f", value)) }
        return [
            "machine": ["cores": JSONValue(cores), "postgresql": .string(postgresVersion), "build": .string(build)],
            "settings": ["processes": JSONValue(s.processes), "concurrency": JSONValue(s.concurrency), "claim_batch": JSONValue(s.batch),
                         "jobs": JSONValue(s.jobs), "finished_rows": JSONValue(s.finishedRows), "max_rate": number(s.maxRate, 0), "fcm_latency_ms": JSONValue(s.fcmLatencyMilliseconds), "token_bytes": JSONValue(s.tokenBytes),
                         "features": .array(s.features.map { .string($0.rawValue) }), "rate": JSONValue(s.rate), "latency_seconds": number(s.latencySeconds, 1)],
            "end_to_end_msgs_per_second": number(messagesPerSecond, 0),
            "throughput": ["completed": JSONValue(throughputCompleted), "completed_events": throughputEvents.map { JSONValue($0) } ?? .null,
                           "enqueue_seconds": number(enqueueSeconds, 3),
                           "first_claim_to_last_delivered_seconds": number(deliverSeconds, 3), "pool_seconds": number(poolSeconds, 3)],
            "latency_ms": ["offered_rate": number(offeredRate, 0), "jobs": JSONValue(latencyJobs),
                           "p50": number(p50, 2), "p99": number(p99, 2), "max": number(maxLatency, 2)],
            "peak_rss_per_worker_mib": number(peakRSSMiB, 1),
            "postgresql_ceiling_jobs_per_second": number(ceiling.jobsPerSecond, 0),
            "ceiling": ["jobs": JSONValue(ceiling.jobs), "seconds": number(ceiling.seconds, 3), "threads": JSONValue(ceiling.threads),
                        "batch": JSONValue(ceiling.batch)],
            "end_to_end_over_ceiling": number(ratio, 3),
            "sends_alone": sends.map { ["requests": JSONValue($0.requests), "answered_200": JSONValue($0.delivered),
                                        "seconds": number($0.seconds, 3), "requests_per_second": number($0.requestsPerSecond, 0),
                                        "threads": JSONValue($0.threads), "in_flight_per_thread": JSONValue($0.concurrency)] } ?? .null,
            "cpu_us_per_message": ["end_to_end": cpu(throughputCPU), "ceiling": cpu(ceilingCPU), "sends_alone": cpu(sendsCPU),
                                   "latency_phase_workers_per_job_offered": number(latencyJobs > 0 ? latencyWorkerCPUSeconds * 1e6 / Double(latencyJobs) : 0, 2),
                                   "latency_window_workers_per_job": number(latencyJobs > 0 ? latencyWindowWorkerCPUSeconds * 1e6 / Double(latencyJobs) : 0, 2)],
            "targets": ["msgs_per_second_min": 20000, "ratio_min": 0.8, "p99_ms_max_at_2000_per_second": 20, "rss_mib_max": 64,
                        "worker_cpu_us_per_message_max": 15, "postgresql_cpu_over_ceiling_max": 1.5],
        ]
    }
}

/// CPU microseconds per delivered message of one phase; nil where it was not measured.
public struct CPUPerMessage {
    public var workers: Double?
    public var postgres: Double?
    public var emulator: Double?
    public var total: Double? {
        let parts = [workers, postgres, emulator].compactMap { $0 }
        return parts.isEmpty ? nil : parts.reduce(0, +)
    }

    public init() {}
    public init(seconds workers: Double?, postgres: Double?, emulator: Double?, messages: Int) {
        let scale = 1e6 / Double(max(1, messages))
        self.workers = workers.map { $0 * scale }
        self.postgres = postgres.map { $0 * scale }
        self.emulator = emulator.map { $0 * scale }
    }
}

public func grouped(_ value: Int) -> String {
    let digits = String(abs(value))
    var out = ""
    for (index, character) in digits.enumerated() {
        if index > 0 && (digits.count - index) % 3 == 0 { out.append(",") }
        out.append(character)
    }
    return (value < 0 ? "-" : "") + out
}

public func fixed(_ value: Double, _ digits: Int) -> String { String(format: "%.\(digits)f", value) }

public func monotonicSeconds() -> Double { Double(DispatchTime.now().uptimeNanoseconds) / 1e9 }
