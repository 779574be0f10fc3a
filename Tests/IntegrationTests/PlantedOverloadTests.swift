import Foundation
import Testing
import Postgres
import TestSupport

/// An application's role plants overloads of the built-ins Herald's SQL calls (with exact
/// argument types, which PostgreSQL prefers to pg_catalog's polymorphic ones) in `public`, open
/// to every role as on PostgreSQL 14 and older, and in a schema of the application's search_path.
/// A pool then works jobs, a multicast, a legacy fan-out, topic subscriptions, a labelled
/// campaign, a capped queue, dead letters, a pruned token and its maintenance: none of the
/// planted functions runs. Each one counts its calls in a sequence, which no rollback undoes.
@Suite(.serialized) struct PlantedOverloadTests {
    /// The built-ins Herald's statements and functions call whose pg_catalog version takes a
    /// polymorphic argument (found by listing every name called in Sources/Queue/SQL, the
    /// Benchmark and Dashboard sources against pg_proc), each planted with the concrete types
    /// Herald passes. Arguments: (name, arguments, result, body returning the genuine answer).
    static let plants: [(String, String, String, String)] = [
        ("unnest", "a herald.claimed_job[]", "SETOF herald.claimed_job", "RETURN QUERY SELECT * FROM pg_catalog.unnest(a);"),
        ("unnest", "a bigint[]", "SETOF bigint", "RETURN QUERY SELECT * FROM pg_catalog.unnest(a);"),
        ("unnest", "a text[]", "SETOF text", "RETURN QUERY SELECT * FROM pg_catalog.unnest(a);"),
        ("unnest", "a integer[]", "SETOF integer", "RETURN QUERY SELECT * FROM pg_catalog.unnest(a);"),
        ("unnest", "a double precision[]", "SETOF double precision", "RETURN QUERY SELECT * FROM pg_catalog.unnest(a);"),
        ("cardinality", "a herald.claimed_job[]", "integer", "RETURN pg_catalog.cardinality(a);"),
        ("cardinality", "a bigint[]", "integer", "RETURN pg_catalog.cardinality(a);"),
        ("cardinality", "a text[]", "integer", "RETURN pg_catalog.cardinality(a);"),
        ("array_length", "a herald.claimed_job[], d integer", "integer", "RETURN pg_catalog.array_length(a, d);"),
        ("array_length", "a bigint[], d integer", "integer", "RETURN pg_catalog.array_length(a, d);"),
        ("array_length", "a text[], d integer", "integer", "RETURN pg_catalog.array_length(a, d);"),
        ("array_to_json", "a text[]", "json", "RETURN pg_catalog.array_to_json(a);"),
        ("array_to_json", "a bigint[]", "json", "RETURN pg_catalog.array_to_json(a);"),
        ("array_to_string", "a text[], s text", "text", "RETURN pg_catalog.array_to_string(a, s);"),
        ("array_position", "a text[], v text", "integer", "RETURN pg_catalog.array_position(a, v);"),
        ("array_position", "a bigint[], v bigint", "integer", "RETURN pg_catalog.array_position(a, v);"),
        ("array_fill", "v integer, d integer[]", "integer[]", "RETURN pg_catalog.array_fill(v, d);"),
        ("to_jsonb", "v text", "jsonb", "RETURN pg_catalog.to_jsonb(v);"),
        ("to_jsonb", "v bigint", "jsonb", "RETURN pg_catalog.to_jsonb(v);"),
        ("to_json", "v text", "json", "RETURN pg_catalog.to_json(v);"),
        ("jsonb_build_object", "k text, v text", "jsonb", "RETURN pg_catalog.jsonb_build_object(k, v);"),
        ("jsonb_build_object", "k text, v jsonb", "jsonb", "RETURN pg_catalog.jsonb_build_object(k, v);"),
        ("jsonb_build_array", "v text", "jsonb", "RETURN pg_catalog.jsonb_build_array(v);"),
        ("format", "f text, v text", "text", "RETURN pg_catalog.format(f, v);"),
        ("concat_ws", "s text, a text, b text", "text", "RETURN pg_catalog.concat_ws(s, a, b);"),
        ("width_bucket", "v double precision, b double precision[]", "integer", "RETURN pg_catalog.width_bucket(v, b);"),
    ]

