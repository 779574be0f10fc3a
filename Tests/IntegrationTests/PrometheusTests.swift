import Foundation
import HTTPServer
import JSON
import Testing
import TestSupport

/// Debian's Prometheus and promtool against what Herald ships: the alert rules with their unit
/// tests, the example configuration, and a real Prometheus scraping a real pool.
@Suite(.serialized) struct PrometheusTests {
    static let deploy = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("deploy/prometheus").path

    @Test func theAlertRulesPassTheirUnitTestsAndTheConfigurationIsValid() throws {
        let rules = try String(contentsOfFile: Self.deploy + "/alerts.yml", encoding: .utf8)
        for alert in ["HeraldDeadLettersIncreasing", "HeraldBacklogAging", "HeraldFCMErrorRateHigh", "HeraldAPNsErrorRateHigh", "HeraldQuotaExceeded", "HeraldQuotaAnswersHigh", "HeraldWorkersDown"] {
            #expect(rules.contains("- alert: \(alert)\n"), "\(alert) is defined")
            let tests = try String(contentsOfFile: Self.deploy + "/alerts.test.yml", encoding: .utf8)
            #expect(tests.contains("alertname: \(alert)\n"), "\(alert) has a unit test")
        }
        let unit = try promtool(["test", "rules", "alerts.test.yml"], directory: Self.deploy)
        #expect(unit.status == 0 && unit.output.contains("SUCCESS"), "promtool test rules:\n\(unit.output)")
        let config = try promtool(["check", "config", "prometheus.yml"], directory: Self.deploy)
        #expect(config.status == 0, "promtool check config:\n\(config.output)")
        #expect(config.output.contains("SUCCESS: 8 rules found"), "the configuration loads alerts.yml:\n\(config.output)")
    }

    /// A loopback port nobody listens on right now (bound and released).
    static func freePort() throws -> Int {
        let probe = HTTPServer(configuration: .init(host: "127.0.0.1", port: 0, threads: 1)) { _ in HTTPServerResponse(status: 204) }
        try probe.start()
        let port = probe.port
        probe.stop()
        return port
    }

    /// The result of an instant query: each series' labels and value.
    static func query(_ prometheus: String, _ promql: String) throws -> [(labels: [String: String], value: Double)] {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        let encoded = promql.addingPercentEncoding(withAllowedCharacters: allowed)!
        let answer = try curl("\(prometheus)/api/v1/query?query=\(encoded)", over: .http1)
        guard answer.status == 200, let json = answer.json, json["status"]?.stringValue == "success" else {
            throw TestFailure("Prometheus refused \(promql): \(answer.status) \(answer.body)")
        }
        return (json["data"]?["result"]?.arrayValue ?? []).map { series in
            var labels: [String: String] = [:]
            for member in series["metric"]?.objectValue ?? JSONObject() { labels[member.key] = member.value.stringValue }
            return (labels, Double(series["value"]?.arrayValue?.last?.stringValue ?? "") ?? .nan)
        }
    }

