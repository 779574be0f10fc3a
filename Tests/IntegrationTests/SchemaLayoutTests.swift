import Crypto
import Foundation
import JSON
import Testing
import Postgres
import Queue
import TestSupport

/// The schema as `herald migrate` leaves it: numbered migrations, then one file per function and
/// view. A database the last release created must come out as a fresh one does.
@Suite struct SchemaLayoutTests {
    /// The functions and views whose definition this release changes on purpose (compared with
    /// the release only by their presence, and with a fresh database in full).
    /// (claim_jobs became a wrapper of claim_batch; take_project_tokens gained p_now; those two,
    /// claim_topic_work and _give_back_project_tokens name the FCM project p_fcm_project; the
    /// legacy multicast functions read and write herald.multicasts; the legacy translation's
    /// rejection reasons, HINT and comments cite docs/legacy.md instead of documents outside the
    /// repository; enqueue_multicast takes a project, and a replayed dead letter keeps its project
    /// and, in requeue_dead_letters, its validate_only; create_campaign and enqueue_group_op take a
    /// project; the claim's bucket helpers qualify their operators.)
    static let changedSinceRelease: Set<String> = ["claim_jobs", "take_project_tokens", "is_legacy", "_legacy_row", "enqueue",
                                                   "legacy_multicast", "legacy_result", "multicast_result", "_legacy_fan_out",
                                                   "_legacy_raise", "_legacy_translate", "_legacy_form_payload",
                                                   "enqueue_multicast", "retry_dead_letter", "requeue_dead_letters",
                                                   "create_campaign", "enqueue_group_op",
                                                   "_check_topic_call", "_mv_suggest",
                                                   // Its rate over the time since the campaign started when that is under a minute.
                                                   "campaign_progress",
                                                   // Its NOTIFY names the projects of the rows inserted (a transition table).
                                                   "_notify_jobs",
                                                   // Its oldest-available age leaves out jobs a paused project holds back.
                                                   "queue_stats",
                                                   // Their FCM project id is p_fcm_project (migration 280).
                                                   "claim_topic_work", "_give_back_project_tokens",
                                                   // Inlined into the claim, so without a SET clause: their operators
                                                   // name their schema instead (docs/roles.md).
                                                   "_burst", "_refill", "_wait", "_claim_wait"]
    /// Triggers whose WHEN changed on purpose since the release (android_v2 is never legacy), and
    /// indexes rebuilt on purpose (migration 190: the claim's index leads with the job's project).
    static let triggersChangedSinceRelease: Set<String> = ["trigger jobs_legacy", "trigger jobs_notify", "index herald.jobs_claim_unit", "index jobs_claim_unit"]
    /// Tables renamed on purpose since the release (migration 140): the same columns, constraints
    /// and indexes under the new name.
    static let renamedSinceRelease: [(old: String, new: String)] = [("sender_pauses", "project_pauses")]
    /// Tables dropped on purpose since the release (migration 160 moves the legacy multicasts into
    /// herald.multicasts), with their columns, constraints and indexes; and indexes replaced
    /// (migration 250: the topic claim's index also holds its order).
    static let droppedSinceRelease = ["legacy_multicasts", "index herald.topic_subscriptions_due", "index topic_subscriptions_due"]
    /// A function's definition without its security and search_path clauses: this release pins
    /// every function's search_path to `pg_catalog, pg_temp` (some had `pg_catalog` alone, twenty
    /// none) and makes the functions granted to a role kind, and the triggers on tables those roles
    /// write, SECURITY DEFINER (docs/roles.md); the rest of each definition is compared as before.
    static func withoutSecurityClauses(_ text: String) -> String {
        text.split(separator: "\n", omittingEmptySubsequences: false)
            .filter { !$0.hasPrefix(" SET search_path TO ") && $0 != " SECURITY DEFINER" }
            .map { $0.replacingOccurrences(of: " SECURITY DEFINER", with: "") }
            .joined(separator: "\n")
    }
    static func renamed(_ text: String) -> String {
        renamedSinceRelease.reduce(text) { $0.replacingOccurrences(of: $1.old, with: $1.new) }
    }