    /// Aggregates of the same kind: (name, argument type, state type, step expression).
    static let aggregates: [(String, String, String, String)] = [
        ("array_agg", "bigint", "bigint[]", "pg_catalog.array_append(s, v)"),
        ("array_agg", "text", "text[]", "pg_catalog.array_append(s, v)"),
        ("jsonb_agg", "jsonb", "jsonb", "pg_catalog.coalesce(s, '[]'::jsonb) OPERATOR(pg_catalog.||) pg_catalog.jsonb_build_array(v)"),
        ("array_agg", "integer", "integer[]", "pg_catalog.array_append(s, v)"),
    ]

    /// The planted DDL for one schema, run as the planting role.
    static func plantStatements(in schema: String) -> [String] {
        var statements: [String] = []
        for (index, plant) in plants.enumerated() {
            statements.append("""
                CREATE FUNCTION \(schema).\(plant.0)(\(plant.1)) RETURNS \(plant.2) LANGUAGE plpgsql AS $planted$
                BEGIN
                    PERFORM pg_catalog.nextval('public.planted_hits');
                    RAISE WARNING 'planted %.% (%) ran', '\(schema)', '\(plant.0)', \(index);
                    \(plant.3)
                END
                $planted$
                """)
        }
        for (index, aggregate) in aggregates.enumerated() {
            let step = "planted_step_\(index)"
            statements.append("""
                CREATE FUNCTION \(schema).\(step)(s \(aggregate.2), v \(aggregate.1)) RETURNS \(aggregate.2) LANGUAGE plpgsql AS $planted$
                BEGIN
                    PERFORM pg_catalog.nextval('public.planted_hits');
                    RETURN \(aggregate.3);
                END
                $planted$
                """)
            statements.append("CREATE AGGREGATE \(schema).\(aggregate.0)(\(aggregate.1)) (SFUNC = \(schema).\(step), STYPE = \(aggregate.2))")
        }
        return statements
    }

