import Foundation
import Testing
import Postgres
import TestSupport

/// `herald grant ROLE --as KIND` as a user runs it (the real binary, as the schema's owner), then
/// each kind's own connection: what it is for works, everything else is refused with a privilege
/// error (SQLSTATE 42501), and a role given nothing can do nothing.
@Suite(.serialized) struct RoleGrantTests {
    /// A login role of this test (roles belong to the whole cluster: the name carries the
    /// database's), its connection URL, and cleanup.
    struct Roles {
        let database: FreshDatabase
        let admin: PGConnection
        var created: [String] = []

        init() throws {
            database = try TestDatabase.fresh()
            admin = try database.connect()
        }

        mutating func create(_ suffix: String) throws -> String {
            let name = "\(database.name)_\(suffix)"
            try admin.execute("CREATE ROLE \(PGConnection.quoteIdentifier(name)) LOGIN PASSWORD 'role-test'")
            created.append(name)
            return name
        }

        func url(of role: String) throws -> String {
            var components = try #require(URLComponents(string: database.url))
            components.user = role
            components.password = "role-test"
            return try #require(components.string)
        }

        func close() {
            database.drop()
            guard let server = try? PGConnection(url: database.adminURL) else { return }
            for role in created { _ = try? server.execute("DROP ROLE IF EXISTS \(PGConnection.quoteIdentifier(role))") }
        }
    }

    /// Runs `statement` and expects PostgreSQL's privilege error.
    func expectRefused(_ connection: PGConnection, _ statement: String, _ what: String) {
        do {
            try connection.execute(statement)
            Issue.record("\(what) was allowed: \(statement)")
        } catch {
            #expect(error.sqlState == "42501", "\(what): \(error)")
        }
    }

    func grant(_ roles: Roles, _ role: String, _ kind: String) throws {
        let result = try HeraldProcess.run(["grant", role, "--as", kind], environment: ["DATABASE_URL": roles.database.url])
        #expect(result.status == 0, "\(result.output)")
        #expect(result.output.contains("granted \(role) the \(kind) privileges in schema herald"), "\(result.output)")
    }

