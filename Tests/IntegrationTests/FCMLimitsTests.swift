import Emulator
import Foundation
import Glibc
import Postgres
import Testing
import TestSupport

/// `herald work` at FCM's limits, measured at FCM's side (the emulator's own record of what it
/// received and refused), not from Herald's counters.
@Suite(.serialized) struct FCMLimitsTests {
    /// The `q`-quantile of `values` (nearest rank).
    static func quantile(_ values: [Double], _ q: Double) -> Double {
        let sorted = values.sorted()
        guard !sorted.isEmpty else { return .nan }
        return sorted[min(sorted.count - 1, Int((Double(sorted.count) * q).rounded(.up)) - 1)]
    }

    /// Seconds since 1970 of each job's created_at, by token.
    static func createdAt(_ stack: WorkerStack, prefix: String) throws -> [String: Double] {
        let rows = try stack.connection.query("""
            SELECT message->>'token', extract(epoch FROM created_at)::float8 FROM herald.jobs WHERE message->>'token' LIKE $1 || '%'
            """, [.text(prefix)])
        var out: [String: Double] = [:]
        for row in 0..<rows.rowCount { out[rows[row, 0]!] = rows.double(row, 1)! }
        return out
    }

    /// With several processes the retry of a hot device's job is as likely as not claimed by
    /// another process than the one that saw the 429: its backoff grows all the same, from the
    /// job's own count of quota answers (herald.jobs.snoozes).
    @Test(arguments: [1, 2, 4]) func devicesAtTheirLimitBackOffAloneWhileEveryoneElseGoesOn(processes: Int) throws {
        // 20 devices whose first four sends draw a 429 naming the device's rate, then accept.
        let scenario = try Scenario.parse(#"""
            {"scripts": [{"prefix": "hot-", "answers": [
              {"error": "QUOTA_EXCEEDED", "quota": "device"}, {"error": "QUOTA_EXCEEDED", "quota": "device"},
              {"error": "QUOTA_EXCEEDED", "quota": "device"}, {"error": "QUOTA_EXCEEDED", "quota": "device"}]}]}
            """#)
        let stack = try WorkerStack(scenario: scenario)
        defer { stack.close() }
        try MachineLock.alone {
            let worker = try HeraldProcess(["work", "--processes", String(processes), "--poll-interval", "0.2"], environment: stack.environment)
            try worker.start()
            defer {
                worker.signal(SIGTERM)
                _ = worker.wait(timeout: 60)
            }
            try stack.enqueue(20, prefix: "hot-")
            // 3,000 messages to other devices over the same 6 s: 50 every 100 ms.
            let start = Date()
            for batch in 0..<60 {
                try stack.enqueue(50, prefix: "cold-\(batch)-")
                let due = start.addingTimeInterval(Double(batch + 1) * 0.1)
                if due > Date() { Thread.sleep(until: due) }
            }
            #expect(waitUntil(timeout: 60) { stack.emulator.deliveredMessages().count >= 3_020 },
                    "delivered \(stack.emulator.deliveredMessages().count) of 3,020: \(worker.output)")

            let created = try Self.createdAt(stack, prefix: "cold-")
            var waits: [Double] = []
            for message in stack.emulator.deliveredMessages() where message.target.hasPrefix("token:cold-") {
                if let at = created[String(message.target.dropFirst(6))] {
                    waits.append(Double(message.receivedAtMilliseconds) / 1000 - at)
                }
            }
            let p50 = Self.quantile(waits, 0.5), p99 = Self.quantile(waits, 0.99)
            print("\(processes) processes: other devices, enqueue to FCM: p50 \(Int(p50 * 1000)) ms, p99 \(Int(p99 * 1000)) ms over \(waits.count) messages")
            #expect(waits.count == 3_000)
            // The target is p99 <= 300 ms (figures: docs/fcm-limits.md); the bound asserted here
            // only separates "everyone else goes on" from "everyone waits for the devices' backoff"
            // (a minute before), so a busy machine does not fail it.
            #expect(p99 <= 2, "other devices waited p99 \(p99) s while 20 devices drew 429s")

            // Each hot device was refused four times, further apart each time, then delivered.
            let refusals = Dictionary(grouping: stack.emulator.quotaRefusals().filter { $0.target.hasPrefix("hot-") }, by: \.target)
            #expect(refusals.count == 20)
            var grew = 0
            for (token, list) in refusals {
                let times = list.map { Double($0.atMilliseconds) / 1000 }.sorted()
                let delivered = stack.emulator.deliveredMessages(token: token).map { Double($0.receivedAtMilliseconds) / 1000 }
                #expect(list.count == 4 && delivered.count == 1, "\(token): \(list.count) refusals, \(delivered.count) deliveries")
                guard times.count == 4, let last = delivered.first else { continue }
                let gaps = zip(times.dropFirst() + [last], times).map { $0 - $1 }
                // 1, 2, 4, 8 s, each with up to half again of jitter: every gap at least its floor.
                let floors = [1.0, 2, 4, 8]
                if zip(gaps, floors).allSatisfy({ $0 >= $1 - 0.05 }) && gaps[2] >= 1.5 * gaps[0] && gaps[3] > gaps[0] { grew += 1 }
                else { Issue.record("\(processes) processes, \(token): gaps \(gaps)") }
            }
            #expect(grew == 20)
            // A device's limit is a snooze: no attempt used up, nothing dead-lettered, no pause.
            #expect(try stack.count("SELECT count(*) FROM herald.jobs WHERE message->>'token' LIKE 'hot-%' AND state = 'completed' AND attempts = 1 AND snoozes = 4") == 20)
            #expect(try stack.count("SELECT count(*) FROM herald.dead_letters") == 0)
            #expect(try stack.count("SELECT count(*) FROM herald.project_pauses") == 0)
            #expect(stack.emulator.retryAfterViolations == 0)
        }
    }

    @Test func anUnannouncedProjectQuotaIsFoundNotHammered() throws {
        // FCM allows 300 a second (a bucket holding one second's worth); --max-rate stays at its
        // default of 10,000.
        var scenario = Scenario()
        scenario.quota = Scenario.Quota(perMinute: 18_000, burst: 300, window: .continuous)
        // The emulator's older answer (QuotaFailure project:ID with Retry-After): an unannounced
        // quota in that shape is still found as before.
        scenario.quotaAnswer = .legacy
        let stack = try WorkerStack(scenario: scenario)
        defer { stack.close() }
        let jobs = 9_000
        try stack.enqueue(jobs, prefix: "q-")
        let run = try MachineLock.alone { try stack.work(["--drain", "--processes", "2", "--poll-interval", "0.2"], timeout: 240) }
        #expect(run.status == 0, "\(run.output)")
        let stats = stack.emulator.statistics
        let requests = stats["requests"]?.intValue ?? 0
        let refused = stats["by_status"]?["429"]?.intValue ?? 0
        let times = stack.emulator.deliveredMessages().map(\.receivedAtMilliseconds).sorted()
        let seconds = Double((times.last ?? 0) - (times.first ?? 0)) / 1000
        let rate = Double(times.count) / max(seconds, 0.001)
        let share = Double(refused) / Double(max(1, requests))
        print("quota 300/s, --max-rate default: \(requests) requests, \(refused) answered 429 (\(String(format: "%.1f", share * 100)) %), \(times.count) delivered in \(String(format: "%.1f", seconds)) s = \(Int(rate))/s (\(String(format: "%.2f", rate / 300)) of the quota)")
        #expect(times.count == jobs)
        #expect(share <= 0.05, "\(refused) of \(requests) requests drew 429")
        // The target (0.8 of the quota) is the printed figure (0.81 to 1.03 in three CI runs on this
        // shared machine); the assertion catches a rate driven far down, as the fixed 78 % of 429s
        // once did (0.19 of the quota).
        #expect(rate >= 0.6 * 300, "drained at \(rate)/s")
        #expect(try stack.count("SELECT count(*) FROM herald.jobs WHERE state = 'completed'") == jobs)
        #expect(try stack.count("SELECT count(*) FROM herald.dead_letters") == 0)
        // Requests already on their way when a 429 was answered reach FCM after it; none is sent
        // later than that before its Retry-After.
        let late = stack.emulator.retryAfterViolations(laterThan: 200)
        print("Retry-After: \(stack.emulator.retryAfterViolations) requests arrived early, \(late) of them more than 200 ms after the 429")
        #expect(late == 0)
        // The rate every worker of the project uses now is the one found, below the ceiling.
        let adapted = try stack.connection.query("SELECT adapted_per_second FROM herald.project_rates").double(0, 0) ?? 0
        #expect(adapted > 0 && adapted < 10_000, "adapted rate \(adapted)")
        // herald stats shows it per project.
        let shown = try HeraldProcess.run(["stats"], environment: ["DATABASE_URL": stack.database.url], timeout: 60)
        #expect(shown.status == 0, "\(shown.output)")
        let line = shown.output.split(separator: "\n").first { $0.hasPrefix("e2e-project") }.map(String.init) ?? ""
        #expect(line.contains("/s") && line.contains("ago"), "herald stats: \(shown.output)")
        #expect(shown.output.contains("FCM PROJECT") && shown.output.contains("LOWERED TO"))
    }

    @Test func afterAPauseHeldRetriesComeBackGradually() throws {
        let stack = try WorkerStack()
        defer { stack.close() }
        // 100 jobs that fail once with 500 and 20 that draw the project's 429 with Retry-After: 2,
        // all answered at the same moment.
        try stack.enqueue(100, prefix: "fail-internal-1-r")
        try stack.enqueue(20, prefix: "fail-quota-2-p")
        let run = try MachineLock.alone { try stack.work(["--drain", "--processes", "1", "--poll-interval", "0.2"], timeout: 120) }
        #expect(run.status == 0, "\(run.output)")
        let retries = stack.emulator.deliveredMessages().filter { $0.target.hasPrefix("token:fail-internal-1-r") }
            .map(\.receivedAtMilliseconds).sorted()
        #expect(retries.count == 100)
        // The largest share of the held retries in any 50 ms window.
        var most = 0
        var low = 0
        for high in retries.indices {
            while retries[high] - retries[low] >= 50 { low += 1 }
            most = max(most, high - low + 1)
        }
        let spread = retries.isEmpty ? 0 : Double(retries.last! - retries.first!) / 1000
        let spreadLines = run.output.split(separator: "\n").filter { $0.contains("held retries spread") }.map { $0.split(separator: ": ").last ?? "" }
        print("100 held retries after a 2 s pause: at most \(most) in a 50 ms window, spread over \(String(format: "%.2f", spread)) s; the worker: \(spreadLines.joined(separator: "; "))")
        // When it fails: when each retry came back, and the worker's log (its pause and how many
        // held retries it spread).
        #expect(most <= 25, "\(most) of 100 held retries came back within 50 ms; ms after the first: \(retries.map { $0 - retries[0] }); the worker's log:\n\(run.output)")
        #expect(stack.emulator.retryAfterViolations == 0)
    }
}

/// One-time codes behind a 100,000-job campaign backlog, against an FCM that serves a fixed
/// number of sends a second and slows down as more requests are open: a benchmark that prints
/// its figures, measured at FCM's side, for the adaptive window and the fixed one.
@Suite(.serialized) struct WindowFollowsLatencyTests {
    struct Figures {
        var codesP50: Double
        var codesP99: Double
        var backlogRate: Double
        var codes: Int
    }

    /// Runs a pool for `seconds` behind the backlog, one code every 50 ms into queue `otp`.
    static func measure(fixed: Bool, capacity: Double, seconds: Double) throws -> Figures {
        var scenario = Scenario()
        scenario.capacityPerSecond = capacity
        let stack = try WorkerStack(scenario: scenario)
        defer { stack.close() }
        try stack.enqueue(100_000, prefix: "campaign-")
        var arguments = ["work", "--processes", "2", "--poll-interval", "0.2"]
        // The fixed window compared with is the one used before the window could grow: 256.
        if fixed { arguments += ["--fixed-concurrency", "--concurrency", "256"] }
        let worker = try HeraldProcess(arguments, environment: stack.environment)
        try worker.start()
        defer {
            worker.signal(SIGTERM)
            _ = worker.wait(timeout: 60)
        }
        // Warm up: the backlog is flowing.
        _ = waitUntil(timeout: 30) { stack.emulator.deliveredMessages().count > 2_000 }
        Thread.sleep(forTimeInterval: 2)
        let startCount = stack.emulator.deliveredMessages().count
        let start = Date()
        var sent = 0
        while Date().timeIntervalSince(start) < seconds {
            try stack.connection.query("""
                INSERT INTO herald.jobs (queue, message) VALUES ('otp', jsonb_build_object('token', 'code-' || $1::text, 'data', jsonb_build_object('k', 'v')))
                """, [.int(sent)])
            sent += 1
            Thread.sleep(until: start.addingTimeInterval(Double(sent) * 0.05))
        }
        let elapsed = Date().timeIntervalSince(start)
        let delivered = stack.emulator.deliveredMessages()
        let backlog = delivered.dropFirst(startCount).filter { $0.target.hasPrefix("token:campaign-") }
            .filter { Double($0.receivedAtMilliseconds) / 1000 <= start.timeIntervalSince1970 + elapsed }.count
        _ = waitUntil(timeout: 30) { stack.emulator.deliveredMessages().filter { $0.target.hasPrefix("token:code-") }.count >= sent }
        let created = try FCMLimitsTests.createdAt(stack, prefix: "code-")
        let waits = stack.emulator.deliveredMessages().filter { $0.target.hasPrefix("token:code-") }.compactMap { message in
            created[String(message.target.dropFirst(6))].map { Double(message.receivedAtMilliseconds) / 1000 - $0 }
        }
        return Figures(codesP50: FCMLimitsTests.quantile(waits, 0.5), codesP99: FCMLimitsTests.quantile(waits, 0.99),
                       backlogRate: Double(backlog) / elapsed, codes: waits.count)
    }

    @Test func codesBehindABacklogOnASlowingFCM() throws {
        let capacity = 2_000.0
        let (fixed, adaptive) = try MachineLock.alone {
            (try Self.measure(fixed: true, capacity: capacity, seconds: 15), try Self.measure(fixed: false, capacity: capacity, seconds: 15))
        }
        for (name, f) in [("fixed window (--fixed-concurrency)", fixed), ("adaptive window", adaptive)] {
            print("\(name): codes p50 \(Int(f.codesP50 * 1000)) ms, p99 \(Int(f.codesP99 * 1000)) ms (\(f.codes) codes); backlog \(Int(f.backlogRate))/s against an FCM serving \(Int(capacity))/s")
        }
        #expect(adaptive.codes == fixed.codes && adaptive.codes >= 290)
        // The targets (p99 <= 150 ms, >= 0.9 of the fixed window's drain) are figures printed
        // above and kept in docs/fcm-limits.md; asserted here is what a busy machine keeps: the
        // adaptive window gets codes to FCM sooner without giving up most of the drain.
        #expect(adaptive.codesP99 < fixed.codesP99, "codes reached FCM p99 \(adaptive.codesP99) s behind the backlog, \(fixed.codesP99) s with a fixed window")
        #expect(adaptive.backlogRate >= 0.7 * fixed.backlogRate, "the backlog drained at \(adaptive.backlogRate)/s against \(fixed.backlogRate)/s with a fixed window")
    }

    /// Drains `jobs` through two processes against a prompt FCM; sends a second at FCM's side.
    static func drainRate(fixed: Bool, jobs: Int) throws -> Double {
        let stack = try WorkerStack()
        defer { stack.close() }
        try stack.enqueue(jobs, prefix: "drain-")
        var arguments = ["--drain", "--processes", "2", "--poll-interval", "0.2"]
        if fixed { arguments += ["--fixed-concurrency", "--concurrency", "256"] }
        let run = try stack.work(arguments, timeout: 240)
        #expect(run.status == 0, "\(run.output)")
        let times = stack.emulator.deliveredMessages().map(\.receivedAtMilliseconds).sorted()
        #expect(times.count == jobs)
        return Double(times.count) / max(0.001, Double((times.last ?? 0) - (times.first ?? 0)) / 1000)
    }

    @Test func aPromptFCMKeepsTheThroughputOfAFixedWindow() throws {
        let (fixed, adaptive) = try MachineLock.alone {
            (try Self.drainRate(fixed: true, jobs: 30_000), try Self.drainRate(fixed: false, jobs: 30_000))
        }
        print("30,000 jobs against a prompt FCM: fixed window \(Int(fixed))/s, adaptive window \(Int(adaptive))/s (\(String(format: "%.2f", adaptive / fixed)))")
        #expect(adaptive >= 0.75 * fixed, "the adaptive window drained at \(adaptive)/s against \(fixed)/s")
    }
}
