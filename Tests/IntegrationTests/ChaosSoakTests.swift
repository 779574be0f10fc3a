import Foundation
import Testing
import TestSupport

/// Two minutes of benchmarks/chaos-soak: two pools, a steady stream of jobs, and at random a
/// worker or a pool killed, PostgreSQL restarted, FCM down, one pool's database path silent and
/// a 429 storm. The script checks every job and prints a summary; this test runs it as a process
/// and reads that summary (the 10-minute figures are in docs/resilience.md).
@Suite(.serialized) struct ChaosSoakTests {
    @Test func twoMinutesOfRandomFaultsLoseNothing() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let script = root.appendingPathComponent("benchmarks/chaos-soak").path
        let herald = try HeraldProcess.binary()
        let log = NSTemporaryDirectory() + "herald-chaos-soak-\(UUID().uuidString).log"
        FileManager.default.createFile(atPath: log, contents: nil)
        defer { try? FileManager.default.removeItem(atPath: log) }

        // The soak measures at FCM's side and kills processes by the pool: alone on the machine.
        let status: Int32? = try MachineLock.alone {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = ["python3", script, "--duration", "120", "--seed", "20", "--herald", herald]
            let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: log))
            process.standardOutput = handle
            process.standardError = handle
            process.standardInput = FileHandle.nullDevice
            try process.run()
            // 120 s of faults, up to 120 s to drain, set-up and the checks: 7 minutes at most.
            let deadline = Date().addingTimeInterval(420)
            while process.isRunning && Date() < deadline { Thread.sleep(forTimeInterval: 0.5) }
            if process.isRunning {
                // Interrupted, the script stops its pools and clusters; killed if that hangs too.
                process.interrupt()
                let grace = Date().addingTimeInterval(60)
                while process.isRunning && Date() < grace { Thread.sleep(forTimeInterval: 0.5) }
                if process.isRunning { kill(process.processIdentifier, SIGKILL) }
                process.waitUntilExit()
                return nil
            }
            return process.terminationStatus
        }
        let output = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
        // The soak's table: its faults, the outcomes, resends, the drain and the workers' memory.
        if let table = output.range(of: "\nchaos soak: ") { print(output[table.lowerBound...]) }
        #expect(status == 0, "\(output)")
        let line = output.split(separator: "\n").last { $0.hasPrefix("chaos-soak summary: ") }
        let json = line.map { String($0.dropFirst("chaos-soak summary: ".count)) } ?? ""
        guard let summary = try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any] else {
            Issue.record("no summary line in the output:\n\(output)")
            return
        }
        #expect(summary["passed"] as? Bool == true, "\(output)")
        #expect((summary["failures"] as? [Any])?.isEmpty == true, "\(output)")
        // The run did what it says: jobs of every kind, every kind of fault at least once.
        #expect((summary["jobs"] as? Int ?? 0) >= 10_000, "\(output)")
        let states = summary["states"] as? [String: Int] ?? [:]
        #expect(states["completed", default: 0] > 0 && states["discarded", default: 0] > 0 && states["cancelled", default: 0] > 0,
                "\(output)")
        let kinds = Set((summary["fault_kinds"] as? [String: Int] ?? [:]).keys)
        #expect(kinds == ["kill-worker", "kill-pool", "postgres-restart", "fcm-outage", "partition", "429-storm"], "\(output)")
        #expect((summary["resent"] as? Int ?? .max) <= (summary["in_flight_at_faults"] as? Int ?? 0), "\(output)")
    }
}
