import CommandOptions
import Foundation
import JSON
import Postgres
import Queue

/// The database of a command that reads or changes the queue without working it: DATABASE_URL,
/// migrated, or an error that says what to do.
func operationsDatabase(_ parsed: ParsedOptions) throws -> PGConnection {
    let command = parsed.command
    guard let url = (try checkedDatabaseURL(parsed)) else {
        throw UsageError("herald \(command): set DATABASE_URL (or --database-url) to the PostgreSQL holding schema herald")
    }
    let connection: PGConnection
    do { connection = try PGConnection(url: url) } catch { throw databaseProblem(error, command: "\(command)") }
    guard try Administration.isMigrated(connection) else {
        throw UsageError("herald \(command): the database at \(PGConnection.redacted(url)) has no herald schema; run `herald migrate` first")
    }
    return connection
}

/// Who acts from the shell, for herald.admin_log: `shell user@host`.
func shellSource() -> String {
    let user = ProcessInfo.processInfo.environment["USER"] ?? getpwuid(getuid()).map { String(cString: $0.pointee.pw_name) } ?? "uid \(getuid())"
    return "shell \(user)@\(ProcessInfo.processInfo.hostName)"
}

enum DeadCommand {
    /// These commands read and change a deployment's database; they never start the embedded one.
    static let databaseOptions: [Option] = [
        Option(name: "database-url", env: "DATABASE_URL", value: "URL", help: "The PostgreSQL holding schema herald (required)."),
    ]
    static let options: [Option] = [
        Option(name: "queue", value: "QUEUE", help: "Only dead letters of this queue."),
        Option(name: "reason", value: "TEXT", help: "Only dead letters whose reason contains TEXT (literally; % and _ are not wildcards)."),
        Option(name: "project", value: "NAME", help: "Only dead letters of this registry project (herald projects list); a replay goes out for it again."),
        Option(name: "limit", value: "N", help: "list: at most N, newest first.", defaultText: "50"),
        Option(name: "json", help: "list: print a JSON array (the API's fields, target_type and target among them) instead of a table."),
        Option(name: "all", help: "retry/discard: every dead letter matching --queue, --reason (and --older-than) instead of ids."),
        Option(name: "older-than", value: "DURATION", help: "discard --all: only letters dead for longer than this (\"7d\", \"12h\")."),
    ] + databaseOptions

    static let help = helpText(
        command: "dead", summary: "Look at, replay and remove dead letters (herald.dead_letters).",
        usage: """
        list [--queue Q] [--reason TEXT] [--limit N] [--json]
               herald dead show ID
               herald dead retry (ID... | --all) [--queue Q] [--reason TEXT]
               herald dead discard (ID... | --all) [--queue Q] [--reason TEXT] [--older-than DURATION]
        """,
        options: options,
        footer: """
        retry puts a dead letter back as a fresh job (attempts reset) and removes it; a letter whose
        dedupe_key is held by a pending job stays, and the command says which and exits 1. A missing id
        changes nothing and is an error naming it. Every retry and discard is recorded in
        herald.admin_log with the ids and who ran it. In SQL: herald.retry_dead_letters(queue, reason_like)
        and herald.discard_dead_letters(queue, reason_like, older_than).
        """)

