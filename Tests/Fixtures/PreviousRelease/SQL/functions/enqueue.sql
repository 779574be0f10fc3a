-- enqueue: callable from any transaction or trigger. A dedupe_key that is already pending
-- (scheduled, available or running) returns the existing job's id instead of adding a second one.
-- dedupe_for: the key is also refused for that long after the job holding it was enqueued,
-- whatever became of that job (delivered, dead, deleted by retention): the call returns that
-- job's id. The period is the caller's: a call with dedupe_for '1 day' is refused when a job with
-- the key was enqueued with a period in the last day. A call without dedupe_for still returns the
-- job of a key held for a period. The key's row lives in herald.dedupe_keys (one primary-key
-- lookup); concurrent calls with one key wait for each other on that row, so exactly one inserts.
-- validate_only: FCM validates the message and delivers nothing (a dry run). campaign_id: the job
-- belongs to that campaign (herald.create_campaign). project: the registry name of the Firebase
-- project it is sent for (herald.projects; NULL: the pool's own credentials); a name not in the
-- registry is refused, naming it. apns_app: for an APNs message (with apns_token, sent to Apple
-- directly), the registry name of its APNs app (herald.add_apns_app), stored as the job's
-- project; left out, the one APNs app registered. An APNs message is checked as it is inserted
-- (trigger jobs_apns: its app and herald.validate_apns_message), and refused naming the field.
CREATE OR REPLACE FUNCTION herald.enqueue(message jsonb, run_at timestamptz DEFAULT now(),
                               queue text DEFAULT 'default', priority integer DEFAULT 0,
                               max_attempts integer DEFAULT 25, dedupe_key text DEFAULT NULL,
                               validate_only boolean DEFAULT false, campaign_id bigint DEFAULT NULL,
                               dedupe_for interval DEFAULT NULL, project text DEFAULT NULL,
                               apns_app text DEFAULT NULL)
RETURNS bigint LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
    new_id bigint;
    held boolean;
BEGIN
    IF enqueue.message IS NULL THEN
        RAISE EXCEPTION 'herald.enqueue: message must not be null';
    END IF;
    IF enqueue.apns_app IS NOT NULL THEN
        IF NOT (enqueue.message ? 'apns_token') THEN
            RAISE EXCEPTION 'herald.enqueue: apns_app "%" is for an APNs message (with apns_token), and this message has none', left(enqueue.apns_app, 100)
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = 'Give the device token as apns_token, or leave apns_app out for an FCM message (project => names its FCM project).';
        END IF;
        IF enqueue.project IS NOT NULL AND enqueue.project <> enqueue.apns_app THEN
            RAISE EXCEPTION 'herald.enqueue: apns_app "%" and project "%" differ; give apns_app alone', left(enqueue.apns_app, 100), left(enqueue.project, 100)
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF NOT EXISTS (SELECT 1 FROM herald.projects p WHERE p.name = enqueue.apns_app AND p.service = 'apns') THEN
            RAISE EXCEPTION 'herald.enqueue: apns_app "%": no APNs app of that name is registered', left(enqueue.apns_app, 100)
                USING ERRCODE = 'foreign_key_violation',
                      HINT = 'herald apns list (or the view herald.apns_apps) shows the apps; herald apns add registers one.';
        END IF;
        enqueue.project := enqueue.apns_app;
    END IF;
    IF enqueue.campaign_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM herald.campaigns c WHERE c.id = enqueue.campaign_id) THEN
        RAISE EXCEPTION 'herald.enqueue: no campaign with id %', enqueue.campaign_id USING ERRCODE = 'foreign_key_violation';
    END IF;
    IF enqueue.dedupe_for IS NOT NULL THEN
        PERFORM herald._check_period('herald.enqueue', 'dedupe_for', enqueue.dedupe_for);
        IF enqueue.dedupe_key IS NULL OR enqueue.dedupe_key = '' THEN
            RAISE EXCEPTION 'herald.enqueue: dedupe_for % needs a dedupe_key', enqueue.dedupe_for
                USING ERRCODE = 'invalid_parameter_value', HINT = 'Pass dedupe_key => ''your-key'' with dedupe_for.';
        END IF;
        -- Take the key for this period, or find that a job enqueued within it holds it. Another
        -- call holding the row uncommitted makes this one wait for its outcome.
        INSERT INTO herald.dedupe_keys AS d (key, job_id, created_at, expires_at)
        VALUES (enqueue.dedupe_key, NULL, now(), now() + enqueue.dedupe_for)
        ON CONFLICT (key) DO UPDATE SET job_id = NULL, created_at = excluded.created_at, expires_at = excluded.expires_at
            WHERE d.created_at <= now() - enqueue.dedupe_for
        RETURNING true INTO held;
        IF held IS NULL THEN
            SELECT d.job_id INTO new_id FROM herald.dedupe_keys d WHERE d.key = enqueue.dedupe_key;
            RETURN new_id;
        END IF;
    ELSIF enqueue.dedupe_key IS NOT NULL THEN
        SELECT d.job_id INTO new_id FROM herald.dedupe_keys d
        WHERE d.key = enqueue.dedupe_key AND d.expires_at > now() AND d.job_id IS NOT NULL;
        IF new_id IS NOT NULL THEN
            RETURN new_id;
        END IF;
    END IF;
    -- Insert, or find the pending job holding the key; if that one finishes in between, insert again.
    LOOP
        INSERT INTO herald.jobs (message, run_at, queue, priority, max_attempts, dedupe_key, validate_only, campaign_id, project)
        VALUES (enqueue.message, coalesce(enqueue.run_at, now()), coalesce(enqueue.queue, 'default'),
                coalesce(enqueue.priority, 0), coalesce(enqueue.max_attempts, 25), enqueue.dedupe_key,
                coalesce(enqueue.validate_only, false), enqueue.campaign_id, enqueue.project)
        ON CONFLICT (dedupe_key) WHERE dedupe_key IS NOT NULL AND state IN ('scheduled', 'available', 'running') DO NOTHING
        RETURNING id INTO new_id;
        EXIT WHEN new_id IS NOT NULL;
        SELECT j.id INTO new_id FROM herald.jobs j
        WHERE j.dedupe_key = enqueue.dedupe_key AND j.state IN ('scheduled', 'available', 'running');
        EXIT WHEN new_id IS NOT NULL;
    END LOOP;
    IF enqueue.dedupe_for IS NOT NULL THEN
        UPDATE herald.dedupe_keys d SET job_id = new_id WHERE d.key = enqueue.dedupe_key;
    END IF;
    RETURN new_id;
END $$;
