import CommandOptions
import Foundation
import Postgres
import Queue
import Worker

enum MigrateCommand {
    /// No private PostgreSQL here: migrating one that stops when the command ends would do nothing
    /// useful (`herald work` on the embedded default migrates its own).
    static let options: [Option] = withHelp(connectionOptions.filter { ["database-url", "log-level", "log-format"].contains($0.name) },
                                            ["database-url": "The PostgreSQL to migrate (required)."])
    static let help = helpText(
        command: "migrate", summary: "Create or update the herald schema (migrations compiled into this binary).",
        usage: "[options]", options: options,
        footer: """
        Needs DATABASE_URL (or --database-url): it starts no PostgreSQL of its own (herald work with
        nothing set migrates the one it starts).
        Each numbered migration runs once, in order, in its own transaction, recorded in
        herald.schema_migrations; then every herald.* function and view whose definition changed is
        replaced (one transaction, recorded in herald.schema_definitions). All under an advisory lock
        so that two deploys cannot race. A herald.prune_token you replaced is kept.
        """)

    static func run(arguments: [String]) throws -> Int32 {
        let parsed = try parse(command: "migrate", arguments: arguments, options: options)
        let log = try RunEnvironment.logger(parsed, prefix: "herald migrate")
        guard let url = (try checkedDatabaseURL(parsed)) else {
            throw UsageError("""
                herald migrate: DATABASE_URL is not set; set it (or --database-url) to the PostgreSQL to migrate, e.g.
                  DATABASE_URL=postgres://herald@db.example.com/herald herald migrate
                (herald work with nothing set starts a private PostgreSQL and migrates it itself; herald migrate starts none)
                """)
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
