import Crypto
import FCM
import Postgres

/// Brings a database to the schema this binary carries, under an advisory lock so two deploys
/// cannot race, in two steps (the pattern of Flyway's versioned and repeatable migrations):
///
/// 1. `migrations/*.sql`, numbered, each applied once, in order, in its own transaction, recorded
///    in herald.schema_migrations: tables, indexes, constraints, drops of old function signatures
///    and data moves.
/// 2. `Sources/Queue/SQL/functions/*.sql` and `SQL/views/*.sql`: each holds the one current
///    definition of one `herald.*` function (with the triggers that call it) or view, written with
///    CREATE OR REPLACE. A file is applied whenever its text differs from the one recorded in
///    herald.schema_definitions (and all of them after any numbered migration ran, which may have
///    dropped an old signature), all in one transaction.
///
/// Then it grants again the role kinds recorded by herald.grant_role (so objects a migration added
/// are covered, and PUBLIC executes no herald function) and stores the binary's FCM validation
/// rules for herald.validate_message.
public enum Migrator {
    /// pg_advisory_lock key: "herald" in ASCII.
    public static let lockKey = 0x6865_7261_6c64

    public static let migrations: [(name: String, sql: String)] = EmbeddedMigrations.all.map { ($0.name, $0.text) }

    /// Every function and view file, named by folder and file (`functions/claim_jobs`), functions
    /// first, each group in name order.
    public static let definitions: [(name: String, sql: String)] =
        EmbeddedFunctions.all.map { ("functions/\($0.name)", $0.text) } + EmbeddedViews.all.map { ("views/\($0.name)", $0.text) }

    /// The numbered migrations whose text changed after release, when their function and view
    /// definitions moved to one file each, with the checksum of the text as released. Their
    /// tables, indexes and data moves are unchanged, so a database that recorded the released
    /// text has what the new text makes (its functions are replaced by step 2): its record is
    /// updated to the new checksum without a warning. Any other difference is still reported.
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
    ]

    /// What one run applied.
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

    /// Returns the names of the numbered migrations it applied (empty when none was due); see
    /// `apply` for the function and view files too.
    @discardableResult
    public static func migrate(_ connection: PGConnection, log: (String) -> Void = { _ in }) throws(PostgresError) -> [String] {
        try apply(connection, log: log).migrations
    }

    /// Applies what is due; `log` hears warnings (a migration whose recorded text differs from
    /// the embedded one in a way not planned).
    @discardableResult
    public static func apply(_ connection: PGConnection, log: (String) -> Void = { _ in }) throws(PostgresError) -> Applied {
        try connection.query(SQL.schemaLock, [.int(lockKey)])
        defer { _ = try? connection.query(SQL.schemaUnlock, [.int(lockKey)]) }
        try connection.execute(SQL.schemaRecords)
        var applied = Applied()
        applied.migrations = try applyMigrations(connection, log: log)
        applied.definitions = try applyDefinitions(connection, all: !applied.migrations.isEmpty)
        // PUBLIC executes no herald function, and the kinds herald.grant_role gave roles cover
        // what this run added (docs/roles.md).
        try connection.query(SQL.applyRoleGrants)
        try connection.query(MessageRules.loadStatement, [.text(MessageRules.json)])
        return applied
    }

    static func checksum(_ text: String) -> String { Base64URL.encode(SHA256.hash(Array(text.utf8))) }

    private static func applyMigrations(_ connection: PGConnection, log: (String) -> Void) throws(PostgresError) -> [String] {
        let recorded = try connection.query(SQL.schemaMigrationsApplied)
        var done: [String: String] = [:]
        for row in 0..<recorded.rowCount { done[recorded[row, 0]!] = recorded[row, 1]! }
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
            do {
                try connection.transaction { () throws(PostgresError) in
                    try connection.execute(migration.sql)
                    try connection.query(SQL.schemaMigrationRecord, [.text(migration.name), .text(checksum)])
                }
            } catch {
                throw PostgresError("migration \(migration.name) failed: \(error.message)", sqlState: error.sqlState)
            }
            applied.append(migration.name)
        }
        return applied
    }

    /// Applies the function and view files whose text is not the one recorded (all of them when
    /// `all`), in one transaction. A definition that names a function or view not created yet
    /// (a SQL-language function is checked when created) is tried again after the others, so the
    /// files need no order of their own; one that still fails after a round without progress
    /// fails the run, naming its file.
    private static func applyDefinitions(_ connection: PGConnection, all: Bool) throws(PostgresError) -> [String] {
        let recorded = try connection.query(SQL.schemaDefinitionsApplied)
        var done: [String: String] = [:]
        for row in 0..<recorded.rowCount { done[recorded[row, 0]!] = recorded[row, 1]! }
        let due = definitions.filter { all || done[$0.name] != checksum($0.sql) }
        if due.isEmpty { return [] }
        try connection.transaction { () throws(PostgresError) in
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