    /// Every object of schema herald as the catalog describes it, keyed by kind and name:
    /// functions (definition and comment), views, triggers, indexes, constraints, columns.
    static func catalog(_ c: PGConnection) throws -> [String: String] {
        let result = try c.query("""
            SELECT 'function ' || p.oid::regprocedure::text,
                   pg_get_functiondef(p.oid) || coalesce(E'\\ncomment ' || obj_description(p.oid, 'pg_proc'), '')
            FROM pg_proc p WHERE p.pronamespace = 'herald'::regnamespace
            UNION ALL
            SELECT 'view ' || c.oid::regclass::text, pg_get_viewdef(c.oid)
            FROM pg_class c WHERE c.relnamespace = 'herald'::regnamespace AND c.relkind = 'v'
            UNION ALL
            SELECT 'trigger ' || t.tgname, pg_get_triggerdef(t.oid)
            FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
            WHERE c.relnamespace = 'herald'::regnamespace AND NOT t.tgisinternal
            UNION ALL
            SELECT 'index ' || i.indexrelid::regclass::text, pg_get_indexdef(i.indexrelid)
            FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid WHERE c.relnamespace = 'herald'::regnamespace
            UNION ALL
            SELECT 'constraint ' || conrelid::regclass::text || ' ' || conname, pg_get_constraintdef(oid)
            FROM pg_constraint WHERE connamespace = 'herald'::regnamespace
            UNION ALL
            SELECT 'column ' || a.attrelid::regclass::text || '.' || a.attname,
                   format_type(a.atttypid, a.atttypmod) || ' ' || a.attnotnull || ' ' || coalesce(pg_get_expr(d.adbin, d.adrelid), '')
            FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
            LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
            WHERE c.relnamespace = 'herald'::regnamespace AND c.relkind IN ('r', 'v') AND a.attnum > 0 AND NOT a.attisdropped
              AND c.relname <> 'schema_definitions'
            """)
        var objects: [String: String] = [:]
        for row in 0..<result.rowCount { objects[result[row, 0]!] = result[row, 1]! }
        return objects
    }

    /// The name of the function or view a catalog key is about ("function herald.enqueue(...)"
    /// gives "enqueue"; the schema is left out when it is on the search path, as it is for a
    /// user named herald); nil for other kinds.
    static func definitionName(_ key: String) -> String? {
        for prefix in ["function ", "view "] where key.hasPrefix(prefix) {
            let name = key.dropFirst(prefix.count).prefix { $0 != "(" }
            return String(name.hasPrefix("herald.") ? name.dropFirst("herald.".count) : name)
        }
        return nil
    }

    @Test func aDatabaseOfTheLastReleaseMigratesToWhatAFreshOneIs() throws {
        let released = try TestDatabase.fresh(migrated: false)
        defer { released.drop() }
        let upgraded = try released.connect()
        try TestDatabase.migrateAsReleased(upgraded)
        let before = try Self.catalog(upgraded)

        var warnings: [String] = []
        let applied = try Migrator.apply(upgraded) { warnings.append($0) }
        // The rewritten migrations are recognised as the released ones: no warning, none run again.
        #expect(warnings.isEmpty, "\(warnings)")
        let releasedNames = try TestDatabase.releasedMigrations().map(\.name)
        #expect(applied.migrations == Migrator.migrations.map(\.name).filter { !releasedNames.contains($0) })
        #expect(applied.definitions == Migrator.definitions.map(\.name))
        let recorded = try upgraded.query("SELECT version, checksum FROM herald.schema_migrations ORDER BY version")
        let current = Dictionary(uniqueKeysWithValues: Migrator.migrations.map { ($0.name, $0.sql) })
        for row in 0..<recorded.rowCount {
            let name = recorded[row, 0]!
            let fresh = try #require(current[name], "\(name) is recorded but not carried by this binary")
            #expect(recorded[row, 1]! == Self.checksum(fresh), "\(name) keeps the released checksum")
        }
        let after = try Self.catalog(upgraded)

        // The same objects as a database created by this binary, definition for definition.
        let fresh = try TestDatabase.fresh(migrated: false)
        defer { fresh.drop() }
        let created = try fresh.connect()
        try Migrator.migrate(created)
        let freshCatalog = try Self.catalog(created)
        #expect(Set(after.keys) == Set(freshCatalog.keys))
        for (key, definition) in freshCatalog where after[key] != definition {
            Issue.record("\(key) differs between an upgraded and a fresh database:\n\(after[key] ?? "(missing)")\n---\n\(definition)")
        }

        // And, but for what this release changes on purpose, what the release had.
        for (key, definition) in before {
            if let name = Self.definitionName(key), Self.changedSinceRelease.contains(name) { continue }
            if Self.triggersChangedSinceRelease.contains(key) { continue }
            if Self.droppedSinceRelease.contains(where: { key.contains($0) }) {
                #expect(after[key] == nil, "\(key) is dropped on upgrade")
                continue
            }
            if Self.definitionName(key) != nil && key.hasPrefix("function ") {
                #expect(after[key].map(Self.withoutSecurityClauses) == Self.withoutSecurityClauses(definition), "\(key) changed on upgrade")
                continue
            }
            #expect(after[Self.renamed(key)] == Self.renamed(definition), "\(key) changed on upgrade")
        }
    }

    /// A legacy multicast enqueued before the upgrade is found whole after it (migration 160 moves
    /// herald.legacy_multicasts into herald.multicasts).
    @Test func legacyMulticastsOfTheLastReleaseSurviveTheUpgrade() throws {
        let database = try TestDatabase.fresh(migrated: false)
        defer { database.drop() }
        let c = try database.connect()
        try TestDatabase.migrateAsReleased(c)
        let ids = try c.query("""
            SELECT array_to_json(herald.enqueue_legacy('{"registration_ids": ["a", "b", "c"], "data": {"k": "v"}}'))::text
            """)[0, 0]!
        try Migrator.migrate(c)
        let middle = try #require(try JSONValue.parse(ids).arrayValue?.compactMap(\.intValue)).dropFirst().first!
        let found = try c.query("SELECT array_to_json(herald.legacy_multicast($1))::text", [.int(middle)])[0, 0]!
        #expect(try JSONValue.parse(found) == JSONValue.parse(ids))
        let tokens = try c.query("SELECT array_to_json(tokens)::text FROM herald.multicasts")[0, 0]!
        #expect(tokens == #"["a","b","c"]"#)
    }

