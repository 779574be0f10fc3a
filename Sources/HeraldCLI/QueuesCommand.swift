import CommandOptions
import Foundation
import JSON
import Postgres
import Queue

enum QueuesCommand {
    static let options: [Option] = [
        Option(name: "json", help: "list: print a JSON array instead of a table."),
        Option(name: "max-per-second", value: "N|none", help: "limits: messages per second for the queue across every pool; none removes the limit."),
        Option(name: "max-in-flight", value: "N|none", help: "limits: requests in flight for the queue across every pool; none removes the limit."),
    ] + DeadCommand.databaseOptions

    static let help = helpText(
        command: "queues", summary: "Pause, resume and limit queues (herald.queues).",
        usage: """
        list [--json]
               herald queues pause NAME
               herald queues resume NAME
               herald queues limits NAME [--max-per-second N|none] [--max-in-flight N|none]
        """,
        options: options,
        footer: """
        A paused queue's jobs are not claimed by any pool until it is resumed; requests in flight
        finish. Limits hold across every pool and host (token buckets in PostgreSQL). limits keeps a
        limit you do not name. Every change is recorded in herald.admin_log with who ran it. In SQL:
        herald.pause_queue(name), herald.resume_queue(name), herald.set_queue_limits(name,
        max_per_second, max_in_flight).
        """)

    static func run(arguments: [String]) throws -> Int32 {
        let parsed = try parse(command: "queues", arguments: arguments, options: options, positional: true)
        guard let action = parsed.positional.first, ["list", "pause", "resume", "limits"].contains(action) else {
            throw UsageError("herald queues: give an action: list, pause NAME, resume NAME or limits NAME; see herald queues --help")
        }
        let rest = Array(parsed.positional.dropFirst())
        let limitsGiven = parsed.string("max-per-second") != nil || parsed.string("max-in-flight") != nil
        if limitsGiven && action != "limits" {
            throw UsageError("herald queues \(action): --max-per-second and --max-in-flight apply to limits only")
        }
        if action == "list" {
            guard rest.isEmpty else { throw UsageError("herald queues list: takes no name") }
            let connection = try operationsDatabase(parsed)
            let queues = try Queues.list(connection)
            if parsed.has("json") {
                print(JSONValue.array(queues.map(\.json)).serialized)
            } else {
                printList(queues)
            }
            return 0
        }
        guard rest.count == 1 else { throw UsageError("herald queues \(action): give one queue name (herald queues list shows them)") }
        let name = rest[0]
        var rate = LimitChange<Double>.unchanged
        var inFlight = LimitChange<Int>.unchanged
        if action == "limits" {
            rate = try limit(parsed, "max-per-second") { text in Double(text).flatMap { $0 > 0 && $0.isFinite ? $0 : nil } }
            inFlight = try limit(parsed, "max-in-flight") { text in Int(text).flatMap { $0 >= 1 && $0 <= Int(Int32.max) ? $0 : nil } }
            if !limitsGiven {
                throw UsageError("herald queues limits: give --max-per-second N and/or --max-in-flight N (or none to remove a limit)")
            }
        }
        let connection = try operationsDatabase(parsed)
        let source = shellSource()
        do {
            switch action {
            case "pause":
                let changed = try Queues.pause(connection, name: name, source: source)
                print(changed ? "paused queue \(name)" : "queue \(name) was paused already")
            case "resume":
                let changed = try Queues.resume(connection, name: name, source: source)
                print(changed ? "resumed queue \(name)" : "queue \(name) was not paused; nothing to resume")
            default:
                let result = try Queues.setLimits(connection, name: name, maxPerSecond: rate, maxInFlight: inFlight, source: source)
                print("queue \(name): max_per_second \(result.maxPerSecond.map(CampaignsCommand.formatRate) ?? "none"), max_in_flight \(result.maxInFlight.map(String.init) ?? "none")")
                if result.newName {
                    print("note: no job or dead letter has used queue \(name) yet; the limits apply from its first job (check the spelling if you meant an existing queue)")
                }
            }
        } catch let error as AdminError {
            let hint = error.kind == .notFound ? "; herald queues list shows the queues" : ""
            throw UsageError("herald queues \(action): \(error.description)\(hint)")
        }
        return 0
    }

    /// `--NAME N` or `--NAME none`; anything else is an error naming the flag and the value.
    static func limit<Value>(_ parsed: ParsedOptions, _ flag: String, _ read: (String) -> Value?) throws -> LimitChange<Value> {
        guard let text = parsed.string(flag) else { return .unchanged }
        if text == "none" { return .removed }
        guard let value = read(text) else {
            let what = flag == "max-in-flight" ? "a whole number of at least 1" : "a number of messages per second more than 0"
            throw UsageError("herald queues limits: --\(flag) \"\(text)\" is not \(what); give e.g. --\(flag) \(flag == "max-in-flight" ? "100" : "500"), or --\(flag) none to remove the limit")
        }
        return .set(value)
    }

    static func printList(_ queues: [QueueSettings]) {
        guard !queues.isEmpty else {
            print("no queues yet: no jobs, dead letters or settings")
            return
        }
        var rows = [["QUEUE", "PAUSED", "MAX/S", "MAX IN FLIGHT", "AVAILABLE", "SCHEDULED", "RUNNING", "DEAD"]]
        for q in queues {
            rows.append([q.name, q.paused ? "yes" : "no", q.maxPerSecond.map(CampaignsCommand.formatRate) ?? "-",
                         q.maxInFlight.map(String.init) ?? "-", String(q.available), String(q.scheduled), String(q.running), String(q.deadLetters)])
        }
        printColumns(rows)
    }
}
