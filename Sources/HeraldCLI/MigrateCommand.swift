import CommandOptions
import Foundation
import Postgres
import Queue
import Worker

enum MigrateCommand {
    static let options: [Option] = connectionOptions.filter { ["database-url", "data-dir", "log-level", "log-format"].contains($0.name) }
    static let help = helpText(
        command: "migrate", summary: "Create or update the herald schema (migrations compiled into this binary).",
        usage: "[options]", options: options,
        footer: """
        Each numbered migration runs once, in order, in its own transaction, recorded in
        herald.schema_migrations; then every herald.* function and view whose definition changed is
        replaced (one transaction, recorded in herald.schema_definitions). All under an advisory lock
        so that two deploys cannot race. A herald.prune_token you replaced is kept.
        """)

    static func run(arguments: [String]) throws -> Int32 {
        let parsed = try parse(command: "migrate", arguments: arguments, options: options)
        let log = try RunEnvironment.logger(parsed, prefix: "herald migrate")
        guard let url = parsed.string("database-url") else {
            throw UsageError("herald migrate: set DATABASE_URL (or --database-url) to the PostgreSQL to migrate; `herald work` with nothing set migrates its private one")
        }
        let connection: PGConnection
        do { connection = try PGConnection(url: url) } catch { throw UsageError("herald migrate: DATABASE_URL: \(error)") }
        let applied = try Migrator.apply(connection) { log.warning($0) }
        if applied.migrations.isEmpty && applied.definitions.isEmpty {
            print("herald schema is up to date (\(Migrator.migrations.count) migrations, \(Migrator.definitions.count) functions and views)")
        } else {
            for name in applied.migrations { print("applied \(name)") }
            if !applied.definitions.isEmpty {
                print("replaced \(applied.definitions.count) of \(Migrator.definitions.count) functions and views")
            }
        }
        return 0
    }
}