    @Test func aProducerEnqueuesAndReadsOutcomesButChangesNothingElse() throws {
        var roles = try Roles()
        defer { roles.close() }
        let producer = try roles.create("producer")
        try grant(roles, producer, "producer")
        // What the owner set up: a dead letter, a registered project, a logged action.
        try roles.admin.execute("""
            SELECT herald.add_project('shop', 'shop-fcm', '/secrets/shop.json');
            INSERT INTO herald.dead_letters (job_id, queue, message, reason, attempts, max_attempts, created_at)
            VALUES (1, 'default', '{"token": "t"}', 'INVALID_ARGUMENT', 1, 1, now());
            SELECT herald.record_admin_action('retry', '{1}', '{}', 'test');
            """)

        let p = try PGConnection(url: try roles.url(of: producer))
        let id = try p.query("SELECT herald.enqueue('{\"token\": \"device-1\", \"notification\": {\"title\": \"Hi\"}}')").int(0, 0)
        #expect(id != nil)
        try p.query("SELECT herald.enqueue_multicast('{\"notification\": {\"title\": \"Hi\"}}', ARRAY['device-2', 'device-3'])")
        try p.query("SELECT herald.enqueue_legacy('{\"to\": \"device-4\", \"notification\": {\"title\": \"Hi\"}}')")
        try p.query("SELECT herald.touch_token('device-5', 'android', 'user-5')")
        try p.execute("INSERT INTO herald.device_tokens (token, user_ref, platform) VALUES ('device-6', 'user-6', 'ios')")
        let campaign = try #require(try p.query("SELECT herald.create_campaign('spring', project => 'shop')").int(0, 0))
        try p.query("""
            INSERT INTO herald.jobs (message, queue, campaign_id, project)
            SELECT jsonb_build_object('token', token, 'notification', jsonb_build_object('title', 'Sale')), 'marketing', $1, 'shop'
            FROM herald.device_tokens
            """, [.int(campaign)])
        #expect(try p.query("SELECT herald.subscribe('news', ARRAY['device-5', 'device-6'])").int(0, 0) == 2)
        #expect(try p.query("SELECT herald.unsubscribe('news', ARRAY['device-6'])").int(0, 0) == 1)
        // Outcomes: its jobs, dead letters, events, the statistics views, campaign progress.
        #expect(try p.query("SELECT count(*) FROM herald.jobs").int(0, 0) == 6)
        #expect(try p.query("SELECT total FROM herald.campaign_progress WHERE campaign_id = $1", [.int(campaign)]).int(0, 0) == 2)
        #expect(try p.query("SELECT reason FROM herald.dead_letters")[0, 0] == "INVALID_ARGUMENT")
        try p.query("SELECT count(*) FROM herald.queue_stats")
        try p.query("SELECT * FROM herald.events_since(0, 10)")
        try p.query("SELECT herald.validate_message('{\"topic\": \"news\"}')")
        #expect(try p.query("SELECT name, fcm_project_id FROM herald.projects")[0, 0] == "shop")
        // FCM's delivery data and the campaigns' view of it: read, never written.
        #expect(try p.query("SELECT android_apps FROM herald.projects")[0, 0] == "{}")
        #expect(try p.query("SELECT count(*) FROM herald.campaign_delivery").int(0, 0) == 0)
        #expect(try p.query("SELECT labels FROM herald.campaign_label_budget").rowCount == 0, "spring has no label")
        #expect(try p.query("SELECT count(*) FROM herald.delivery_data").int(0, 0) == 0)
        try p.query("SELECT count(*) FROM herald.delivery_data_fetches")

        expectRefused(p, "UPDATE herald.jobs SET priority = 5", "updating jobs")
        expectRefused(p, "DELETE FROM herald.jobs", "deleting jobs")
        expectRefused(p, "INSERT INTO herald.jobs (message, state) VALUES ('{\"token\": \"x\"}', 'completed')", "writing a job's outcome")
        expectRefused(p, "SELECT credentials FROM herald.projects", "reading key paths")
        expectRefused(p, "SELECT * FROM herald.projects", "reading key paths")
        expectRefused(p, "SELECT credentials FROM herald.project_registry", "reading key paths through the view")
        expectRefused(p, "UPDATE herald.projects SET credentials = '/etc/shadow'", "pointing a project at another file")
        expectRefused(p, "UPDATE herald.projects SET max_rate = 1", "writing the registry")
        expectRefused(p, "DELETE FROM herald.projects", "writing the registry")
        expectRefused(p, "INSERT INTO herald.projects (name, fcm_project_id, credentials) VALUES ('x', 'x', '/etc/shadow')", "adding a project")
        expectRefused(p, "SELECT herald.add_project('x', 'x', '/etc/shadow')", "adding a project")
        expectRefused(p, "SELECT herald.remove_project('shop')", "removing a project")
        expectRefused(p, "SELECT herald.pause_project_sending('shop', 'no')", "pausing a project")
        expectRefused(p, "SELECT herald.set_project_android_apps('shop', ARRAY['1:1:android:a'])", "naming a project's apps")
        expectRefused(p, "INSERT INTO herald.delivery_data (project, app_id, day, analytics_label) VALUES ('shop', 'a', now(), '')", "forging delivery data")
        expectRefused(p, "UPDATE herald.campaign_days SET sent = 0", "changing what was sent")
        expectRefused(p, "SELECT herald.pause_queue('default')", "pausing a queue")
        expectRefused(p, "SELECT herald.pause_campaign(\(campaign))", "pausing a campaign")
        expectRefused(p, "SELECT herald.set_queue_limits('default', 1, 1)", "setting limits")
        expectRefused(p, "SELECT herald.set_frequency_cap('default', 1, '1 hour')", "setting a cap")
        expectRefused(p, "SELECT herald.set_quiet_hours('default', '22:00', '07:00')", "setting quiet hours")
        expectRefused(p, "INSERT INTO herald.queues (name, paused) VALUES ('x', true)", "writing queue settings")
        expectRefused(p, "INSERT INTO herald.dead_letters (job_id, queue, message, reason, attempts, max_attempts, created_at) VALUES (9, 'default', '{}', 'forged', 1, 1, now())", "forging a dead letter")
        expectRefused(p, "SELECT herald.retry_dead_letters('default', '%')", "retrying dead letters")
        expectRefused(p, "SELECT herald.retry_dead_letter(1)", "retrying a dead letter")
        expectRefused(p, "SELECT herald.discard_dead_letters('default', '%', '0 seconds')", "discarding dead letters")
        expectRefused(p, "DELETE FROM herald.admin_log", "deleting the audit log")
        expectRefused(p, "SELECT * FROM herald.admin_log", "reading the audit log")
        expectRefused(p, "SELECT herald.record_admin_action('forged', '{}', '{}', 'x')", "writing the audit log")
        expectRefused(p, "SELECT * FROM herald.claim_batch(ARRAY['default'], 10, 30, 'w', NULL, NULL, NULL, NULL, NULL)", "claiming jobs")
        expectRefused(p, "SELECT herald.grant_role(current_user, 'operator')", "granting itself more")
        expectRefused(p, "CREATE FUNCTION herald.planted() RETURNS int LANGUAGE sql AS 'SELECT 1'", "creating in schema herald")

        // Nothing of the refused changed anything.
        #expect(try roles.admin.query("SELECT credentials FROM herald.projects")[0, 0] == "/secrets/shop.json")
        #expect(try roles.admin.query("SELECT count(*) FROM herald.admin_log").int(0, 0) == 1)
        #expect(try roles.admin.query("SELECT count(*) FROM herald.dead_letters").int(0, 0) == 1)
    }

