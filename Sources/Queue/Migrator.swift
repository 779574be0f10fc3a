import Crypto
import FCM
import JSON
import Postgres

/// Brings a database to the schema this binary carries, under an advisory lock so two deploys
/// cannot race, in two steps (the pattern of Flyway's versioned and repeatable migrations):
///
/// 1. `migrations/*.sql`, numbered, each applied once, in order, recorded in
///    herald.schema_migrations: tables, indexes, constraints, old function signatures renamed
///    aside (never dropped while a recent release calls them: docs/sql-layout.md) and data moves.
/// 2. `Sources/Queue/SQL/functions/*.sql` and `SQL/views/*.sql`: each holds the one current
///    definition of one `herald.*` function (with the triggers that call it) or view, written with
///    CREATE OR REPLACE. A file is applied whenever its text differs from the one recorded in
///    herald.schema_definitions (and all of them after any numbered migration ran, which may have
///    renamed an old signature aside or dropped a view).
///
/// Then it grants again the role kinds recorded by herald.grant_role (so objects a migration added
/// are covered, and PUBLIC executes no herald function) and stores the binary's FCM validation
/// rules for herald.validate_message. All of it is one transaction: a pool still running the
/// previous release sees the schema before the upgrade or after it, never a migration applied and
/// the functions that go with it not yet.
///
/// Before applying anything it checks the database against the binary, inside the same
/// transaction, and applies nothing when:
/// - a migration is recorded that this binary does not carry (a newer release migrated it);
/// - a function or view differs in the catalog from what the last `herald migrate` left there
///   (edited by hand): the definition that run recorded is compared with the catalog's.
public enum Migrator {
    /// pg_advisory_lock key: "herald" in ASCII.
    public static let lockKey = 0x6865_7261_6c64

    public static let migrations: [(name: String, sql: String)] = EmbeddedMigrations.all.map { ($0.name, $0.text) }

    /// Every function and view file, named by folder and file (`functions/claim_jobs`), functions
    /// first, each group in name order.
    public static let definitions: [(name: String, sql: String)] =
        EmbeddedFunctions.all.map { ("functions/\($0.name)", $0.text) } + EmbeddedViews.all.map { ("views/\($0.name)", $0.text) }

    /// The numbered migrations whose text changed after release, with the checksum of the text as
    /// released: 001 to 080 and 110 when their function and view definitions moved to one file
    /// each; 280 and 290, which dropped functions the previous release's callers may have resolved
    /// and now rename them aside instead (docs/sql-layout.md). Their tables, indexes and data
    /// moves are unchanged, so a database that recorded the released text has what the new text
    /// makes (its functions are replaced by step 2): its record is updated to the new checksum
    /// without a warning. Any other difference is still reported.
    static let releasedChecksums: [String: String] = [
        "001_schema": "r79wgbU5agPlaNC7sEoNaxbqequybswIPS7Zr8fsMFY",
        "020_validate_message": "y1GY10uwVxhc31lVjDG0fEhdN-3GiRz5uzCFdEWkOUg",
        "040_scheduled_state": "74Z8i3KgKhOyaizXKX3rPWx9kikXlDZIVbiKuQY8QQM",
        "045_unknown_fields": "UjYVjw-l1-YnIZYJNYUmFL4rwo8E7rFAflHBJCkbQwg",
        "050_legacy_translate": "qTch4utp6y8BAA3rO40VBN-HZdWDRgAe_Rug53wfivs",
        "051_legacy_jobs": "rtanWzUbKWHm-2-L0UY07OfZv-oN1wIyVAohvzqjiys",
        "061_dead_letter_bulk": "H1pSU-KKYX1d9YGfdIuUCTxebCAoA0IQkyddK8N3alA",
        "070_campaigns": "B9noCNu7czXlWNGjPNWG9eE_5d26YP3fMso7YlAuwLc",
        "080_project_tokens": "wd120_gNCE5eyYOU9h42BYqGq8kcc3roxUKzBY7sGBo",
        "110_fcm_surface": "RTeC47HRTIQ7oMtKBR1CY4DBUHNa4j1Jx3HBe37n474",
        "280_fcm_project_parameter_names": "IxqhmI06rJ2SaxPE29LUelv8Y0wWOWgNy8aMhPlO_9g",
        "290_apns_apps": "aTPsw71oK-L7w65bV_fwuhp2KeRIh7tmZgKt8_vTDb0",
    ]

