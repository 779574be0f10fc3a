import CommandOptions
import Foundation
import Postgres
import Queue
import Worker

enum MigrateCommand {
    /// No private PostgreSQL here: migrating one that stops when the command ends would do nothing
    /// useful (`herald work` on the embedded default migrates its own).
    static let options: [Option] = withHelp(connectionOptions.filter { ["database-url", "log-level", "log-format"].contains($0.name) },
                                            ["database-url": "The PostgreSQL to migrate (required)."]) + [
        Option(name: "dry-run", help: "List the migrations and definitions an upgrade would apply, and any refusal; change nothing."),
        Option(name: "replace-edited", help: "Replace herald functions or views edited in the database by hand with this release's (refused without it)."),
    ]
    static let help = helpText(
        command: "migrate", summary: "Create or update the herald schema (migrations compiled into this binary).",
        usage: "[options]", options: options,
        footer: """
        Needs DATABASE_URL (or --database-url): it starts no PostgreSQL of its own (herald work with
        nothing set migrates the one it starts).
        Each numbered migration runs once, in order, recorded in herald.schema_migrations; then every
        herald.* function and view whose definition changed is replaced (recorded in
        herald.schema_definitions). All of it is one transaction, under an advisory lock so that two
        deploys cannot race: a running pool sees the schema before or after, never half-way.
        A herald.prune_token you replaced is kept.
        Refused, with nothing applied (exit 2): a database migrated by a newer release (a migration
        this binary does not carry), or a herald function or view edited in the database since the
        last migrate (named, with the first line that differs; --replace-edited replaces them).
        Upgrading a running deployment: migrate first, then roll the pools (docs/operations.md).
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
        do { connection = try PGConnection(url: url) } catch { throw databaseProblem(error, command: "migrate") }
        let replaceEdited = parsed.has("replace-edited")
        if parsed.has("dry-run") {
            let planned: Migrator.Applied
            do { planned = try Migrator.plan(connection, replaceEdited: replaceEdited) } catch let refusal as Migrator.Refusal {
                throw UsageError("herald migrate --dry-run: the upgrade would be refused: \(refusal)")
            }
            if planned.migrations.isEmpty && planned.definitions.isEmpty {
                print("herald schema is up to date (\(Migrator.migrations.count) migrations, \(Migrator.definitions.count) functions and views); nothing would change")
            } else {
                for name in planned.migrations { print("would apply \(name)") }
                if !planned.definitions.isEmpty {
                    print("would replace \(planned.definitions.count) of \(Migrator.definitions.count) functions and views: \(planned.definitions.joined(separator: ", "))")
                }
                print("Nothing was changed (--dry-run).")
            }
            return 0
        }
        let applied: Migrator.Applied
        do { applied = try Migrator.apply(connection, replaceEdited: replaceEdited) { log.warning($0) } } catch let refusal as Migrator.Refusal {
            throw UsageError("herald migrate: \(refusal)")
        }
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