    @Test func anOperatorPausesResumesAndRetriesButNeverReachesKeyPathsOrTheAuditLog() throws {
        var roles = try Roles()
        defer { roles.close() }
        let operatorRole = try roles.create("operator")
        try grant(roles, operatorRole, "operator")
        try roles.admin.execute("""
            SELECT herald.add_project('shop', 'shop-fcm', '/secrets/shop.json');
            SELECT herald.create_campaign('spring');
            INSERT INTO herald.dead_letters (job_id, queue, message, reason, attempts, max_attempts, created_at)
            VALUES (1, 'default', '{"token": "t"}', 'INVALID_ARGUMENT', 1, 1, now());
            SELECT herald.record_admin_action('retry', '{1}', '{}', 'owner');
            """)
        let o = try PGConnection(url: try roles.url(of: operatorRole))
        try o.query("SELECT herald.pause_queue('default')")
        #expect(try roles.admin.query("SELECT paused FROM herald.queues WHERE name = 'default'").bool(0, 0) == true)
        try o.query("SELECT herald.resume_queue('default')")
        #expect(try roles.admin.query("SELECT paused FROM herald.queues WHERE name = 'default'").bool(0, 0) == false)
        try o.query("SELECT herald.pause_campaign(1)")
        try o.query("SELECT herald.resume_campaign(1)")
        try o.query("SELECT herald.set_queue_limits('default', 10, 5)")
        try o.query("SELECT herald.set_frequency_cap('default', 3, '1 day')")
        try o.query("SELECT herald.set_quiet_hours('default', '22:00', '07:00')")
        #expect(try o.query("SELECT herald.retry_dead_letters('default', 'INVALID%')").int(0, 0) == 1)
        #expect(try roles.admin.query("SELECT count(*) FROM herald.jobs WHERE state = 'available'").int(0, 0) == 1)
        // Its action reaches the audit log under its own name, through the one function.
        try o.query("SELECT herald.record_admin_action('retry', '{1}', '{}', 'shell')")
        #expect(try o.query("SELECT recorded_by FROM herald.admin_log ORDER BY id DESC LIMIT 1")[0, 0] == operatorRole)

        expectRefused(o, "SELECT credentials FROM herald.projects", "reading key paths")
        expectRefused(o, "SELECT * FROM herald.project_registry", "reading key paths through the view")
        expectRefused(o, "UPDATE herald.projects SET credentials = 'env:HOME'", "pointing a project at another key")
        expectRefused(o, "SELECT herald.add_project('x', 'x', '/etc/shadow')", "adding a project")
        expectRefused(o, "DELETE FROM herald.admin_log", "deleting the audit log")
        expectRefused(o, "UPDATE herald.admin_log SET action = 'nothing'", "rewriting the audit log")
        expectRefused(o, "INSERT INTO herald.admin_log (action, source, recorded_by) VALUES ('x', 'x', 'someone else')", "writing the audit log as another")
        expectRefused(o, "UPDATE herald.jobs SET queue = 'elsewhere'", "moving jobs")
        expectRefused(o, "SELECT herald.enqueue('{\"token\": \"x\"}')", "enqueueing")
        #expect(try roles.admin.query("SELECT count(*) FROM herald.admin_log").int(0, 0) == 2)
    }

