// Helpers shared by the integration tests: a PostgreSQL to test against, one fresh migrated
// database per test, and bounded waiting.
import Crypto
import FCM
import Foundation
import LocalPostgres
import Postgres
import Queue

public struct TestFailure: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

public enum TestDatabase {
    private static let lock = NSLock()
    nonisolated(unsafe) private static var cluster: LocalCluster?
    nonisolated(unsafe) private static var counter = 0

    /// The server's admin URL: HERALD_TEST_DATABASE_URL (as .ci/run sets it), or else a private
    /// cluster this test process starts once under /tmp and stops when it exits.
    public static func adminURL() throws -> String {
        if let url = ProcessInfo.processInfo.environment["HERALD_TEST_DATABASE_URL"], !url.isEmpty { return url }
        lock.lock()
        defer { lock.unlock() }
        if let cluster { return cluster.url }
        let directory = NSTemporaryDirectory() + "herald-test-pg-\(getpid())"
        let started = try LocalCluster.start(directory: directory, durable: false)
        cluster = started
        atexit {
            try? TestDatabase.stopCluster()
        }
        return started.url
    }

    static func stopCluster() throws {
        guard let cluster else { return }
        try cluster.stop()
        try? FileManager.default.removeItem(atPath: cluster.directory)
    }

    /// Whether migrated test databases start as the last release left them
    /// (HERALD_TEST_SCHEMA=release): the released migrations, then this binary's `Migrator`, as an
    /// upgrade in production would. Run the SQL suites so to check that an upgraded database
    /// behaves as a fresh one does.
    public static var startsFromRelease: Bool { ProcessInfo.processInfo.environment["HERALD_TEST_SCHEMA"] == "release" }

    /// The migrations of the last release, as they were released (Tests/Fixtures/ReleaseMigrations).
    public static func releasedMigrations() throws -> [(name: String, sql: String)] {
        let folder = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fixtures/ReleaseMigrations")
        let names = try FileManager.default.contentsOfDirectory(atPath: folder.path).filter { $0.hasSuffix(".sql") }.sorted()
        guard !names.isEmpty else { throw TestFailure("no released migrations in \(folder.path)") }
        return try names.map { (String($0.dropLast(4)), try String(contentsOf: folder.appendingPathComponent($0), encoding: .utf8)) }
    }

    /// The folder of the previous release's SQL (Tests/Fixtures/PreviousRelease): its numbered
    /// migrations, its function and view files, and the statements its workers and admin
    /// commands run, as they were at its release.
    public static var previousRelease: URL { FixtureRelease.previous.folder }

    /// The `.sql` files of a folder of the previous release, by name without `.sql`, in name order.
    public static func previousReleaseFiles(_ folder: String) throws -> [(name: String, sql: String)] {
        try FixtureRelease.previous.files(folder)
    }

    /// Brings an empty database to the previous release's schema the way its `herald migrate` did.
    public static func migrateAsPreviousRelease(_ connection: PGConnection) throws {
        try migrate(connection, as: .previous)
    }

    /// Brings an empty database to a kept release's schema the way its `herald migrate` did: each
    /// numbered migration in its own transaction, recorded with its checksum, then every function
    /// and view file (recorded likewise, one transaction), then the validation rules (this
    /// binary's: the APNs rules only for a release that has herald.apns_rules).
    public static func migrate(_ connection: PGConnection, as release: FixtureRelease) throws {
        let checksum = { (text: String) in Base64URL.encode(SHA256.hash(Array(text.utf8))) }
        // The tables its migrate recorded in, as its migrate made them.
        if let records = try release.files("SQL/admin").first(where: { $0.name == "schema_records" }) {
            try connection.execute(records.sql)
        } else {
            try connection.execute("""
                CREATE SCHEMA IF NOT EXISTS herald;
                CREATE TABLE IF NOT EXISTS herald.schema_migrations (
                    version text PRIMARY KEY, checksum text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now());
                CREATE TABLE IF NOT EXISTS herald.schema_definitions (
                    name text PRIMARY KEY, checksum text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now());
                """)
        }
        for migration in try release.files("migrations") {
            try connection.transaction { () throws(PostgresError) in
                try connection.execute(migration.sql)
                try connection.query("INSERT INTO herald.schema_migrations (version, checksum) VALUES ($1, $2)",
                                     [.text(migration.name), .text(checksum(migration.sql))])
            }
        }
        let definitions = try release.files("SQL/functions").map { ("functions/\($0.name)", $0.sql) }
            + release.files("SQL/views").map { ("views/\($0.name)", $0.sql) }
        try connection.transaction { () throws(PostgresError) in
            var waiting = definitions
            while !waiting.isEmpty {
                var failed: [(String, String)] = []
                for (name, sql) in waiting {
                    do throws(PostgresError) {
                        try connection.savepoint("definition") { () throws(PostgresError) in try connection.execute(sql) }
                        try connection.query("INSERT INTO herald.schema_definitions (name, checksum) VALUES ($1, $2)",
                                             [.text(name), .text(checksum(sql))])
                    } catch where ["42883", "42P01", "42704"].contains(error.sqlState ?? "") {
                        failed.append((name, sql))
                    }
                }
                if failed.count == waiting.count { throw PostgresError("\(release)'s \(failed[0].0) does not apply") }
                waiting = failed
            }
        }
        try connection.query(MessageRules.loadStatement, [.text(MessageRules.json)])
        if try connection.query("SELECT to_regclass('herald.apns_rules') IS NOT NULL").bool(0, 0) == true {
            try connection.query(APNsMessageRules.loadStatement, [.text(APNsMessageRules.json)])
        }
    }