    @Test func aRealPrometheusScrapesAPoolAndItsCountsEqualTheEmulators() throws {
        let stack = try WorkerStack()
        defer { stack.close() }
        try PoolMetricsTests.enqueueMixedBatch(stack, tag: "p")
        let pool = try RunningPool(stack, arguments: ["--processes", "2", "--poll-interval", "0.2"])
        defer { _ = pool.stop() }
        #expect(waitUntil(timeout: 120) { PoolMetricsTests.settled(stack) }, "\(pool.process.output)")

        // Prometheus on loopback, scraping the pool every second, with Herald's alert rules loaded.
        let directory = NSTemporaryDirectory() + "herald-prometheus-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try FileManager.default.copyItem(atPath: Self.deploy + "/alerts.yml", toPath: directory + "/alerts.yml")
        let target = String(pool.adminURL.dropFirst("http://".count))
        try """
            global:
              scrape_interval: 1s
              evaluation_interval: 1s
            rule_files:
              - \(directory)/alerts.yml
            scrape_configs:
              - job_name: herald-pool
                static_configs:
                  - targets: ["\(target)"]
            """.write(toFile: directory + "/prometheus.yml", atomically: true, encoding: .utf8)
        let path = ["/usr/bin/prometheus", "/usr/local/bin/prometheus"].first { FileManager.default.isExecutableFile(atPath: $0) }
        let binary = try #require(path, "prometheus is not installed; run .ci/install-deps (Debian package prometheus)")
        let port = try Self.freePort()
        let prometheus = Process()
        prometheus.executableURL = URL(fileURLWithPath: binary)
        prometheus.arguments = ["--config.file=\(directory)/prometheus.yml", "--storage.tsdb.path=\(directory)/data",
                                "--web.listen-address=127.0.0.1:\(port)", "--log.level=warn"]
        // Its log goes to a file: a pipe nobody reads could fill and stop it.
        let logPath = directory + "/prometheus.log"
        FileManager.default.createFile(atPath: logPath, contents: nil)
        let log = try FileHandle(forWritingTo: URL(fileURLWithPath: logPath))
        prometheus.standardOutput = log
        prometheus.standardError = log
        try prometheus.run()
        defer {
            if prometheus.isRunning { prometheus.terminate() }
            prometheus.waitUntilExit()
        }
        let url = "http://127.0.0.1:\(port)"
        #expect(waitUntil(timeout: 60, interval: 0.2) { (try? curl(url + "/-/ready", over: .http1).status) == 200 || !prometheus.isRunning },
                "Prometheus became ready")
        try #require(prometheus.isRunning, "Prometheus exited: \((try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "")")

        // What Prometheus stored must be what FCM received, outcome by outcome.
        let delivered = stack.emulator.deliveredMessages().count
        let byError = stack.emulator.statistics["by_error"]?.objectValue ?? JSONObject()
        func stored(_ promql: String) -> Int? { (try? Self.query(url, promql))?.first.map { Int($0.value) } }
        #expect(waitUntil(timeout: 60, interval: 0.25) {
            stored(#"sum(herald_messages_total{outcome="completed"})"#) == delivered
        }, "Prometheus scraped the final counts")
        #expect(stored(#"sum(herald_fcm_requests_total{code="OK"})"#) == delivered)
        #expect(stored("sum(herald_fcm_requests_total)") == stack.emulator.statistics["requests"]?.intValue)
        for code in byError.keys {
            #expect(stored("sum(herald_fcm_requests_total{code=\"\(code)\"})") == byError[code]?.intValue, "\(code)")
        }
        let byOutcome = Dictionary(uniqueKeysWithValues: try Self.query(url, "sum by (outcome) (herald_messages_total)").map {
            ($0.labels["outcome"] ?? "", Int($0.value))
        })
        #expect(byOutcome == ["completed": 209, "retried": 12, "dead": 6, "pruned": 5, "discarded": 1, "released": 0, "snoozed": 0])
        #expect(try stack.count("SELECT count(*) FROM herald.dead_letters") == 6)
        #expect(stored(#"sum(herald_messages_total{queue="mail",outcome="completed"})"#) == 30)
        #expect(stored(#"up{job="herald-pool"}"#) == 1)
        #expect(stored("herald_worker_processes") == 2)
        #expect(stored("sum(herald_delivery_latency_seconds_count)") == delivered)

        // Herald's rules load and evaluate in a real Prometheus.
        let rules = try curl(url + "/api/v1/rules", over: .http1)
        let loaded = (rules.json?["data"]?["groups"]?.arrayValue ?? []).flatMap { $0["rules"]?.arrayValue ?? [] }
        #expect(loaded.count == 8 && loaded.allSatisfy { $0["health"]?.stringValue != "err" }, "\(rules.body)")
    }
}