    @Test func aRoleGivenNothingCanDoNothingAndARevokedOneLosesEverything() throws {
        var roles = try Roles()
        defer { roles.close() }
        let nobody = try roles.create("nobody")
        let former = try roles.create("former")
        // As if the application's role had the schema's USAGE (the old README's grants): PUBLIC
        // still executes no herald function and reads no table.
        try roles.admin.execute("GRANT USAGE ON SCHEMA herald TO \(PGConnection.quoteIdentifier(nobody))")
        let n = try PGConnection(url: try roles.url(of: nobody))
        let functions = try roles.admin.query("""
            SELECT p.oid::regprocedure::text FROM pg_catalog.pg_proc p
            WHERE p.pronamespace = 'herald'::regnamespace AND pg_catalog.has_function_privilege('public', p.oid, 'EXECUTE')
            """)
        #expect(functions.rowCount == 0, "PUBLIC may execute \((0..<functions.rowCount).compactMap { functions[$0, 0] })")
        let relations = try roles.admin.query("""
            SELECT c.relname::text FROM pg_catalog.pg_class c
            WHERE c.relnamespace = 'herald'::regnamespace AND c.relkind IN ('r', 'v', 'S')
              AND pg_catalog.has_table_privilege($1::text, c.oid, 'SELECT, INSERT, UPDATE, DELETE, TRUNCATE, REFERENCES, TRIGGER')
            """, [.text(nobody)])
        #expect(relations.rowCount == 0, "\((0..<relations.rowCount).compactMap { relations[$0, 0] })")
        expectRefused(n, "SELECT herald.enqueue('{\"token\": \"x\"}')", "enqueueing without a grant")
        expectRefused(n, "SELECT count(*) FROM herald.jobs", "reading jobs without a grant")
        expectRefused(n, "SELECT herald.is_legacy('{}')", "calling a helper without a grant")

        // Granted, then revoked: back to nothing, and not granted again by the next migrate.
        try grant(roles, former, "producer")
        let f = try PGConnection(url: try roles.url(of: former))
        try f.query("SELECT herald.enqueue('{\"token\": \"x\"}')")
        let revoked = try HeraldProcess.run(["grant", former, "--revoke"], environment: ["DATABASE_URL": roles.database.url])
        #expect(revoked.status == 0, "\(revoked.output)")
        let migrated = try HeraldProcess.run(["migrate"], environment: ["DATABASE_URL": roles.database.url])
        #expect(migrated.status == 0, "\(migrated.output)")
        expectRefused(f, "SELECT herald.enqueue('{\"token\": \"x\"}')", "enqueueing after --revoke")
        let unknown = try HeraldProcess.run(["grant", former, "--as", "admin"], environment: ["DATABASE_URL": roles.database.url])
        #expect(unknown.status == 2 && unknown.output.contains("--as \"admin\" is not a kind"), "\(unknown.output)")
    }

    @Test func migrateGrantsARecordedKindWhatALaterDefinitionAdds() throws {
        var roles = try Roles()
        defer { roles.close() }
        let producer = try roles.create("producer")
        try grant(roles, producer, "producer")
        // A later release's new overload of an entry point starts with nothing for anyone but
        // the owner; herald migrate grants it to the recorded producer.
        try roles.admin.execute("""
            CREATE FUNCTION herald.enqueue(message jsonb, note text) RETURNS bigint
            LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS 'SELECT herald.enqueue(message)';
            DELETE FROM herald.schema_definitions WHERE name = 'functions/enqueue';
            """)
        let p = try PGConnection(url: try roles.url(of: producer))
        expectRefused(p, "SELECT herald.enqueue('{\"token\": \"x\"}'::jsonb, 'note')", "a function added after the grant")
        let migrated = try HeraldProcess.run(["migrate"], environment: ["DATABASE_URL": roles.database.url])
        #expect(migrated.status == 0, "\(migrated.output)")
        #expect(try p.query("SELECT herald.enqueue('{\"token\": \"x\"}'::jsonb, 'note')").int(0, 0) != nil)
    }
}