    @Test func noPlantedBuiltInRunsWhileAPoolWorksJobsCampaignsAndMaintenance() throws {
        let stack = try WorkerStack(latencyMilliseconds: 5)
        defer { stack.close() }
        let c = stack.connection
        let planter = "\(stack.database.name)_app"
        defer {
            stack.database.drop()
            if let server = try? PGConnection(url: stack.database.adminURL) {
                _ = try? server.execute("DROP ROLE IF EXISTS \(PGConnection.quoteIdentifier(planter))")
            }
        }
        // PostgreSQL 14's public (anyone may create there), a schema of the application's own on
        // the database's search_path, and the application's role as the README sets it up.
        try c.execute("""
            GRANT CREATE ON SCHEMA public TO PUBLIC;
            CREATE SCHEMA app;
            GRANT USAGE, CREATE ON SCHEMA app TO PUBLIC;
            CREATE ROLE \(PGConnection.quoteIdentifier(planter)) LOGIN PASSWORD 'planted';
            ALTER DATABASE \(PGConnection.quoteIdentifier(stack.database.name)) SET search_path = app, "$user", public;
            """)
        let granted = try HeraldProcess.run(["grant", planter, "--as", "producer"], environment: ["DATABASE_URL": stack.database.url])
        #expect(granted.status == 0, "\(granted.output)")
        var components = try #require(URLComponents(string: stack.database.url))
        components.user = planter
        components.password = "planted"
        let app = try PGConnection(url: try #require(components.string))
        try app.execute("""
            CREATE SEQUENCE public.planted_hits;
            GRANT USAGE, SELECT, UPDATE ON SEQUENCE public.planted_hits TO PUBLIC;
            """)
        for statement in Self.plantStatements(in: "public") + Self.plantStatements(in: "app") {
            try app.execute(statement)
        }

        // Work of every kind, enqueued by the application's role.
        try app.execute("""
            INSERT INTO herald.device_tokens (token, user_ref, platform, time_zone)
            SELECT 'ok-campaign-' || g, 'user-' || g, 'android', 'Europe/Paris' FROM generate_series(1, 40) AS g;
            SELECT herald.touch_token('ok-touched', 'ios', 'user-touched');
            INSERT INTO herald.jobs (message)
            SELECT jsonb_build_object('token', 'ok-' || g, 'notification', jsonb_build_object('title', 'Hi')) FROM generate_series(1, 30) AS g;
            SELECT herald.enqueue('{"token": "fail-invalid-1", "notification": {"title": "Hi"}}', max_attempts => 1);
            SELECT herald.enqueue('{"token": "fail-unregistered-1", "notification": {"title": "Hi"}}');
            SELECT herald.enqueue('{"token": "ok-dedupe"}', dedupe_key => 'once');
            SELECT herald.enqueue_multicast('{"notification": {"title": "Hi"}}', ARRAY['ok-m1', 'ok-m2', 'ok-m3']);
            SELECT herald.enqueue_legacy('{"registration_ids": ["ok-l1", "ok-l2"], "notification": {"title": "Hi"}}');
            SELECT herald.subscribe('news', ARRAY['ok-s1', 'ok-s2']);
            """)
        try c.execute("""
            SELECT herald.set_frequency_cap('capped', 100, '1 hour');
            SELECT herald.set_quiet_hours('capped', '00:00', '00:01');
            SELECT herald.set_queue_events('default', true);
            """)
        try app.execute("""
            INSERT INTO herald.jobs (message, queue, time_zone)
            SELECT jsonb_build_object('token', 'ok-capped-' || g, 'notification', jsonb_build_object('title', 'Hi')), 'capped', 'Europe/Paris'
            FROM generate_series(1, 10) AS g;
            """)
        let campaign = try #require(try app.query("SELECT herald.create_campaign('planted', analytics_label => 'spring')").int(0, 0))
        try app.query("""
            INSERT INTO herald.jobs (message, queue, campaign_id)
            SELECT jsonb_build_object('token', d.token, 'notification', jsonb_build_object('title', 'Sale')), 'marketing', $1
            FROM herald.device_tokens d WHERE d.token LIKE 'ok-campaign-%'
            """, [.int(campaign)])
        #expect(try stack.count("SELECT last_value FROM public.planted_hits WHERE is_called") == -1,
                "the enqueue entry points ran a planted function")

        let pool = try HeraldProcess(["work", "--processes", "2", "--lease", "2", "--poll-interval", "0.2"], environment: stack.environment)
        try pool.start()
        defer { pool.signal(SIGKILL); pool.wait(timeout: 10) }
        // Done when nothing is left to send and the maintenance leader has finished the campaign.
        #expect(waitUntil(timeout: 90) {
            (try? stack.count("SELECT count(*) FROM herald.jobs WHERE state IN ('available', 'scheduled', 'running')")) == 0
                && (try? c.query("SELECT state FROM herald.campaigns WHERE id = $1", [.int(campaign)])[0, 0]) == "finished"
                && (try? stack.count("SELECT count(*) FROM herald.topic_subscriptions WHERE state = 'subscribed'")) == 2
        }, "\(pool.output)")
        #expect(try stack.count("SELECT count(*) FROM herald.jobs WHERE state = 'completed' AND campaign_id = $1", [.int(campaign)]) == 40)
        #expect(try stack.count("SELECT count(*) FROM herald.dead_letters") == 1)
        #expect(try stack.count("SELECT count(*) FROM herald.pruned_tokens") == 1)
        #expect(try stack.count("SELECT count(*) FROM herald.leaders") >= 1)
        #expect(try stack.count("SELECT count(*) FROM herald.events") > 0)
        pool.signal(SIGTERM)
        #expect(pool.wait(timeout: 30) == 0, "\(pool.output)")

        #expect(try stack.count("SELECT last_value FROM public.planted_hits WHERE is_called") == -1,
                "a planted function ran as Herald's role:\n\(pool.output)")
        #expect(!pool.output.contains("planted"), "\(pool.output)")

        // The plants are real: a session on the application's search_path runs them.
        let exposed = try PGConnection(url: try #require(components.string))
        try exposed.execute("SET search_path = app, public")
        try exposed.query("SELECT count(*) FROM unnest(ARRAY[1, 2]::bigint[]), cardinality(ARRAY['a']::text[])")
        #expect(try stack.count("SELECT last_value FROM public.planted_hits WHERE is_called") >= 2)
    }
}
