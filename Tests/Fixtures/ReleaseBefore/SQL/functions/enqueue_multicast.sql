-- enqueue_multicast: one message (without a target) to up to 500 registration tokens. Each token
-- becomes a job of its own (retried, pruned and dead-lettered as any send); the returned id
-- reads the outcomes with herald.multicast_result. Refused, with nothing enqueued: a null or
-- non-object message, a message that names its own target, an empty or null token list, more
-- than 500 tokens, an empty or null token, and a message herald.validate_message refuses. A
-- dedupe_key held by a multicast that still has pending jobs returns that multicast's id.
-- project: the registry name of the Firebase project every job is sent for (NULL: the pool's own
-- credentials); a name not in the registry is refused.
CREATE OR REPLACE FUNCTION herald.enqueue_multicast(message jsonb, tokens text[], run_at timestamptz DEFAULT now(),
                                         queue text DEFAULT 'default', priority integer DEFAULT 0,
                                         max_attempts integer DEFAULT 25, dedupe_key text DEFAULT NULL,
                                         validate_only boolean DEFAULT false, campaign_id bigint DEFAULT NULL,
                                         project text DEFAULT NULL)
RETURNS bigint LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    n integer := coalesce(cardinality(enqueue_multicast.tokens), 0);
    target text;
    bad integer;
    issues text[];
    existing bigint;
    ids bigint[];
    new_id bigint;
BEGIN
    IF enqueue_multicast.message IS NULL OR jsonb_typeof(enqueue_multicast.message) <> 'object' THEN
        RAISE EXCEPTION 'herald.enqueue_multicast: message must be a JSON object (a v1 message without its target), not %',
            coalesce(jsonb_typeof(enqueue_multicast.message), 'null') USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT t INTO target FROM unnest(ARRAY['token', 'topic', 'condition', 'fid']) AS t
    WHERE enqueue_multicast.message ? t LIMIT 1;
    IF target IS NOT NULL THEN
        RAISE EXCEPTION 'herald.enqueue_multicast: message.% is set; a multicast message has no target of its own, the tokens are the targets', target
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF n = 0 THEN
        RAISE EXCEPTION 'herald.enqueue_multicast: tokens is empty; give 1 to % registration tokens', herald.multicast_max_tokens()
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF n > herald.multicast_max_tokens() THEN
        RAISE EXCEPTION 'herald.enqueue_multicast: % tokens; a multicast takes at most % tokens, split the list into several calls',
            n, herald.multicast_max_tokens() USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT o INTO bad FROM unnest(enqueue_multicast.tokens) WITH ORDINALITY AS u(t, o) WHERE t IS NULL OR t = '' ORDER BY o LIMIT 1;
    IF bad IS NOT NULL THEN
        RAISE EXCEPTION 'herald.enqueue_multicast: tokens[%] is empty or null; every token must be a registration token', bad
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF enqueue_multicast.campaign_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM herald.campaigns c WHERE c.id = enqueue_multicast.campaign_id) THEN
        RAISE EXCEPTION 'herald.enqueue_multicast: no campaign with id %', enqueue_multicast.campaign_id USING ERRCODE = 'foreign_key_violation';
    END IF;
    -- The jobs differ only in their token: checking the first one checks them all.
    issues := herald.validate_message(enqueue_multicast.message || jsonb_build_object('token', enqueue_multicast.tokens[1]));
    IF cardinality(issues) > 0 THEN
        RAISE EXCEPTION 'herald.enqueue_multicast: %', array_to_string(issues, '; ') USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF enqueue_multicast.dedupe_key IS NOT NULL THEN
        PERFORM pg_advisory_xact_lock(hashtextextended('herald.multicast:' || enqueue_multicast.dedupe_key, 0));
        SELECT m.id INTO existing FROM herald.multicasts m
        WHERE m.dedupe_key = enqueue_multicast.dedupe_key
          AND EXISTS (SELECT 1 FROM herald.jobs j WHERE j.id = ANY (m.job_ids) AND j.state IN ('scheduled', 'available', 'running'))
        ORDER BY m.id DESC LIMIT 1;
        IF existing IS NOT NULL THEN
            RETURN existing;
        END IF;
    END IF;
    ids := ARRAY(SELECT nextval(pg_get_serial_sequence('herald.jobs', 'id')) FROM generate_series(1, n));
    INSERT INTO herald.jobs (id, message, run_at, queue, priority, max_attempts, validate_only, campaign_id, project)
    SELECT ids[u.o], enqueue_multicast.message || jsonb_build_object('token', u.t),
           coalesce(enqueue_multicast.run_at, now()), coalesce(enqueue_multicast.queue, 'default'),
           coalesce(enqueue_multicast.priority, 0), coalesce(enqueue_multicast.max_attempts, 25),
           coalesce(enqueue_multicast.validate_only, false), enqueue_multicast.campaign_id, enqueue_multicast.project
    FROM unnest(enqueue_multicast.tokens) WITH ORDINALITY AS u(t, o)
    ORDER BY u.o;
    INSERT INTO herald.multicasts (job_ids, tokens, dedupe_key)
    VALUES (ids, enqueue_multicast.tokens, enqueue_multicast.dedupe_key)
    RETURNING id INTO new_id;
    -- Results are read within the worker's --retention; the record outlives it only for a while.
    DELETE FROM herald.multicasts m WHERE m.created_at < now() - interval '7 days';
    RETURN new_id;
END
$fn$;
