import Emulator
import Foundation

// `herald <command> [options]`. The worker commands land with the HTTP client; today the
// binary serves the local FCM emulator.
let usage = """
Herald: durable push notifications from PostgreSQL to Firebase Cloud Messaging.

Usage: herald <command> [options]

Commands:
  emulator   Run the local FCM emulator (HTTP/2 and HTTP/1.1, OAuth2, device groups, fault tokens).

Run 'herald <command> --help' for its options.
"""

let arguments = Array(CommandLine.arguments.dropFirst())
guard let name = arguments.first, !["--help", "-h", "help"].contains(name) else {
    print(usage)
    exit(arguments.isEmpty ? 2 : 0)
}
switch name {
case "emulator":
    let rest = Array(arguments.dropFirst())
    if rest.contains("--help") {
        print(EmulatorCommand.help)
        exit(0)
    }
    do {
        exit(try EmulatorCommand.run(arguments: rest))
    } catch {
        FileHandle.standardError.write("herald emulator: \(error)\n".data(using: .utf8)!)
        exit(2)
    }
default:
    FileHandle.standardError.write("herald: unknown command '\(name)'\n\n\(usage)\n".data(using: .utf8)!)
    exit(2)
}
