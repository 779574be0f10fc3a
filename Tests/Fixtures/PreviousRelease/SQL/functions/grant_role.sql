-- grant_role: gives `role` what one kind of user of Herald needs, and nothing else (docs/roles.md):
--   reader    reads outcomes, events, statistics, campaigns, queues and the registry without its
--             key paths (herald.projects.credentials);
--   producer  a reader that also enqueues (every enqueue entry point, INSERT into herald.jobs of
--             the columns an application sets), creates campaigns, subscribes and unsubscribes,
--             and reports tokens (touch_token, herald.device_tokens rows);
--   operator  a reader that also pauses, resumes and cancels queues and campaigns, retries and
--             discards dead letters, sets limits, frequency caps, quiet hours, token aging and
--             events, and reads the audit log (it writes there only through record_admin_action).
-- No kind may change the project registry, read key paths, write the audit log directly, write
-- dead letters or update or delete jobs: that stays Herald's own role's (the schema owner's).
-- Any earlier grant of the role in schema herald is taken back first, so it holds one kind. The
-- kind is recorded in herald.role_grants, and every herald migrate grants it again, so objects
-- later migrations add are covered. Every function granted here is SECURITY DEFINER with its own
-- search_path: the grantee needs no privilege on the tables the function writes.
-- Only the schema owner may run it (PUBLIC may not), as the role Herald migrates with.
CREATE OR REPLACE FUNCTION herald.grant_role(role text, kind text) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    reader_relations text[] := ARRAY[
        'jobs', 'dead_letters', 'events', 'campaigns', 'queues', 'multicasts', 'device_groups', 'device_tokens',
        'pruned_tokens', 'topic_subscriptions', 'token_sends', 'project_pauses', 'project_rates', 'dedupe_keys',
        'token_aging', 'message_extra_fields', 'message_rules', 'message_rule_steps', 'apns_rules',
        'queue_stats', 'campaign_progress', 'topic_stats'];
    reader_functions text[] := ARRAY[
        'events_since', 'legacy_result', 'multicast_result', 'legacy_multicast', 'validate_message', 'validate_apns_message',
        'is_legacy',
        'from_legacy', 'from_legacy_form', 'multicast_max_tokens', 'topic_max_tokens'];
    producer_functions text[] := ARRAY[
        'enqueue', 'enqueue_multicast', 'enqueue_legacy', 'enqueue_legacy_form', 'enqueue_group_op',
        'create_campaign', 'subscribe', 'unsubscribe', 'touch_token'];
    -- What an application sets on a job; the rest (state, attempts, locks, outcomes) is the pool's.
    producer_job_columns text := 'queue, kind, priority, message, run_at, max_attempts, dedupe_key, validate_only, '
                                 'campaign_id, time_zone, project';
    operator_functions text[] := ARRAY[
        'pause_queue', 'resume_queue', 'pause_campaign', 'resume_campaign', 'cancel_campaign',
        'retry_dead_letter', 'retry_dead_letters', 'requeue_dead_letters', 'discard_dead_letters', 'remove_dead_letters',
        'set_queue_limits', 'set_frequency_cap', 'set_quiet_hours', 'set_token_aging', 'set_queue_events',
        'record_admin_action'];
    functions text[];
    grantee text := quote_ident(role);
    name text;
    signature regprocedure;
    project_columns text;
BEGIN
    IF kind IS NULL OR kind NOT IN ('producer', 'reader', 'operator') THEN
        RAISE EXCEPTION 'herald.grant_role: kind % is not one of producer, reader, operator', quote_nullable(kind)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF role IS NULL OR NOT EXISTS (SELECT 1 FROM pg_roles r WHERE r.rolname = grant_role.role) THEN
        RAISE EXCEPTION 'herald.grant_role: role % does not exist; create it first (CREATE ROLE)', quote_nullable(role)
            USING ERRCODE = 'undefined_object';
    END IF;
    IF EXISTS (SELECT 1 FROM pg_namespace n WHERE n.nspname = 'herald' AND n.nspowner = (SELECT r.oid FROM pg_roles r WHERE r.rolname = grant_role.role)) THEN
        RAISE EXCEPTION 'herald.grant_role: % owns schema herald (it is Herald''s own role); give a kind to another role', role
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM herald.revoke_role(role, forget => false);

    EXECUTE format('GRANT USAGE ON SCHEMA herald TO %s', grantee);
    FOREACH name IN ARRAY reader_relations LOOP
        IF to_regclass('herald.' || quote_ident(name)) IS NOT NULL THEN
            EXECUTE format('GRANT SELECT ON herald.%I TO %s', name, grantee);
        END IF;
    END LOOP;
    -- The registry without where the keys are.
    SELECT string_agg(quote_ident(a.attname), ', ' ORDER BY a.attnum) INTO project_columns
    FROM pg_attribute a
    WHERE a.attrelid = 'herald.projects'::regclass AND a.attnum > 0 AND NOT a.attisdropped AND a.attname <> 'credentials';
    EXECUTE format('GRANT SELECT (%s) ON herald.projects TO %s', project_columns, grantee);

    functions := reader_functions;
    IF kind = 'producer' THEN
        functions := functions || producer_functions;
        EXECUTE format('GRANT INSERT (%s) ON herald.jobs TO %s', producer_job_columns, grantee);
        EXECUTE format('GRANT INSERT, UPDATE, DELETE ON herald.device_tokens TO %s', grantee);
    ELSIF kind = 'operator' THEN
        functions := functions || operator_functions;
        EXECUTE format('GRANT SELECT ON herald.admin_log TO %s', grantee);
    END IF;
    FOR signature IN
        SELECT p.oid::regprocedure FROM pg_proc p
        WHERE p.pronamespace = 'herald'::regnamespace AND p.proname = ANY (functions)
    LOOP
        EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %s', signature, grantee);
    END LOOP;

    INSERT INTO herald.role_grants AS g (role, kind) VALUES (grant_role.role, grant_role.kind)
    ON CONFLICT ON CONSTRAINT role_grants_pkey DO UPDATE SET kind = excluded.kind, granted_at = now();
END
$$;