    @Test func aChangedDefinitionIsReplacedAndAnUnchangedOneIsLeftAlone() throws {
        let database = try TestDatabase.fresh()
        defer { database.drop() }
        let c = try database.connect()
        #expect(try Migrator.apply(c) == Migrator.Applied())

        // A definition the database holds from another text (an older binary, which recorded no
        // catalog text) is replaced whole.
        try c.execute("""
            CREATE OR REPLACE FUNCTION herald._burst(rate double precision) RETURNS double precision
            LANGUAGE sql IMMUTABLE AS $$ SELECT 0::double precision $$;
            UPDATE herald.schema_definitions SET checksum = 'older', catalog_definition = NULL WHERE name = 'functions/_burst';
            """)
        #expect(try c.query("SELECT herald._burst(100)")[0, 0] == "0")
        let applied = try Migrator.apply(c)
        #expect(applied == Migrator.Applied(migrations: [], definitions: ["functions/_burst"]))
        // The bucket of a 100/s limit holds a tenth of a second's worth again.
        #expect(try c.query("SELECT herald._burst(100)")[0, 0] == "10")
    }

    @Test func aDefinitionEditedInTheDatabaseIsRefusedNamedAndKeptUntilAskedToReplaceIt() throws {
        let database = try TestDatabase.fresh()
        defer { database.drop() }
        let c = try database.connect()
        try c.execute("""
            CREATE OR REPLACE FUNCTION herald._burst(rate double precision) RETURNS double precision
            LANGUAGE sql IMMUTABLE AS $$ SELECT 0::double precision $$
            """)
        // A migration is due too: nothing at all is applied while the edit stands.
        try c.execute("DELETE FROM herald.schema_migrations WHERE version = '270_leader_sessions'")
        try c.execute("ALTER TABLE herald.leaders DROP COLUMN backend_pid, DROP COLUMN backend_start")
        let refused = try HeraldProcess.run(["migrate"], environment: ["DATABASE_URL": database.url])
        #expect(refused.status == 2)
        #expect(refused.output.contains("functions/_burst"), "\(refused.output)")
        #expect(refused.output.contains("Nothing was applied"), "\(refused.output)")
        #expect(try c.query("SELECT herald._burst(100)")[0, 0] == "0", "the edit is kept")
        #expect(try c.query("SELECT count(*) FROM herald.schema_migrations WHERE version = '270_leader_sessions'").int(0, 0) == 0)
        #expect(try c.query("SELECT count(*) FROM pg_attribute WHERE attrelid = 'herald.leaders'::regclass AND attname = 'backend_pid'").int(0, 0) == 0,
                "the due migration was not applied")
        // --dry-run says the same and changes nothing.
        let dry = try HeraldProcess.run(["migrate", "--dry-run"], environment: ["DATABASE_URL": database.url])
        #expect(dry.status == 2 && dry.output.contains("functions/_burst"), "\(dry.output)")
        // Asked to, it replaces the edited definition and applies the rest.
        let planned = try HeraldProcess.run(["migrate", "--dry-run", "--replace-edited"], environment: ["DATABASE_URL": database.url])
        #expect(planned.status == 0)
        #expect(planned.output.contains("would apply 270_leader_sessions"), "\(planned.output)")
        #expect(try c.query("SELECT herald._burst(100)")[0, 0] == "0", "a dry run changes nothing")
        let replaced = try HeraldProcess.run(["migrate", "--replace-edited"], environment: ["DATABASE_URL": database.url])
        #expect(replaced.status == 0, "\(replaced.output)")
        #expect(try c.query("SELECT herald._burst(100)")[0, 0] == "10")
        #expect(try Migrator.apply(c) == Migrator.Applied(), "up to date afterwards")
    }

    @Test func aDatabaseOfANewerReleaseIsRefusedWithNothingApplied() throws {
        let database = try TestDatabase.fresh()
        defer { database.drop() }
        let c = try database.connect()
        try c.execute("INSERT INTO herald.schema_migrations (version, checksum) VALUES ('990_from_the_future', 'x')")
        try c.execute("UPDATE herald.schema_definitions SET checksum = 'older' WHERE name = 'functions/_burst'")
        let refused = try HeraldProcess.run(["migrate"], environment: ["DATABASE_URL": database.url])
        #expect(refused.status == 2)
        #expect(refused.output.contains("newer release") && refused.output.contains("990_from_the_future"), "\(refused.output)")
        #expect(try c.query("SELECT checksum FROM herald.schema_definitions WHERE name = 'functions/_burst'")[0, 0] == "older",
                "nothing was applied")
    }

    static func checksum(_ text: String) -> String { Base64URL.encode(SHA256.hash(Array(text.utf8))) }
}
