import CommandOptions
import Foundation
import JSON
import Postgres
import Queue

enum TopicsCommand {
    static let options: [Option] = [
        Option(name: "json", help: "Print JSON instead of a table."),
    ] + DeadCommand.databaseOptions

    static let help = helpText(
        command: "topics", summary: "Topic subscriptions Herald keeps (herald.topic_subscriptions).",
        usage: """
        list [--json]
               herald topics show TOPIC [--json]
        """,
        options: options,
        footer: """
        list: every topic with its subscribed, pending (to subscribe), removing (to unsubscribe) and
        failed tokens. show: one topic's counts and the latest tokens FCM refused, with the error.
        Subscribe and unsubscribe in SQL, in your own transaction: herald.subscribe(topic, tokens)
        and herald.unsubscribe(topic, tokens); a running `herald work` carries them out with
        Instance ID batchAdd / batchRemove (--iid-url).
        """)

    static func run(arguments: [String]) throws -> Int32 {
        let parsed = try parse(command: "topics", arguments: arguments, options: options, positional: true)
        guard let action = parsed.positional.first, ["list", "show"].contains(action) else {
            throw UsageError("herald topics: give an action: list, or show TOPIC; see herald topics --help")
        }
        let rest = Array(parsed.positional.dropFirst())
        if action == "list" {
            guard rest.isEmpty else { throw UsageError("herald topics list: takes no topic (herald topics show TOPIC shows one)") }
            let topics = try TopicSubscriptions.list(try operationsDatabase(parsed))
            if parsed.has("json") {
                print(JSONValue.array(topics.map(\.json)).serialized)
            } else if topics.isEmpty {
                print("no topic subscriptions yet (SELECT herald.subscribe('news', ARRAY['token-1']) records one)")
            } else {
                printSummaries(topics)
            }
            return 0
        }
        guard rest.count == 1, let topic = rest.first, !topic.isEmpty else {
            throw UsageError("herald topics show: give one topic name (herald topics list shows them)")
        }
        let shown = try TopicSubscriptions.show(try operationsDatabase(parsed), topic: topic)
        guard !shown.summaries.isEmpty else {
            throw UsageError("herald topics show: no subscriptions recorded for topic \"\(topic)\"; herald topics list shows the topics")
        }
        if parsed.has("json") {
            var object = JSONObject()
            object["topic"] = .string(topic)
            object["projects"] = .array(shown.summaries.map(\.json))
            object["failed_tokens"] = .array(shown.failures.map { ["token": .string($0.token), "error": .string($0.error)] })
            print(JSONValue.object(object).serialized)
            return 0
        }
        printSummaries(shown.summaries)
        if !shown.failures.isEmpty {
            print("")
            var rows = [["FAILED TOKEN", "ERROR"]]
            for failure in shown.failures { rows.append([failure.token, failure.error]) }
            printColumns(rows)
        }
        return 0
    }

    static func printSummaries(_ topics: [TopicSummary]) {
        var rows = [["TOPIC", "PROJECT", "SUBSCRIBED", "PENDING", "REMOVING", "FAILED"]]
        for t in topics {
            rows.append([t.topic, t.project.isEmpty ? "(the pool's)" : t.project, String(t.subscribed), String(t.pending),
                         String(t.removing), String(t.failed)])
        }
        printColumns(rows)
    }
}
