import CommandOptions
import Foundation
import JSON
import Logging
import Postgres
import Queue

enum StatsCommand {
    static let options: [Option] = [
        Option(name: "watch", help: "Redraw in place every --interval until interrupted."),
        Option(name: "interval", value: "SECONDS", help: "With --watch: seconds between redraws.", defaultText: "2"),
        Option(name: "json", help: "Print one JSON document (queues, projects, the last minute and hour) instead of tables."),
    ] + DeadCommand.databaseOptions

    static let help = helpText(
        command: "stats", summary: "Queues, jobs per state, the oldest available job's age, and rates.",
        usage: "[--watch [--interval SECONDS]] [--json]", options: options,
        footer: """
        available, running (and scheduled where the schema indexes it) are exact; finished states are
        exact on small tables and estimated from a sample above 200,000 rows (marked ~). Rates count
        what finished in the last minute and hour. With registered Firebase projects, a table per
        project: its pending jobs, dead letters, pause and adapted rate ("-": the jobs of no project).
        """)

    static func run(arguments: [String]) throws -> Int32 {
        let parsed = try parse(command: "stats", arguments: arguments, options: options)
        let interval = try parsed.seconds("interval", default: 2)
        guard interval >= 0.1 else { throw UsageError("herald stats: --interval must be at least 0.1 seconds") }
        let connection = try operationsDatabase(parsed)
        var configuration = QueueStatistics.Configuration()
        configuration.pendingInterval = 0
        configuration.finishedInterval = max(interval, 10)
        configuration.throughputInterval = 0
        let statistics = QueueStatistics(configuration: configuration)
        if parsed.has("json") {
            if parsed.has("watch") { throw UsageError("herald stats: --json prints one document; leave out --watch") }
            print(try json(connection, statistics).serialized)
            return 0
        }
        guard parsed.has("watch") else {
            print(try render(connection, statistics).joined(separator: "\n"))
            return 0
        }
        while true {
            let lines = try render(connection, statistics)
            // Cursor home, each line cleared to its end, then everything below cleared: the table
            // is redrawn in place without a flash of an empty screen.
            let frame = "\u{1B}[H" + lines.map { $0 + "\u{1B}[K" }.joined(separator: "\n") + "\n\u{1B}[J"
            // A reader that went away (`| head`) ends the watch; nothing is left to show it to.
            guard StandardStreams.write(frame, to: 1) else { return 0 }
            Thread.sleep(forTimeInterval: interval)
        }
    }

    static func render(_ connection: PGConnection, _ statistics: QueueStatistics) throws -> [String] {
        let snapshot = try statistics.snapshot(connection)
        let throughput = try statistics.throughput(connection)
        let states = snapshot.states
        var rows = [["QUEUE"] + states.map { $0.uppercased() } + ["DEAD", "OLDEST AVAILABLE"]]
        for queue in snapshot.queues {
            var row = [queue.name]
            for state in states {
                let count = String(queue.count(state))
                row.append(snapshot.estimatedStates.contains(state) && queue.count(state) > 0 ? "~" + count : count)
            }
            row.append(String(queue.deadLetters))
            row.append(queue.oldestAvailableAge.map { durationText($0, roundedDown: true, tenths: true) } ?? "-")
            rows.append(row)
        }
        var lines = ["herald stats  \(timestamp())", ""]
        lines += snapshot.queues.isEmpty ? ["no jobs and no dead letters"] : formatColumns(rows)
        let hour = throughput.total
        let minute = throughput.minutes.last ?? Throughput.Minute(start: 0)
        lines += ["",
                  "this minute: \(minute.completed) completed, \(minute.discarded) discarded, \(minute.cancelled) cancelled, \(minute.dead) dead",
                  "last hour:   \(hour.completed) completed (\(perMinute(hour.completed))/min on average), \(hour.discarded) discarded, \(hour.cancelled) cancelled, \(hour.dead) dead"]
        let rates = try FCMProjectRates.overview(connection)
        lines += registryLines(try ProjectOverview.read(connection, rates: rates))
        // The APNs apps' buckets (APNsApp.rateBucket) are shown on their apps' lines above.
        lines += projectLines(rates.filter { !$0.fcmProject.hasPrefix(APNsApp.rateBucketPrefix) })
        return lines
    }

