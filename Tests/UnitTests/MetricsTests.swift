import Foundation
import JSON
import Metrics
import Queue
import Testing
@testable import Worker

/// The Prometheus text format and the shared-memory counters behind a pool's /metrics.
@Suite struct MetricsTests {
    @Test func countersAndGaugesHaveHelpTypeAndEscapedLabels() {
        var out = Exposition()
        out.family("demo_jobs_total", .counter, help: "Jobs done.\nSecond line with a \\ backslash.")
        out.sample("demo_jobs_total", labels: [("queue", "mail \"urgent\"\\eu\nwest"), ("outcome", "completed")], 3)
        out.family("demo_temperature", .gauge, help: "A gauge.")
        out.sample("demo_temperature", 0.25)
        out.sample("demo_temperature", labels: [("room", "a")], 2.0)
        out.sample("demo_temperature", labels: [("room", "b")], Double.infinity)
        #expect(out.text == """
            # HELP demo_jobs_total Jobs done.\\nSecond line with a \\\\ backslash.
            # TYPE demo_jobs_total counter
            demo_jobs_total{queue="mail \\"urgent\\"\\\\eu\\nwest",outcome="completed"} 3
            # HELP demo_temperature A gauge.
            # TYPE demo_temperature gauge
            demo_temperature 0.25
            demo_temperature{room="a"} 2
            demo_temperature{room="b"} +Inf

            """)
    }

    @Test func histogramBucketsAreCumulativeAndInfEqualsCount() {
        var out = Exposition()
        out.family("demo_seconds", .histogram, help: "Durations.")
        out.histogram("demo_seconds", labels: [("queue", "q")], bounds: [0.1, 1], counts: [2, 3, 4], sum: 7.5)
        #expect(out.text == """
            # HELP demo_seconds Durations.
            # TYPE demo_seconds histogram
            demo_seconds_bucket{queue="q",le="0.1"} 2
            demo_seconds_bucket{queue="q",le="1"} 5
            demo_seconds_bucket{queue="q",le="+Inf"} 9
            demo_seconds_sum{queue="q"} 7.5
            demo_seconds_count{queue="q"} 9

            """)
    }

    @Test func namesAreChecked() {
        #expect(Exposition.isValidName("herald_messages_total") && Exposition.isValidName("a:b_c9"))
        #expect(!Exposition.isValidName("9lives") && !Exposition.isValidName("has-dash") && !Exposition.isValidName(""))
        #expect(Exposition.isValidLabelName("queue") && !Exposition.isValidLabelName("__reserved") && !Exposition.isValidLabelName("a:b"))
    }

    /// A worker keeps nothing per job once its outcome is recorded, with a slot or without one
    /// (herald bench's pools have none): a million jobs must not grow the worker by a million entries.
    @Test func recordedJobsLeaveNothingBehind() throws {
        let jobs = (1...500).map { ClaimedJob(id: $0, queue: $0 % 2 == 0 ? "default" : "mail", message: Array(#"{"token":"t"}"#.utf8), attempt: 1) }
        let outcomes = jobs.map { $0.outcome(.completed(messageName: "projects/p/messages/1")) }

        let unwatched = WorkerMetrics(slot: nil)
        unwatched.claimed(jobs)
        unwatched.recorded(outcomes, stale: 0)
        #expect(unwatched.jobsAwaitingRecord == 0)

        let region = try SlotRegion.create()
        let watched = WorkerMetrics(slot: SlotWriter(region: region, pid: 101))
        watched.claimed(jobs)
        #expect(watched.jobsAwaitingRecord == 500)
        watched.recorded(outcomes, stale: 0)
        #expect(watched.jobsAwaitingRecord == 0)
        let counts = SlotSnapshot(region)
        #expect(counts.queues["default"]?[.completed] == 250 && counts.queues["mail"]?[.completed] == 250)
    }

    @Test func aSlotKeepsItsCountsAcrossAWorkerRestart() throws {
        let region = try SlotRegion.create()
        let first = SlotWriter(region: region, pid: 101)
        first.recorded(queue: "default", outcome: .completed, count: 5)
        first.recorded(queue: "mail", outcome: .dead)
        first.answered(code: "OK", seconds: 0.003)
        first.answered(code: "UNREGISTERED", seconds: 0.2)
        first.delivered(queue: "default", secondsSinceDue: 2)
        first.setInFlight(7)
        first.setDatabaseConnected(true)
        first.setTokenHeld(true)
        first.setTokenFetches(1)
        // The worker dies; the supervisor clears what described the process and starts another.
        region.resetProcessState()
        var afterCrash = SlotSnapshot(region)
        #expect(afterCrash.pid == 0 && afterCrash.inFlight == 0 && !afterCrash.databaseConnected && !afterCrash.tokenHeld)
        #expect(afterCrash.queues["default"]?[.completed] == 5, "counts survive the process")
        let second = SlotWriter(region: region, pid: 102)
        second.recorded(queue: "mail", outcome: .dead, count: 2)
        second.recorded(queue: "default", outcome: .completed)
        second.answered(code: "OK", seconds: 40)
        second.setTokenFetches(1)
        afterCrash = SlotSnapshot(region)
        #expect(afterCrash.pid == 102)
        #expect(afterCrash.queues["default"]?[.completed] == 6)
        #expect(afterCrash.queues["mail"]?[.dead] == 3)
        #expect(afterCrash.queues.count == 2, "the second process reused the first one's queue entries")
        #expect(afterCrash.requestsByCode == ["OK": 2, "UNREGISTERED": 1])
        #expect(afterCrash.tokenFetches == 2)
        // 0.003 s in the first bucket, 0.2 s in le=0.25, 40 s above the last bound (30 s).
        #expect(afterCrash.durationCounts.reduce(0, +) == 3)
        #expect(afterCrash.durationCounts[0] == 1 && afterCrash.durationCounts[SlotRegion.durationBounds.firstIndex(of: 0.25)!] == 1)
        #expect(afterCrash.durationCounts.last == 1)
        #expect(abs(afterCrash.durationSumSeconds - 40.203) < 1e-6)
        #expect(afterCrash.queues["default"]?.latencyCounts[SlotRegion.latencyBounds.firstIndex(of: 2.5)!] == 1)
    }

    @Test func slotsOfAPoolAreSummedByLabel() throws {
        let a = try SlotRegion.create(), b = try SlotRegion.create()
        SlotWriter(region: a, pid: 1).recorded(queue: "q", outcome: .retried, count: 2)
        SlotWriter(region: b, pid: 2).recorded(queue: "q", outcome: .retried, count: 3)
        SlotWriter(region: b, pid: 2).answered(code: "TRANSPORT", seconds: 1)
        var totals = SlotSnapshot(a)
        totals.add(SlotSnapshot(b))
        #expect(totals.queues["q"]?[.retried] == 5 && totals.messages(.retried) == 5 && totals.requests == 1)
    }

    @Test func longAndTooManyLabelValuesStayDistinctThenOverflow() throws {
        let long1 = String(repeating: "x", count: 300) + "1", long2 = String(repeating: "x", count: 300) + "2"
        #expect(SlotRegion.shortened(long1) != SlotRegion.shortened(long2))
        #expect(SlotRegion.shortened(long1).utf8.count <= SlotRegion.nameBytes)
        #expect(SlotRegion.shortened("short") == "short")
        let region = try SlotRegion.create()
        let writer = SlotWriter(region: region, pid: 1)
        writer.recorded(queue: long1, outcome: .completed)
        writer.recorded(queue: long2, outcome: .completed, count: 2)
        for index in 0..<(SlotRegion.queueCapacity + 10) { writer.recorded(queue: "queue-\(index)", outcome: .completed) }
        let snapshot = SlotSnapshot(region)
        #expect(snapshot.queues[SlotRegion.shortened(long2)]?[.completed] == 2)
        #expect(snapshot.queues.count == SlotRegion.queueCapacity)
        #expect(snapshot.messages(.completed) == 3 + UInt64(SlotRegion.queueCapacity + 10), "nothing is lost past the table's end")
        // Two long names and 125 others fill the 127 named entries; the last 13 queues share "(other)".
        #expect((snapshot.queues[SlotRegion.overflowLabel]?[.completed] ?? 0) == UInt64((SlotRegion.queueCapacity + 10) - (SlotRegion.queueCapacity - 1 - 2)))
    }

    @Test func procStatIsReadFromAfterTheCommandName() {
        // Field 2 may hold spaces and parentheses; utime 14, stime 15, cutime 16, cstime 17, rss 24.
        let line = "42 (herald (work) x) S 1 42 42 0 -1 4194560 100 0 0 0 250 50 30 20 20 0 3 0 100 123456789 2048 18446744073709551615 1"
        let stats = ProcessStatistics.parse(stat: line, ticksPerSecond: 100, pageSize: 4096)
        #expect(stats == ProcessStatistics(cpuSeconds: 3, reapedChildrenCPUSeconds: 0.5, residentBytes: 2048 * 4096))
        #expect(ProcessStatistics.parse(stat: "garbage", ticksPerSecond: 100, pageSize: 4096) == nil)
        #expect((ProcessStatistics.read(pid: getpid())?.residentBytes ?? 0) > 0)
    }

    @Test func thePoolPageListsEveryFamilyAndAllOutcomesOfEachQueue() throws {
        let region = try SlotRegion.create()
        SlotWriter(region: region, pid: 1).recorded(queue: "marketing", outcome: .pruned)
        let text = PoolExposition.render(PoolReading(totals: SlotSnapshot(region), workerProcesses: 3, quotaPaused: true,
                                                     version: "1.2.3", cpuSeconds: 1.5, residentBytes: 1000))
        for family in ["herald_messages_total counter", "herald_fcm_requests_total counter", "herald_fcm_request_duration_seconds histogram",
                       "herald_delivery_latency_seconds histogram", "herald_in_flight gauge", "herald_worker_processes gauge",
                       "herald_quota_paused gauge", "herald_access_token_refreshes_total counter", "herald_build_info gauge",
                       "process_resident_memory_bytes gauge", "process_cpu_seconds_total counter"] {
            #expect(text.contains("# TYPE \(family)\n"), "\(family)")
        }
        for outcome in MessageOutcome.allCases {
            let value = outcome == .pruned ? 1 : 0
            #expect(text.contains("herald_messages_total{queue=\"marketing\",outcome=\"\(outcome.rawValue)\",provider=\"fcm\"} \(value)\n"))
        }
        #expect(text.contains("herald_worker_processes 3\nherald_quota_paused 1") == false)  // a HELP line comes between
        #expect(text.contains("herald_quota_paused 1\n") && text.contains("herald_build_info{version=\"1.2.3\"} 1\n"))
        #expect(text.contains("herald_delivery_latency_seconds_bucket{queue=\"marketing\",provider=\"fcm\",le=\"+Inf\"} 0\n"))
    }

    @Test func healthAndReadinessNameWhatIsMissing() throws {
        let monitor = try PoolMonitor(processes: 2)
        #expect(monitor.health().healthy == false && monitor.health().text.contains("not started yet"))
        monitor.workerStarted(slot: 0, pid: 501)
        monitor.workerStarted(slot: 1, pid: 502)
        #expect(monitor.health().healthy)
        let notReady = monitor.readiness()
        #expect(!notReady.ready && notReady.text.contains("worker slot 0 (pid 501): still starting"))
        let first = SlotWriter(region: monitor.regions[0], pid: 501)
        first.setDatabaseConnected(true)
        first.setTokenHeld(true)
        let second = SlotWriter(region: monitor.regions[1], pid: 502)
        second.setTokenHeld(true)
        let partly = monitor.readiness()
        #expect(!partly.ready && partly.text.contains("worker slot 1 (pid 502): no PostgreSQL connection") && !partly.text.contains("slot 0"))
        second.setDatabaseConnected(true)
        #expect(monitor.readiness().ready)
        monitor.workerExited(slot: 1, why: "pid 502 was killed by signal 9")
        #expect(!monitor.health().healthy && monitor.health().text.contains("pid 502 was killed by signal 9"))
        #expect(!monitor.readiness().ready)
        monitor.workerStarted(slot: 1, pid: 503)
        #expect(monitor.readiness().text.contains("worker slot 1 (pid 503): still starting"), "a new process is not ready on its predecessor's flags")
    }

    @Test func thePoolIsPausedOnlyUntilTheQuotaWaitIsOver() throws {
        let monitor = try PoolMonitor(processes: 2)
        SlotWriter(region: monitor.regions[1], pid: 7).setProjectPausedUntil(1_000)
        #expect(monitor.metricsText(now: 999).contains("\nherald_quota_paused 1\n"))
        #expect(monitor.metricsText(now: 1_001).contains("\nherald_quota_paused 0\n"))
    }

    @Test func eachProjectsWorkersAreCountedUnderItsProjectLabelAndTheJobsOfNoProjectUnderNone() throws {
        // Slots as the supervisor numbers them: the jobs of no project, then alpha's two workers, then beta's.
        let monitor = try PoolMonitor(slotProjects: [nil, "alpha", "alpha", "beta"])
        let none = SlotWriter(region: monitor.regions[0], pid: 1)
        none.recorded(queue: "default", outcome: .completed, count: 5)
        none.answered(code: "OK", seconds: 0.01)
        for slot in 1...2 {
            let alpha = SlotWriter(region: monitor.regions[slot], pid: Int32(slot + 1))
            alpha.recorded(queue: "default", outcome: .completed, count: 10 * slot)
            alpha.recorded(queue: "mail", outcome: .dead)
            alpha.setInFlight(slot)
            alpha.setProjectRate(Double(100 * slot))
        }
        let beta = SlotWriter(region: monitor.regions[3], pid: 4)
        beta.recorded(queue: "default", outcome: .completed, count: 7)
        beta.quotaExceeded("project")
        beta.setProjectPausedUntil(1_000)
        let text = monitor.metricsText(now: 999)
        #expect(text.contains("herald_messages_total{queue=\"default\",outcome=\"completed\",provider=\"fcm\"} 5\n"), "the jobs of no project carry no project label")
        #expect(text.contains("herald_messages_total{queue=\"default\",outcome=\"completed\",provider=\"fcm\",project=\"alpha\"} 30\n"), "alpha's two workers summed")
        #expect(text.contains("herald_messages_total{queue=\"mail\",outcome=\"dead\",provider=\"fcm\",project=\"alpha\"} 2\n"))
        #expect(text.contains("herald_messages_total{queue=\"default\",outcome=\"completed\",provider=\"fcm\",project=\"beta\"} 7\n"))
        #expect(!text.contains("queue=\"mail\",outcome=\"dead\",project=\"beta\""), "a queue shows only under the projects that had it")
        #expect(text.contains("herald_in_flight{project=\"alpha\"} 3\n") && text.contains("herald_in_flight 0\n"))
        #expect(text.contains("herald_project_rate_per_second{project=\"alpha\"} 100\n"), "a project's rate is its slowest worker's")
        #expect(text.contains("herald_quota_paused{project=\"beta\"} 1\n") && text.contains("herald_quota_paused{project=\"alpha\"} 0\n")
                && text.contains("herald_quota_paused 0\n"), "only beta is paused by its quota answer")
        #expect(text.contains("herald_fcm_quota_exceeded_total{limit=\"project\",project=\"beta\"} 1\n"))
        #expect(text.contains("herald_fcm_requests_total{code=\"OK\"} 1\n"))
        #expect(text.contains("herald_worker_processes 0\n"), "worker processes stay one pool-wide gauge")
        // A pool without projects shows exactly the series it always did: no project label anywhere.
        let plain = try PoolMonitor(processes: 2)
        SlotWriter(region: plain.regions[1], pid: 9).recorded(queue: "default", outcome: .completed)
        #expect(!plain.metricsText().contains("project=") && plain.metricsText().contains("herald_messages_total{queue=\"default\",outcome=\"completed\",provider=\"fcm\"} 1\n"))
    }

    /// The sample of `series` on a /metrics page (nil: no such line).
    static func value(_ text: String, _ series: String) -> Double? {
        for line in text.split(separator: "\n") where line.hasPrefix(series + " ") {
            return Double(line.dropFirst(series.count + 1))
        }
        return nil
    }

    @Test func apnsAnswersAreTheirOwnFamilyNeverFCMs() throws {
        // A pool sending for an FCM project and an APNs app: Apple's Unregistered (a token's
        // routine pruning) must not count as an FCM error, nor its times as FCM's.
        let monitor = try PoolMonitor(processes: 2)
        let first = SlotWriter(region: monitor.regions[0], pid: 1), second = SlotWriter(region: monitor.regions[1], pid: 2)
        for _ in 0..<6 { first.answered(code: "OK", seconds: 0.02, project: "shop") }
        for _ in 0..<4 { second.answered(code: "OK", seconds: 0.3, project: "shop-ios", apns: true) }
        second.answered(code: "Unregistered", seconds: 0.3, project: "shop-ios", apns: true)
        first.answered(code: "TRANSPORT", seconds: 5, project: "shop-ios", apns: true)
        let text = monitor.metricsText(now: 999)
        func value(_ series: String) -> Double? { Self.value(text, series) }
        #expect(value("herald_apns_requests_total{code=\"OK\",project=\"shop-ios\"}") == 4)
        #expect(value("herald_apns_requests_total{code=\"Unregistered\",project=\"shop-ios\"}") == 1)
        #expect(value("herald_apns_requests_total{code=\"TRANSPORT\",project=\"shop-ios\"}") == 1)
        #expect(value("herald_fcm_requests_total{code=\"OK\",project=\"shop\"}") == 6)
        #expect(!text.contains("herald_fcm_requests_total{code=\"Unregistered\""), "an APNs reason among FCM's answers")
        #expect(!text.contains("herald_fcm_requests_total{code=\"OK\",project=\"shop-ios\"}"))
        #expect(monitor.totals().requests == 6 && monitor.totals().apnsRequests == 6)
        // Durations apart: FCM's histogram holds its 6 quick answers only, APNs's the other 6.
        #expect(value("herald_fcm_request_duration_seconds_count") == 6)
        #expect(value("herald_fcm_request_duration_seconds_bucket{le=\"0.025\"}") == 6)
        #expect(value("herald_apns_request_duration_seconds_count") == 6)
        #expect(value("herald_apns_request_duration_seconds_bucket{le=\"0.25\"}") == 0)
        // Outcomes: one family for every provider, told apart by the provider label; a sum over
        // it is the queue's total, as before.
        first.recorded(queue: "default", outcome: .completed, count: 6)
        second.recorded(queue: SlotRegion.queueEntry("default", provider: "apns"), outcome: .completed, count: 4)
        second.recorded(queue: SlotRegion.queueEntry("default", provider: "apns"), outcome: .pruned, count: 1)
        second.delivered(queue: SlotRegion.queueEntry("default", provider: "apns"), secondsSinceDue: 0.3)
        let outcomes = monitor.metricsText(now: 999)
        #expect(Self.value(outcomes, "herald_messages_total{queue=\"default\",outcome=\"completed\",provider=\"fcm\"}") == 6)
        #expect(Self.value(outcomes, "herald_messages_total{queue=\"default\",outcome=\"completed\",provider=\"apns\"}") == 4)
        #expect(Self.value(outcomes, "herald_messages_total{queue=\"default\",outcome=\"pruned\",provider=\"apns\"}") == 1)
        #expect(Self.value(outcomes, "herald_delivery_latency_seconds_count{queue=\"default\",provider=\"apns\"}") == 1)
        #expect(!outcomes.contains("queue=\"apns"), "the provider never leaks into the queue label")
        // A pool that never sent to APNs shows no APNs family at all.
        let fcmOnly = try PoolMonitor(processes: 1)
        SlotWriter(region: fcmOnly.regions[0], pid: 3).answered(code: "OK", seconds: 0.01)
        #expect(!fcmOnly.metricsText(now: 999).contains("herald_apns_requests_total"))
    }

    @Test func workersCarryingManyProjectsShowEachProjectUnderItsLabelAndTheSumsStayThePools() throws {
        // The default shape: two workers, each carrying every project (slots of no project).
        let monitor = try PoolMonitor(processes: 2)
        let first = SlotWriter(region: monitor.regions[0], pid: 1), second = SlotWriter(region: monitor.regions[1], pid: 2)
        for _ in 0..<4 { first.answered(code: "OK", seconds: 0.01, project: "alpha") }
        for _ in 0..<3 { second.answered(code: "OK", seconds: 0.01, project: "alpha") }
        second.answered(code: "INVALID_ARGUMENT", seconds: 0.01, project: "alpha")
        for _ in 0..<5 { first.answered(code: "OK", seconds: 0.01, project: "beta") }
        second.answered(code: "QUOTA_EXCEEDED", seconds: 0.01, project: "beta")
        second.quotaExceeded("project", project: "beta")
        second.snoozed(project: "beta")
        second.setProjectPausedUntil(1_000, project: "beta")
        first.setProjectRate(400, project: "alpha")
        second.setProjectRate(250, project: "alpha")
        // The jobs of no project: counted as before, without a label.
        first.answered(code: "OK", seconds: 0.01)
        first.answered(code: "OK", seconds: 0.01)
        first.recorded(queue: "default", outcome: .completed, count: 14)
        first.setInFlight(3)
        let text = monitor.metricsText(now: 999)
        func value(_ series: String) -> Double? { Self.value(text, series) }
        #expect(value("herald_fcm_requests_total{code=\"OK\",project=\"alpha\"}") == 7, "alpha's answers summed over both workers")
        #expect(value("herald_fcm_requests_total{code=\"INVALID_ARGUMENT\",project=\"alpha\"}") == 1)
        #expect(value("herald_fcm_requests_total{code=\"OK\",project=\"beta\"}") == 5)
        #expect(value("herald_fcm_requests_total{code=\"QUOTA_EXCEEDED\",project=\"beta\"}") == 1)
        #expect(value("herald_fcm_requests_total{code=\"OK\"}") == 2, "the jobs of no project stay unlabelled")
        #expect(value("herald_fcm_requests_total{code=\"QUOTA_EXCEEDED\"}") == 0)
        // A sum over project is the pool's total, as the totals read from the slots.
        let totals = monitor.totals()
        let page = text.split(separator: "\n").filter { $0.hasPrefix("herald_fcm_requests_total{") }
            .reduce(0.0) { $0 + Double($1.split(separator: " ").last!)! }
        #expect(UInt64(page) == totals.requests && totals.requests == 16)
        #expect(value("herald_fcm_quota_exceeded_total{limit=\"project\",project=\"beta\"}") == 1)
        #expect(value("herald_fcm_quota_exceeded_total{limit=\"project\"}") == 0)
        #expect(value("herald_jobs_snoozed_total{project=\"beta\"}") == 1 && value("herald_jobs_snoozed_total") == 0)
        #expect(value("herald_quota_paused{project=\"beta\"}") == 1 && value("herald_quota_paused{project=\"alpha\"}") == 0)
        #expect(value("herald_quota_paused") == 0, "beta's pause is beta's alone")
        #expect(value("herald_project_rate_per_second{project=\"alpha\"}") == 250, "a project's rate is its slowest worker's")
        // Series of the worker as a whole stay unlabelled, once.
        #expect(value("herald_in_flight") == 3 && !text.contains("herald_in_flight{project="))
        #expect(value("herald_messages_total{queue=\"default\",outcome=\"completed\",provider=\"fcm\"}") == 14 && !text.contains("herald_messages_total{queue=\"default\",outcome=\"completed\",provider=\"fcm\",project="))
        #expect(!text.contains("herald_fcm_request_duration_seconds_count{project="))
        #expect(monitor.metricsText(now: 1_001).contains("herald_quota_paused{project=\"beta\"} 0\n"), "the pause ends")
    }

    @Test func projectsBeyondTheTableGoToTheOverflowRowAndADroppedProjectsRowIsReused() throws {
        let monitor = try PoolMonitor(processes: 1)
        // Three rows: two projects by name, the third for the rest.
        let writer = SlotWriter(region: monitor.regions[0], pid: 1, projectRows: 3)
        writer.answered(code: "OK", seconds: 0.01, project: "alpha")
        writer.answered(code: "OK", seconds: 0.01, project: "beta")
        writer.answered(code: "OK", seconds: 0.01, project: "beta")
        writer.answered(code: "UNAVAILABLE", seconds: 0.01, project: "gamma")
        writer.answered(code: "OK", seconds: 0.01, project: "delta")
        writer.setProjectRate(50, project: "delta")
        var snapshot = SlotSnapshot(monitor.regions[0])
        #expect(snapshot.projects["alpha"]?.requests == 1 && snapshot.projects["beta"]?.requests == 2)
        #expect(snapshot.projects["gamma"] == nil && snapshot.projects["delta"] == nil)
        #expect(snapshot.projects[SlotRegion.overflowLabel]?.requestsByCode == ["UNAVAILABLE": 1, "OK": 1])
        #expect(snapshot.projects.values.reduce(0) { $0 + $1.requests } == snapshot.requests, "nothing is lost past the table's end")
        var text = monitor.metricsText()
        #expect(text.contains("herald_fcm_requests_total{code=\"OK\",project=\"(other)\"} 1\n"))
        #expect(!text.contains("herald_project_rate_per_second{project=\"(other)\"}"), "the overflow row stands for many projects: no rate")

        // alpha dropped: its counts stay shown until a new project needs its row.
        writer.projectDropped("alpha")
        #expect(SlotSnapshot(monitor.regions[0]).projects["alpha"]?.requests == 1)
        // beta dropped and taken up again goes on in its row.
        writer.projectDropped("beta")
        writer.answered(code: "OK", seconds: 0.01, project: "beta")
        // epsilon takes the row of alpha (dropped longest ago); alpha's count moves to the overflow row.
        writer.answered(code: "OK", seconds: 0.01, project: "epsilon")
        snapshot = SlotSnapshot(monitor.regions[0])
        #expect(snapshot.projects["alpha"] == nil && snapshot.projects["epsilon"]?.requests == 1)
        #expect(snapshot.projects["beta"]?.requests == 3)
        #expect(snapshot.projects[SlotRegion.overflowLabel]?.requestsByCode == ["UNAVAILABLE": 1, "OK": 2])
        #expect(snapshot.projects.values.reduce(0) { $0 + $1.requests } == snapshot.requests && snapshot.requests == 7)

        // A new worker of the slot reads the rows back and adds to them.
        let next = SlotWriter(region: monitor.regions[0], pid: 2, projectRows: 3)
        next.answered(code: "OK", seconds: 0.01, project: "epsilon")
        next.answered(code: "OK", seconds: 0.01, project: "zeta")
        snapshot = SlotSnapshot(monitor.regions[0])
        #expect(snapshot.projects["epsilon"]?.requests == 2 && snapshot.projects["zeta"] == nil)
        #expect(snapshot.projects[SlotRegion.overflowLabel]?.requests == 4)
        text = monitor.metricsText()
        #expect(text.contains("herald_fcm_requests_total{code=\"OK\",project=\"epsilon\"} 2\n"))
        #expect(text.contains("herald_fcm_requests_total{code=\"OK\"} 0\n"), "every answer was a project's")
    }

    @Test func theFullProjectTableKeeps255ProjectsApart() throws {
        let region = try SlotRegion.create()
        let writer = SlotWriter(region: region, pid: 1)
        for index in 0..<300 { writer.answered(code: "OK", seconds: 0.01, project: "project-\(index)") }
        let snapshot = SlotSnapshot(region)
        #expect(snapshot.projects.count == SlotRegion.projectCapacity)
        #expect(snapshot.projects["project-254"]?.requests == 1 && snapshot.projects["project-255"] == nil)
        #expect(snapshot.projects[SlotRegion.overflowLabel]?.requests == UInt64(300 - (SlotRegion.projectCapacity - 1)))
        #expect(SlotRegion.byteCount < 200 * 1024, "a slot stays small: \(SlotRegion.byteCount) bytes")
    }

    @Test func adminAddressesAreParsed() {
        #expect(AdminServer.parseAddress("127.0.0.1:9464")! == ("127.0.0.1", 9464))
        #expect(AdminServer.parseAddress("0.0.0.0:0")! == ("0.0.0.0", 0))
        #expect(AdminServer.parseAddress("[::1]:9464")! == ("::1", 9464))
        #expect(AdminServer.parseAddress("localhost:80")! == ("localhost", 80))
        for bad in ["9464", ":9464", "127.0.0.1:", "127.0.0.1:65536", "127.0.0.1:-1", "::1:9464", "host:9x", "[]:1"] {
            #expect(AdminServer.parseAddress(bad) == nil, "\(bad)")
        }
    }

    @Test func jsonLogLinesCarryTheJobsFields() throws {
        let lines = LockedLines()
        let json = Logger(level: .info, format: .json, prefix: "herald work") { lines.append($0) }
        json.info("dead-lettered: INVALID_ARGUMENT: \"bad\"\nsecond line", ["job_id": 42, "queue": "mail", "code": "INVALID_ARGUMENT"])
        json.debug("not shown at info")
        let text = Logger(level: .info, format: .text, prefix: "herald work") { lines.append($0) }
        text.warning("retrying", ["job_id": 7, "queue": "two words"])
        let captured = lines.all
        #expect(captured.count == 2)
        #expect(captured[0].hasSuffix("}\n") && captured[0].filter { $0 == "\n" }.count == 1, "one object per line")
        let object = try JSONValue.parse(Array(captured[0].utf8))
        #expect(object["level"]?.stringValue == "info")
        #expect(object["msg"]?.stringValue == "dead-lettered: INVALID_ARGUMENT: \"bad\"\nsecond line")
        #expect(object["pid"]?.intValue == Int(getpid()))
        #expect(object["job_id"]?.intValue == 42 && object["queue"]?.stringValue == "mail" && object["code"]?.stringValue == "INVALID_ARGUMENT")
        #expect(object["time"]?.stringValue?.hasSuffix("Z") == true)
        #expect(captured[1].contains(" warn herald work: retrying job_id=7 queue=\"two words\"\n"))
        #expect(Logger.Format(name: "JSON") == .json && Logger.Format(name: "yaml") == nil)
    }
}

final class LockedLines: @unchecked Sendable {
    private let lock = NSLock()
    private var lines: [String] = []
    func append(_ line: String) { lock.lock(); lines.append(line); lock.unlock() }
    var all: [String] { lock.lock(); defer { lock.unlock() }; return lines }
}
