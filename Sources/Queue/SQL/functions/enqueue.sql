-- enqueue: callable from any transaction or trigger. A dedupe_key that is already pending
-- (scheduled, available or running) returns the existing job's id instead of adding a second one.
-- validate_only: FCM validates the message and delivers nothing (a dry run). campaign_id: the job
-- belongs to that campaign (herald.create_campaign).
CREATE OR REPLACE FUNCTION herald.enqueue(message jsonb, run_at timestamptz DEFAULT now(),
                               queue text DEFAULT 'default', priority integer DEFAULT 0,
                               max_attempts integer DEFAULT 25, dedupe_key text DEFAULT NULL,
                               validate_only boolean DEFAULT false, campaign_id bigint DEFAULT NULL)
RETURNS bigint LANGUAGE plpgsql SET search_path = pg_catalog AS $$
#variable_conflict use_column
DECLARE
    new_id bigint;
BEGIN
    IF enqueue.message IS NULL THEN
        RAISE EXCEPTION 'herald.enqueue: message must not be null';
    END IF;
    IF enqueue.campaign_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM herald.campaigns c WHERE c.id = enqueue.campaign_id) THEN
        RAISE EXCEPTION 'herald.enqueue: no campaign with id %', enqueue.campaign_id USING ERRCODE = 'foreign_key_violation';
    END IF;
    -- Insert, or find the pending job holding the key; if that one finishes in between, insert again.
    LOOP
        INSERT INTO herald.jobs (message, run_at, queue, priority, max_attempts, dedupe_key, validate_only, campaign_id)
        VALUES (enqueue.message, coalesce(enqueue.run_at, now()), coalesce(enqueue.queue, 'default'),
                coalesce(enqueue.priority, 0), coalesce(enqueue.max_attempts, 25), enqueue.dedupe_key,
                coalesce(enqueue.validate_only, false), enqueue.campaign_id)
        ON CONFLICT (dedupe_key) WHERE dedupe_key IS NOT NULL AND state IN ('scheduled', 'available', 'running') DO NOTHING
        RETURNING id INTO new_id;
        EXIT WHEN new_id IS NOT NULL;
        SELECT j.id INTO new_id FROM herald.jobs j
        WHERE j.dedupe_key = enqueue.dedupe_key AND j.state IN ('scheduled', 'available', 'running');
        EXIT WHEN new_id IS NOT NULL;
    END LOOP;
    RETURN new_id;
END $$;