    static func run(arguments: [String]) throws -> Int32 {
        let parsed = try parse(command: "dead", arguments: arguments, options: options, positional: true)
        guard let action = parsed.positional.first, ["list", "show", "retry", "discard"].contains(action) else {
            throw UsageError("herald dead: give an action: list, show ID, retry (ID... | --all) or discard (ID... | --all); see herald dead --help")
        }
        let idTexts = Array(parsed.positional.dropFirst())
        var ids: [Int] = []
        for text in idTexts {
            guard let id = Int(text), id > 0 else {
                throw UsageError("herald dead \(action): \"\(text)\" is not a dead-letter id (a whole number, the id column of herald.dead_letters)")
            }
            if !ids.contains(id) { ids.append(id) }
        }
        var filter = DeadLetterFilter(queue: parsed.string("queue"), reason: parsed.string("reason"), project: parsed.string("project"))
        if parsed.string("older-than") != nil {
            guard action == "discard" else { throw UsageError("herald dead \(action): --older-than applies to discard --all only") }
            filter.olderThanSeconds = try parsed.seconds("older-than", default: 0)
        }
        do { filter = try filter.validated() } catch {
            throw UsageError("herald dead \(action): --\(error.description)")
        }

        switch action {
        case "list":
            guard ids.isEmpty else { throw UsageError("herald dead list: takes no ids; use herald dead show ID") }
            let limit = try parsed.int("limit", default: 50, minimum: 1)
            let connection = try operationsDatabase(parsed)
            let letters = try reporting(action) { try DeadLetters.list(connection, filter: filter, limit: limit) }
            if parsed.has("json") {
                print(JSONValue.array(letters.map { $0.json() }).serialized)
            } else {
                printTable(letters)
            }
            return 0
        case "show":
            guard ids.count == 1 else { throw UsageError("herald dead show: give one dead-letter id") }
            let connection = try operationsDatabase(parsed)
            guard let letter = try DeadLetters.get(connection, id: ids[0]) else {
                throw UsageError("herald dead show: no dead letter with id \(ids[0]); herald dead list shows the ids")
            }
            if parsed.has("json") { print(letter.json(detail: true).serialized) } else { printDetail(letter) }
            return 0
        default:
            let all = parsed.has("all")
            if all == !ids.isEmpty {
                throw UsageError("herald dead \(action): give dead-letter ids or --all (with --queue, --reason, --project to choose), not \(all ? "both" : "neither")")
            }
            if !all && !filter.isEmpty {
                throw UsageError("herald dead \(action): --queue, --reason, --project and --older-than choose letters for --all; with ids, give the ids only")
            }
            let connection = try operationsDatabase(parsed)
            let source = shellSource()
            if action == "retry" {
                let result = try reporting(action) {
                    all ? try DeadLetters.retry(connection, matching: filter, source: source)
                        : try DeadLetters.retry(connection, ids: ids, source: source)
                }
                for (letter, job) in result.retried { print("retried dead letter \(letter) as job \(job)") }
                print("retried \(result.retried.count) dead letter\(result.retried.count == 1 ? "" : "s")\(all ? " (\(filter.summary))" : "")")
                for id in result.kept { printError("herald dead retry: " + (try DeadLetters.keptReason(connection, id: id))) }
                return result.kept.isEmpty ? 0 : 1
            }
            let gone = try reporting(action) {
                all ? try DeadLetters.discard(connection, matching: filter, source: source)
                    : try DeadLetters.discard(connection, ids: ids, source: source)
            }
            print("discarded \(gone.count) dead letter\(gone.count == 1 ? "" : "s")\(gone.isEmpty ? "" : ": " + gone.map(String.init).joined(separator: ", "))")
            return 0
        }
    }

    /// Runs `body`, turning a dead-letter error into a usage error that names the command.
    static func reporting<T>(_ action: String, _ body: () throws -> T) throws -> T {
        do { return try body() } catch let error as AdminError {
            throw UsageError("herald dead \(action): \(error.description)")
        }
    }

    static func printTable(_ letters: [DeadLetter]) {
        guard !letters.isEmpty else {
            print("no dead letters")
            return
        }
        var rows = [["ID", "JOB", "QUEUE", "PROVIDER", "TARGET", "ATTEMPTS", "DEAD AT", "REASON"]]
        for letter in letters {
            let reason = letter.reason.count > 80 ? String(letter.reason.prefix(79)) + "…" : letter.reason
            rows.append([String(letter.id), String(letter.jobID), letter.queue, letter.provider, letter.shortTarget(), String(letter.attempts), letter.deadAt,
                         reason.replacingOccurrences(of: "\n", with: " ")])
        }
        printColumns(rows)
    }

    static func printDetail(_ letter: DeadLetter) {
        var lines = [
            "dead letter \(letter.id) (job \(letter.jobID), \(letter.kind))",
            "queue:      \(letter.queue)",
            "provider:   \(letter.provider == "apns" ? "APNs" : "FCM")",
            "target:     \(letter.target.map { "\($0.type) \($0.value)" } ?? "none in the message")",
            "reason:     \(letter.reason)",
            "attempts:   \(letter.attempts) of \(letter.maxAttempts)",
            "created at: \(letter.createdAt)",
            "dead at:    \(letter.deadAt)",
        ]
        if let key = letter.dedupeKey { lines.append("dedupe key: \(key)") }
        if let project = letter.project { lines.append("project:    \(project)") }
        lines.append("message:    \(letter.message.serialized)")
        let errors = letter.errors.arrayValue ?? []
        lines.append("errors (\(errors.count)):")
        for error in errors { lines.append("  \(error.serialized)") }
        print(lines.joined(separator: "\n"))
    }
}

/// Left-aligned columns separated by two spaces; counts right-aligned.
func formatColumns(_ rows: [[String]]) -> [String] {
    guard let first = rows.first else { return [] }
    var widths = Array(repeating: 0, count: first.count)
    for row in rows { for (index, cell) in row.enumerated() { widths[index] = max(widths[index], cell.count) } }
    return rows.map { row in
        row.enumerated().map { index, cell in
            let pad = String(repeating: " ", count: widths[index] - cell.count)
            // Counts, estimated ones (~) included, line up on the right.
            let digits = cell.hasPrefix("~") ? cell.dropFirst() : Substring(cell)
            let numeric = !digits.isEmpty && digits.allSatisfy(\.isNumber)
            if index == row.count - 1 && !numeric { return cell }
            return numeric ? pad + cell : cell + pad
        }.joined(separator: "  ")
    }
}

func printColumns(_ rows: [[String]]) {
    print(formatColumns(rows).joined(separator: "\n"))
}