    /// Brings an empty database to the schema of the last release the way its `herald migrate`
    /// did: each released migration in its own transaction, recorded with its checksum, then the
    /// validation rules stored.
    public static func migrateAsReleased(_ connection: PGConnection) throws {
        try connection.execute("""
            CREATE SCHEMA IF NOT EXISTS herald;
            CREATE TABLE IF NOT EXISTS herald.schema_migrations (
                version    text PRIMARY KEY,
                checksum   text NOT NULL,
                applied_at timestamptz NOT NULL DEFAULT now()
            );
            """)
        for migration in try releasedMigrations() {
            try connection.transaction { () throws(PostgresError) in
                try connection.execute(migration.sql)
                try connection.query("INSERT INTO herald.schema_migrations (version, checksum) VALUES ($1, $2)",
                                     [.text(migration.name), .text(Base64URL.encode(SHA256.hash(Array(migration.sql.utf8))))])
            }
        }
        try connection.query(MessageRules.loadStatement, [.text(MessageRules.json)])
    }

    /// A new, empty database (migrated unless `migrated: false`); drop it when done.
    public static func fresh(migrated: Bool = true) throws -> FreshDatabase {
        let admin = try adminURL()
        lock.lock()
        counter += 1
        let name = "herald_t\(getpid())_\(counter)_\(UInt32.random(in: 0...UInt32.max))"
        lock.unlock()
        let connection = try PGConnection(url: admin)
        // Creating databases from one template at the same moment can collide; one at a time.
        lock.lock()
        defer { lock.unlock() }
        try connection.execute("CREATE DATABASE \(PGConnection.quoteIdentifier(name))")
        let database = FreshDatabase(name: name, url: replaceDatabase(in: admin, with: name), adminURL: admin)
        if migrated {
            let conn = try database.connect()
            if startsFromRelease { try migrateAsReleased(conn) }
            try Migrator.migrate(conn)
        }
        return database
    }

    static func replaceDatabase(in url: String, with name: String) -> String {
        guard var components = URLComponents(string: url) else { return url }
        components.path = "/" + name
        return components.string ?? url
    }
}

public struct FreshDatabase: Sendable {
    public let name: String
    public let url: String
    public let adminURL: String
    public func connect() throws -> PGConnection { try PGConnection(url: url) }
    public func drop() {
        guard let connection = try? PGConnection(url: adminURL) else { return }
        try? connection.execute("DROP DATABASE IF EXISTS \(PGConnection.quoteIdentifier(name)) WITH (FORCE)")
    }
}

/// Polls `condition` until it holds or `timeout` seconds pass; returns whether it held.
/// (This waits for an outcome, with a deadline; it never stands in for synchronisation.)
@discardableResult
public func waitUntil(timeout: Double, interval: Double = 0.02, _ condition: () throws -> Bool) rethrows -> Bool {
    let deadline = Date().addingTimeInterval(timeout)
    while Date() < deadline {
        if try condition() { return true }
        Thread.sleep(forTimeInterval: interval)
    }
    return try condition()
}

/// A release whose SQL the tests keep as it was released (Tests/Fixtures/PreviousRelease/README.md):
/// its numbered migrations, its function and view files, and the statements its workers and
/// admin commands run. This release's `herald migrate` must serve a database of either.
public enum FixtureRelease: String, CaseIterable, Sendable, CustomStringConvertible {
    /// The last release, the one this release upgrades from (Tests/Fixtures/PreviousRelease).
    case previous = "PreviousRelease"
    /// The release before it (Tests/Fixtures/ReleaseBefore): a deployment may skip a release.
    case before = "ReleaseBefore"

    public var folder: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fixtures/\(rawValue)")
    }

    /// The release's commit (the folder's COMMIT), abbreviated.
    public var commit: String {
        let text = (try? String(contentsOf: folder.appendingPathComponent("COMMIT"), encoding: .utf8)) ?? "unknown"
        return String(text.trimmingCharacters(in: .whitespacesAndNewlines).prefix(12))
    }

    public var description: String { "\(rawValue) (\(commit))" }

    /// The `.sql` files of one of its folders (`migrations`, `SQL`, `SQL/admin`, `SQL/functions`,
    /// `SQL/views`), by name without `.sql`, in name order.
    public func files(_ subfolder: String) throws -> [(name: String, sql: String)] {
        let directory = folder.appendingPathComponent(subfolder)
        let names = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.hasSuffix(".sql") }.sorted()
        guard !names.isEmpty else { throw TestFailure("no SQL files in \(directory.path)") }
        return try names.map { (String($0.dropLast(4)), try String(contentsOf: directory.appendingPathComponent($0), encoding: .utf8)) }
    }
}
