import Crypto
import FCM
import Postgres

/// Applies migrations/*.sql (compiled into the binary) in order, each once, each in its own
/// transaction, recorded in herald.schema_migrations, under an advisory lock so two deploys
/// cannot race. Then stores the binary's FCM validation rules for herald.validate_message.
public enum Migrator {
    /// pg_advisory_lock key: "herald" in ASCII.
    public static let lockKey = 0x6865_7261_6c64

    public static let migrations: [(name: String, sql: String)] = EmbeddedMigrations.all.map { ($0.name, $0.text) }

    /// Returns the names of the migrations it applied (empty when the database was current);
    /// `log` hears warnings (a migration whose recorded text differs from the embedded one).
    @discardableResult
    public static func migrate(_ connection: PGConnection, log: (String) -> Void = { _ in }) throws(PostgresError) -> [String] {
        try connection.query("SELECT pg_advisory_lock($1)", [.int(lockKey)])
        defer { _ = try? connection.query("SELECT pg_advisory_unlock($1)", [.int(lockKey)]) }
        try connection.execute("""
            CREATE SCHEMA IF NOT EXISTS herald;
            CREATE TABLE IF NOT EXISTS herald.schema_migrations (
                version    text PRIMARY KEY,
                checksum   text NOT NULL,
                applied_at timestamptz NOT NULL DEFAULT now()
            );
            """)
        let recorded = try connection.query("SELECT version, checksum FROM herald.schema_migrations")
        var done: [String: String] = [:]
        for row in 0..<recorded.rowCount { done[recorded[row, 0]!] = recorded[row, 1]! }
        var applied: [String] = []
        for migration in migrations {
            let checksum = Base64URL.encode(SHA256.hash(Array(migration.sql.utf8)))
            if let existing = done[migration.name] {
                if existing != checksum {
                    log("migration \(migration.name) was applied from a different text; it is not applied again (migrations are never edited once released)")
                }
                continue
            }
            do {
                try connection.transaction { () throws(PostgresError) in
                    try connection.execute(migration.sql)
                    try connection.query("INSERT INTO herald.schema_migrations (version, checksum) VALUES ($1, $2)",
                                         [.text(migration.name), .text(checksum)])
                }
            } catch {
                throw PostgresError("migration \(migration.name) failed: \(error.message)", sqlState: error.sqlState)
            }
            applied.append(migration.name)
        }
        try connection.query(MessageRules.loadStatement, [.text(MessageRules.json)])
        return applied
    }
}
