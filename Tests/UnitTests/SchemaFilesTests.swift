import Foundation
import Testing
import Queue

/// Where the schema's SQL lives: each `herald.*` function and view has one file holding its one
/// current definition, and the numbered migrations hold none (so nobody has to replay them to
/// learn what a function does).
@Suite struct SchemaFilesTests {
    /// The functions, views and triggers a text creates, as (kind, name), comments left out.
    static func created(in sql: String) -> [(kind: String, name: String)] {
        let pattern = /(?i)\bCREATE\s+(?:OR\s+REPLACE\s+)?(FUNCTION|VIEW|TRIGGER)\s+(?:herald\.)?(\w+)/
        return code(sql).matches(of: pattern).map { (String($0.1).lowercased(), String($0.2)) }
    }

    /// The text without its `--` comments.
    static func code(_ sql: String) -> String {
        sql.split(separator: "\n", omittingEmptySubsequences: false)
            .map { line in line.range(of: "--").map { String(line[..<$0.lowerBound]) } ?? String(line) }
            .joined(separator: "\n")
    }

    /// The one function a numbered migration may create: the hook an application replaces with
    /// its own (created once in 001, never replaced by `herald migrate`).
    static let createdOnce = ["prune_token"]

    @Test func noFunctionOrViewIsDefinedInTwoFiles() {
        var files: [String: Set<String>] = [:]
        for file in Migrator.migrations.map({ ("migrations/\($0.name)", $0.sql) }) + Migrator.definitions.map({ ($0.name, $0.sql) }) {
            for object in Self.created(in: file.1) where object.kind != "trigger" {
                files["\(object.kind) \(object.name)", default: []].insert(file.0)
            }
        }
        #expect(files.count > 60, "the schema has its functions and views")
        for (object, where_) in files.sorted(by: { $0.key < $1.key }) {
            #expect(where_.count == 1, "\(object) is defined in \(where_.sorted())")
        }
    }

    @Test func numberedMigrationsHoldNoFunctionViewOrTrigger() {
        for migration in Migrator.migrations {
            for object in Self.created(in: migration.sql) where !Self.createdOnce.contains(object.name) {
                Issue.record("migrations/\(migration.name) creates \(object.kind) \(object.name): it belongs in Sources/Queue/SQL/\(object.kind == "view" ? "views" : "functions")/")
            }
        }
    }

    @Test func eachDefinitionFileHoldsTheObjectItIsNamedAfter() {
        #expect(Migrator.definitions.count > 60)
        for definition in Migrator.definitions {
            let parts = definition.name.split(separator: "/").map(String.init)
            let kind = parts[0] == "views" ? "view" : "function"
            let objects = Self.created(in: definition.sql)
            #expect(objects.contains { $0.kind == kind && $0.name == parts[1] }, "\(definition.name).sql defines \(kind) \(parts[1])")
            // Triggers sit beside the function they call; nothing else shares the file.
            for object in objects where object.kind != "trigger" && object.name != parts[1] {
                Issue.record("\(definition.name).sql also defines \(object.kind) \(object.name)")
            }
            // Replaced whole on every change: a bare CREATE would fail on a database that has it.
            #expect(!Self.code(definition.sql).contains(/(?i)\bCREATE\s+(FUNCTION|VIEW|TRIGGER)\b/), "\(definition.name).sql uses CREATE OR REPLACE")
        }
    }

    /// A migration this release adds drops no function but one renamed aside a release or more
    /// before (`_NAME_before_NNN`): a caller that resolved a function before `herald migrate`
    /// committed, an application's statement or a running pool's, would fail with "cache lookup
    /// failed for function N". A changed signature renames the old function aside instead
    /// (docs/sql-layout.md). `UpgradeTests` checks the catalog itself, for the last two releases.
    @Test func aMigrationOfThisReleaseDropsOnlyFunctionsRenamedAside() throws {
        let fixture = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fixtures/PreviousRelease/migrations")
        let released = Set(try FileManager.default.contentsOfDirectory(atPath: fixture.path)
            .filter { $0.hasSuffix(".sql") }.map { String($0.dropLast(4)) })
        #expect(released.contains("001_schema"), "the last release's migrations are read from \(fixture.path)")
        for migration in Migrator.migrations where !released.contains(migration.name) {
            let drops = Self.code(migration.sql).matches(of: /(?i)\bDROP\s+(?:FUNCTION|ROUTINE|PROCEDURE)\s+(?:IF\s+EXISTS\s+)?(?:herald\.)?(\w+)/)
            for drop in drops where String(drop.1).wholeMatch(of: /_\w+_before_\d{3}/) == nil {
                Issue.record("""
                    migrations/\(migration.name) drops herald.\(drop.1): a call that resolved it before herald migrate committed \
                    would fail ("cache lookup failed for function N"). Keep it with CREATE OR REPLACE, or rename the old \
                    signature aside (ALTER FUNCTION ... RENAME TO _\(drop.1.drop { $0 == "_" })_before_NNN; docs/sql-layout.md)
                    """)
            }
        }
    }

    /// A statement file is never named like a function file: `claim_jobs.sql` running
    /// `herald.claim_batch` while `functions/claim_jobs.sql` defines `herald.claim_jobs` sent a
    /// reader to the wrong definition. (`SQL/admin` is not held to this yet: several of its
    /// statements are named after the function they call.)
    @Test func noStatementFileIsNamedLikeAFunctionFile() throws {
        let sql = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Sources/Queue/SQL")
        func names(_ folder: String) throws -> Set<String> {
            Set(try FileManager.default.contentsOfDirectory(atPath: sql.appendingPathComponent(folder).path).filter { $0.hasSuffix(".sql") })
        }
        let statements = try names("statements"), functions = try names("functions")
        #expect(statements.count > 20 && functions.count > 60, "both folders are read")
        for name in statements.intersection(functions).sorted() {
            Issue.record("SQL/statements/\(name) has the name of SQL/functions/\(name): name the statement after what it does, e.g. claim_due_jobs.sql for the claim")
        }
    }

    /// The product's statements are named files (`SQL.name`), never string literals at the call.
    @Test func productCodeRunsOnlyNamedStatements() throws {
        let sources = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Sources")
        var checked = 0
        for module in ["Queue", "Worker", "Dashboard"] {
            let folder = sources.appendingPathComponent(module)
            let files = FileManager.default.enumerator(atPath: folder.path)?.compactMap { $0 as? String }.filter { $0.hasSuffix(".swift") } ?? []
            for file in files {
                let text = try String(contentsOf: folder.appendingPathComponent(file), encoding: .utf8)
                checked += 1
                // Transaction control (BEGIN, COMMIT, ROLLBACK) is not a statement of its own.
                for line in text.split(separator: "\n")
                where line.contains(/\.(query|execute)\(\s*"/) && !line.contains(/execute\("(BEGIN|COMMIT|ROLLBACK)"\)/) {
                    Issue.record("Sources/\(module)/\(file) runs an inline statement: \(line.trimmingCharacters(in: .whitespaces))")
                }
            }
        }
        #expect(checked > 20)
    }
}