    /// What one run applied (or, for `plan`, would apply).
    public struct Applied: Sendable, Equatable {
        /// The numbered migrations applied, in order.
        public var migrations: [String] = []
        /// The function and view files (re)applied, in the order given in `definitions`.
        public var definitions: [String] = []
        public init(migrations: [String] = [], definitions: [String] = []) {
            self.migrations = migrations
            self.definitions = definitions
        }
    }

    /// A function or view whose definition in the database is not the one `herald migrate` left.
    public struct Edited: Sendable, Equatable {
        /// The definition file (`functions/claim_batch`).
        public var name: String
        /// The first line that differs, as recorded and as the catalog has it now (nil: absent).
        public var recorded: String?
        public var current: String?
    }

    /// Why a database is not migrated: nothing was applied.
    public enum Refusal: Error, Sendable, Equatable, CustomStringConvertible {
        /// Migrations recorded in the database that this binary does not carry.
        case newerDatabase(unknown: [String], newest: String)
        /// Definitions changed in the database since they were applied.
        case editedDefinitions([Edited])

        public var description: String {
            switch self {
            case let .newerDatabase(unknown, newest):
                return """
                    the database was migrated by a newer release of Herald: it records migration\(unknown.count == 1 ? "" : "s") \(unknown.joined(separator: ", ")), \
                    which this binary does not carry (its newest is \(newest)). Nothing was applied. Run the newer release's \
                    herald migrate and herald work; a schema never goes back to an older release.
                    """
            case let .editedDefinitions(edited):
                let lines = edited.map { item in
                    "  \(item.name): was \(item.recorded.map { "\"\($0)\"" } ?? "(absent)"), is now \(item.current.map { "\"\($0)\"" } ?? "(absent)")"
                }
                return """
                    \(edited.count) herald function\(edited.count == 1 ? "" : "s") or view\(edited.count == 1 ? "" : "s") changed in the database since herald migrate applied \(edited.count == 1 ? "it" : "them") \
                    (edited by hand?). Nothing was applied. The first line that differs:
                    \(lines.joined(separator: "\n"))
                    Put your change into Herald's source instead, or run herald migrate --replace-edited to replace \(edited.count == 1 ? "it" : "them") with this release's definition\(edited.count == 1 ? "" : "s").
                    """
            }
        }
    }

    /// Returns the names of the numbered migrations it applied (empty when none was due); see
    /// `apply` for the function and view files too.
    @discardableResult
    public static func migrate(_ connection: PGConnection, log: (String) -> Void = { _ in }) throws -> [String] {
        try apply(connection, log: log).migrations
    }

    /// Applies what is due, in one transaction; `log` hears warnings (a migration whose recorded
    /// text differs from the embedded one in a way not planned). Throws a `Refusal`, having
    /// applied nothing, when the database is newer than the binary or a definition was edited in
    /// it (unless `replaceEdited`). A transaction that meets a deadlock with a running pool (a
    /// migration's table lock against a claim) is tried again, up to five times.
    @discardableResult
    public static func apply(_ connection: PGConnection, replaceEdited: Bool = false, log: (String) -> Void = { _ in }) throws -> Applied {
        try run(connection, replaceEdited: replaceEdited, commit: true, log: log)
    }

    /// What `apply` would apply now, or the refusal it would meet; changes nothing (the same
    /// checks, in a transaction that is rolled back).
    public static func plan(_ connection: PGConnection, replaceEdited: Bool = false) throws -> Applied {
        try run(connection, replaceEdited: replaceEdited, commit: false, log: { _ in })
    }

    private static func run(_ connection: PGConnection, replaceEdited: Bool, commit: Bool, log: (String) -> Void) throws -> Applied {
        try connection.query(SQL.schemaLock, [.int(lockKey)])
        defer { _ = try? connection.query(SQL.schemaUnlock, [.int(lockKey)]) }
        var attempt = 0
        while true {
            attempt += 1
            var warnings: [String] = []
            do {
                try connection.execute("BEGIN")
                let applied: Applied
                do {
                    // Herald's own objects are named with their schema; nothing another role made
                    // may stand in for a built-in while the schema is written.
                    try connection.query(SQL.schemaSearchPath)
                    try connection.execute(SQL.schemaRecords)
                    // What earlier runs recorded, read once: nothing below changes it before it
                    // is used (definitions are all applied again after any migration).
                    let records = try Records(connection)
                    let edited = try refuseWhatIsNotOurs(connection, records: records, replaceEdited: replaceEdited)
                    let changed = Set(edited)
                    let dueDefinitions = definitions.filter {
                        changed.contains($0.name) || records.definitions[$0.name] != checksum($0.sql)
                    }
                    let migrationsDue = migrations.contains { records.migrations[$0.name] == nil }
                    if !dueDefinitions.isEmpty || migrationsDue {
                        // A numbered migration may ALTER any table: taken whole before, none of
                        // them waits for a reader midway. A view is replaced under its own lock.
                        let viewsDue = migrationsDue || dueDefinitions.contains { $0.name.hasPrefix("views/") }
                        try connection.query(SQL.schemaLockModes, [.text(migrationsDue ? "ACCESS EXCLUSIVE" : "SHARE ROW EXCLUSIVE"),
                                                                   .text(viewsDue ? "on" : "off")])
                        try connection.execute(SQL.schemaLockTables)
                    }
                    var due = Applied()
                    due.migrations = try applyMigrations(connection, recorded: records.migrations, log: { warnings.append($0) })
                    due.definitions = try applyDefinitions(connection, due: due.migrations.isEmpty ? dueDefinitions : definitions)
                    applied = due
                    // PUBLIC executes no herald function, and the kinds herald.grant_role gave roles
                    // cover what this run added (docs/roles.md).
                    try connection.query(SQL.applyRoleGrants)
                    try connection.query(MessageRules.loadStatement, [.text(MessageRules.json)])
                    try connection.query(APNsMessageRules.loadStatement, [.text(APNsMessageRules.json)])
                    try recordCatalog(connection)
                    if !commit {
                        try connection.execute("ROLLBACK")
                        return applied
                    }
                    try connection.execute("COMMIT")
                } catch {
                    try? connection.execute("ROLLBACK")
                    throw error
                }
                warnings.forEach(log)
                return applied
            } catch let error as PostgresError where attempt < 5 && ["40P01", "40001", "55P03"].contains(error.sqlState ?? "") {
                // A deadlock or serialization failure against a running pool: nothing was applied.
                continue
            }
        }
    }

    /// Throws a `Refusal` when the database records a migration this binary does not carry, or
    /// when a function or view differs from the definition the last run recorded for it; with
    /// `replaceEdited`, returns the files of the latter instead, to be applied again.
    private static func refuseWhatIsNotOurs(_ connection: PGConnection, records: Records, replaceEdited: Bool) throws -> [String] {
        let known = Set(migrations.map(\.name))
        let unknown = records.migrations.keys.filter { !known.contains($0) }.sorted()
        if !unknown.isEmpty {
            throw Refusal.newerDatabase(unknown: unknown, newest: migrations.last?.name ?? "none")
        }
        let left = try connection.query(SQL.schemaDefinitionsCatalogRecorded)
        var recordedCatalog: [String: String] = [:]
        for row in 0..<left.rowCount { recordedCatalog[left[row, 0]!] = left[row, 1]! }
        guard !recordedCatalog.isEmpty else { return [] }
        let now = try catalog(connection)
        var edited: [Edited] = []
        for (name, before) in recordedCatalog.sorted(by: { $0.key < $1.key }) where now[name] != before {
            let old = before.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
            let new = now[name].map { $0.split(separator: "\n", omittingEmptySubsequences: false).map(String.init) }
            guard let new else {
                edited.append(Edited(name: name, recorded: old.first, current: nil))
                continue
            }
            let index = (0..<min(old.count, new.count)).first { old[$0] != new[$0] } ?? min(old.count, new.count)
            edited.append(Edited(name: name, recorded: index < old.count ? old[index] : nil,
                                 current: index < new.count ? new[index] : nil))
        }
        if !edited.isEmpty && !replaceEdited { throw Refusal.editedDefinitions(edited) }
        return edited.map(\.name)
    }

    /// What earlier runs recorded: each migration applied and each definition file, with the
    /// checksum of the text applied.
    private struct Records {
        var migrations: [String: String] = [:]
        var definitions: [String: String] = [:]

        init(_ connection: PGConnection) throws(PostgresError) {
            let migrated = try connection.query(SQL.schemaMigrationsApplied)
            for row in 0..<migrated.rowCount { migrations[migrated[row, 0]!] = migrated[row, 1]! }
            let recorded = try connection.query(SQL.schemaDefinitionsApplied)
            for row in 0..<recorded.rowCount { definitions[recorded[row, 0]!] = recorded[row, 1]! }
        }
    }

    /// The catalog's text of every herald function (all overloads of a name together) and view,
    /// keyed as the definition files are (`functions/NAME`, `views/NAME`).
    static func catalog(_ connection: PGConnection) throws(PostgresError) -> [String: String] {
        let rows = try connection.query(SQL.schemaCatalog)
        var result: [String: String] = [:]
        for row in 0..<rows.rowCount { result[rows[row, 0]!] = rows[row, 1] ?? "" }
        return result
    }

    /// Records, for every definition file, the catalog's text of what it defines now: what the
    /// next run compares the catalog with.
    private static func recordCatalog(_ connection: PGConnection) throws(PostgresError) {
        let texts = JSONObject(try catalog(connection).map { JSONObject.Member(key: $0.key, value: .string($0.value)) })
        try connection.query(SQL.schemaDefinitionsRecordCatalog, [.text(JSONValue.object(texts).serialized)])
    }

    static func checksum(_ text: String) -> String { Base64URL.encode(SHA256.hash(Array(text.utf8))) }

    private static func applyMigrations(_ connection: PGConnection, recorded done: [String: String],
                                        log: (String) -> Void) throws(PostgresError) -> [String] {
        var applied: [String] = []
        for migration in migrations {
            let checksum = checksum(migration.sql)
            if let existing = done[migration.name] {
                if existing == releasedChecksums[migration.name] {
                    try connection.query(SQL.schemaMigrationRechecksum, [.text(migration.name), .text(checksum)])
                } else if existing != checksum {
                    log("migration \(migration.name) was applied from a different text; it is not applied again (migrations are never edited once released)")
                }
                continue
            }
            do throws(PostgresError) {
                try connection.execute(migration.sql)
                try connection.query(SQL.schemaMigrationRecord, [.text(migration.name), .text(checksum)])
            } catch {
                throw PostgresError("migration \(migration.name) failed: \(error.message)", sqlState: error.sqlState)
            }
            applied.append(migration.name)
        }
        return applied
    }

    /// Applies the function and view files `due` (those whose text is not the one recorded, the
    /// edited ones to replace, or all of them after a migration), in the run's transaction. A definition that names a function or view not created yet
    /// (a SQL-language function is checked when created) is tried again after the others, so the
    /// files need no order of their own; one that still fails after a round without progress
    /// fails the run, naming its file.
    private static func applyDefinitions(_ connection: PGConnection, due: [(name: String, sql: String)]) throws(PostgresError) -> [String] {
        if due.isEmpty { return [] }
        do {
            var waiting = due
            while !waiting.isEmpty {
                var failed: [(name: String, sql: String)] = []
                var firstError: (name: String, error: PostgresError)?
                for definition in waiting {
                    do throws(PostgresError) {
                        try connection.savepoint("definition") { () throws(PostgresError) in
                            try connection.execute(definition.sql)
                        }
                    } catch where ["42883", "42P01", "42704"].contains(error.sqlState ?? "") {
                        // undefined_function, undefined_table, undefined_object: another file first.
                        failed.append(definition)
                        if firstError == nil { firstError = (definition.name, error) }
                        continue
                    } catch {
                        throw PostgresError("\(definition.name).sql failed: \(error.message)", sqlState: error.sqlState)
                    }
                    try connection.query(SQL.schemaDefinitionRecord, [.text(definition.name), .text(checksum(definition.sql))])
                }
                if failed.count == waiting.count, let firstError {
                    throw PostgresError("\(firstError.name).sql failed: \(firstError.error.message)", sqlState: firstError.error.sqlState)
                }
                waiting = failed
            }
        }
        return due.map(\.name)
    }
}