    /// `herald stats --json`: what the tables show, as one object.
    static func json(_ connection: PGConnection, _ statistics: QueueStatistics) throws -> JSONValue {
        let snapshot = try statistics.snapshot(connection)
        let throughput = try statistics.throughput(connection)
        let queues: [JSONValue] = snapshot.queues.map { queue in
            var states = JSONObject()
            for state in snapshot.states { states[state] = JSONValue(queue.count(state)) }
            return ["queue": .string(queue.name), "states": .object(states), "dead": JSONValue(queue.deadLetters),
                    "oldest_available_age_seconds": queue.oldestAvailableAge.map { .number(String(format: "%.3f", $0)) } ?? .null]
        }
        let hour = throughput.total
        let minute = throughput.minutes.last ?? Throughput.Minute(start: 0)
        func finished(_ c: Int, _ d: Int, _ x: Int, _ dead: Int) -> JSONValue {
            ["completed": JSONValue(c), "discarded": JSONValue(d), "cancelled": JSONValue(x), "dead": JSONValue(dead)]
        }
        return ["queues": .array(queues), "estimated_states": .array(snapshot.estimatedStates.sorted().map { .string($0) }),
                "projects": .array(try ProjectOverview.read(connection).map(\.json)),
                "this_minute": finished(minute.completed, minute.discarded, minute.cancelled, minute.dead),
                "last_hour": finished(hour.completed, hour.discarded, hour.cancelled, hour.dead)]
    }

    /// The registry's projects beside the jobs of no project: pending work, dead letters, the
    /// operator's pause and the adapted rate. Nothing while no project is registered or named.
    static func registryLines(_ projects: [ProjectOverview]) -> [String] {
        guard projects.contains(where: { $0.name != nil }) else { return [] }
        func rate(_ value: Double?) -> String { value.map { "\(CampaignsCommand.formatRate($0))/s" } ?? "-" }
        var rows = [["PROJECT", "FCM PROJECT", "STATE", "AVAILABLE", "SCHEDULED", "RUNNING", "DEAD", "MAX RATE", "RATE NOW"]]
        for p in projects {
            // The state names what decided a pause: "paused (apns_auth)", not just "paused".
            var state = p.pausedReason == nil ? p.state : "paused (\(p.pauseCause ?? "operator"))"
            if let paused = p.rate?.pausedFor {
                // An APNs app's only shared pause is its outage's: APNs states no quota.
                state += " (\(p.rate?.reason?.hasPrefix("APNS_UNREACHABLE") == true ? "APNs unreachable" : p.rate?.reason?.hasPrefix("FCM_UNREACHABLE") == true ? "FCM unreachable" : "quota"), \(durationText(paused, roundedDown: true, tenths: true)))"
            }
            rows.append([p.name ?? "-", p.fcmProjectID ?? (p.apnsApp ? "(APNs app)" : "(the pools' key)"), state, String(p.available), String(p.scheduled),
                         String(p.running), String(p.dead), rate(p.maxRate), rate(p.rate?.rate)])
        }
        var lines = [""] + formatColumns(rows)
        for p in projects {
            if let name = p.name, let reason = p.pausedReason { lines.append("\(name) paused (\(p.pauseCause ?? "operator")): \(reason)") }
            // Left out of their queue's OLDEST AVAILABLE, which measures the pools: said here.
            if let name = p.name, let cause = p.pauseCause, p.pausedJobs > 0 {
                lines.append("\(name) holds \(p.pausedJobs) due job\(p.pausedJobs == 1 ? "" : "s") back (\(cause) pause)"
                             + (p.pausedOldestAge.map { ", the oldest waiting \(durationText($0, roundedDown: true, tenths: true))" } ?? ""))
            }
        }
        return lines
    }

    /// The FCM projects' adapted rates and pauses: what FCM's quota answers did to sending.
    static func projectLines(_ projects: [FCMProjectRate]) -> [String] {
        guard !projects.isEmpty else { return [] }
        func rate(_ value: Double?) -> String { value.map { "\(CampaignsCommand.formatRate($0))/s" } ?? "-" }
        var rows = [["FCM PROJECT", "RATE NOW", "LAST LOWERED TO", "LAST LOWERED", "REGAINS UP TO", "PAUSED"]]
        for p in projects {
            rows.append([p.fcmProject, rate(p.rate), rate(p.loweredTo), p.loweredAgo.map { durationText($0, roundedDown: true, tenths: true) + " ago" } ?? "never",
                         rate(p.regain), p.pausedFor.map { "for " + durationText($0, roundedDown: true, tenths: true) } ?? "no"])
        }
        var lines = [""] + formatColumns(rows)
        for p in projects where p.pausedFor != nil {
            if let reason = p.reason { lines.append("\(p.fcmProject) paused: \(reason)") }
        }
        return lines
    }

    /// An hour's count as a rate a minute that does not round a few jobs to zero: "0.07", "3.5", "120".
    static func perMinute(_ countInAnHour: Int) -> String {
        let rate = Double(countInAnHour) / 60
        switch rate {
        case 0: return "0"
        case ..<1: return String(format: "%.2f", rate)
        case ..<10: return String(format: "%.1f", rate)
        default: return String(Int(rate.rounded()))
        }
    }

    static func timestamp() -> String {
        let formatter = ISO8601DateFormatter()
        return formatter.string(from: Date())
    }
}
