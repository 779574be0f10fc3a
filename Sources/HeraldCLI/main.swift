import CommandOptions
import Emulator
import Foundation
import Logging
import Postgres
import Worker

// `herald <command> [options]`.
let usage = """
Herald: durable push notifications from PostgreSQL to Firebase Cloud Messaging.

Usage: herald <command> [options]

Commands:
  work       Deliver queued jobs with a pool of worker processes (embedded default when nothing is set).
  migrate    Create or update the herald schema in DATABASE_URL.
  grant      Give a role what a producer, reader or operator needs in schema herald (and no more).
  send       Send one message now and print FCM's answer.
  groups     Manage device groups (create, add, remove, get).
  dead       Look at, replay (retry) and remove (discard) dead letters.
  stats      Queues, jobs per state, oldest available job, rates (--watch redraws in place).
  campaigns  Campaigns: progress, rate and ETA (show --watch), pause, resume, cancel; what reached the phones.
  queues     Queues: pause, resume, rate and in-flight limits.
  projects   The registry of Firebase projects: add, list, show, set, test, pause, resume, remove.
  delivery-data  FCM's delivery data (what reached Android devices): fetch now, status.
  apns       The APNs apps of the registry: add, list, show, test, pause, resume, remove.
  topics     Topic subscriptions: subscribers per topic, tokens FCM refused.
  dashboard  Web pages, a JSON API and /metrics for queues and dead letters.
  bench      Measure end-to-end throughput, latency, worker memory and the PostgreSQL ceiling.
  emulator   Run the local FCM emulator (HTTP/2 and HTTP/1.1, OAuth2, device groups, fault tokens).

Run 'herald <command> --help' for its options and environment variables; 'herald --version' for the version.
"""

// A peer closing a socket must be an error return, not the end of the process (libcurl with
// CURLOPT_NOSIGNAL, the emulator's sockets and libpq all expect this).
signal(SIGPIPE, SIG_IGN)

let arguments = Array(CommandLine.arguments.dropFirst())
guard let name = arguments.first, !["--help", "-h", "help"].contains(name) else {
    print(usage)
    exit(arguments.isEmpty ? 2 : 0)
}
if ["--version", "-V", "version"].contains(name) {
    print("herald \(heraldVersion)")
    exit(0)
}
let rest = Array(arguments.dropFirst())
let commands: [String: (help: String, run: ([String]) throws -> Int32)] = [
    "work": (WorkCommand.help, WorkCommand.run),
    "migrate": (MigrateCommand.help, MigrateCommand.run),
    "grant": (GrantCommand.help, GrantCommand.run),
    "send": (SendCommand.help, SendCommand.run),
    "groups": (GroupsCommand.help, GroupsCommand.run),
    "bench": (BenchCommand.help, BenchCommand.run),
    "dead": (DeadCommand.help, DeadCommand.run),
    "stats": (StatsCommand.help, StatsCommand.run),
    "campaigns": (CampaignsCommand.help, CampaignsCommand.run),
    "queues": (QueuesCommand.help, QueuesCommand.run),
    "projects": (ProjectsCommand.help, ProjectsCommand.run),
    "delivery-data": (DeliveryDataCommand.help, DeliveryDataCommand.run),
    "apns": (APNsCommand.help, APNsCommand.run),
    "topics": (TopicsCommand.help, TopicsCommand.run),
    "dashboard": (DashboardCommand.help, DashboardCommand.run),
    "emulator": (EmulatorCommand.help, { try EmulatorCommand.run(arguments: $0) }),
]
guard let command = commands[name] else {
    if let guess = nearest(name, among: Array(commands.keys)) {
        printError("herald: unknown command '\(name)'; did you mean 'herald \(guess)'? ('herald --help' lists the commands)")
    } else {
        printError("herald: unknown command '\(name)'\n\n\(usage)")
    }
    exit(2)
}
if rest.contains("--help") || rest.contains("-h") {
    print(command.help)
    exit(0)
}
// What stops a command goes out in its log format: with `--log-format json` (or
// HERALD_LOG_FORMAT=json) on a command that logs, one JSON record, so a collector reading the
// records meets no plain line, not even the last one.
let jsonLog: Bool = {
    guard command.help.contains("--log-format") else { return false }
    var format = ProcessInfo.processInfo.environment["HERALD_LOG_FORMAT"]
    for (index, argument) in rest.enumerated() {
        if argument == "--log-format", index + 1 < rest.count { format = rest[index + 1] }
        if argument.hasPrefix("--log-format=") { format = String(argument.dropFirst("--log-format=".count)) }
    }
    return format?.lowercased() == "json"
}()
func fail(_ text: String) {
    guard jsonLog else { return printError(text) }
    let prefix = "herald \(name): "
    Logger(format: .json, prefix: "herald \(name)").error(text.hasPrefix(prefix) ? String(text.dropFirst(prefix.count)) : text)
}
do {
    exit(try command.run(rest))
} catch let error as UsageError {
    fail(error.description)
    exit(ExitStatus.badInput)
} catch let error as PostgresError where error.isConnectionFailure {
    fail("herald \(name): \(error)")
    exit(ExitStatus.databaseUnreachable)
} catch {
    // Errors that already name the command (the emulator's own) are not prefixed twice.
    let text = "\(error)"
    fail(text.hasPrefix("herald ") ? text : "herald \(name): \(text)")
    exit(ExitStatus.failed)
}
