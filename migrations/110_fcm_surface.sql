-- Herald: the FCM surface as the Admin SDKs present it.
--
-- * android_v2 (FCM's AndroidConfigV2, mutually exclusive with android) is a v1-only key: a row
--   holding it is never taken for a legacy payload (herald.is_legacy and the jobs_legacy
--   trigger's WHEN are restated with it). Its validation rules live in the rule file, like every
--   other field's.
-- * v1 multicast: herald.enqueue_multicast(message, tokens, ...) makes one job per token and
--   returns a multicast id; herald.multicast_result(id) answers in the shape of the Admin SDKs'
--   BatchResponse, one entry per token in order.
-- * Durable topic subscriptions: herald.subscribe / herald.unsubscribe record the wish in
--   herald.topic_subscriptions inside the caller's transaction; the pool carries it out with
--   Instance ID batchAdd / batchRemove.

-- LEGACY.md 4.1's detection rule, with android_v2 among the keys only v1 has.
CREATE OR REPLACE FUNCTION herald.is_legacy(message jsonb) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $fn$
    SELECT jsonb_typeof(message) = 'object'
       AND NOT message ?| ARRAY['token', 'topic', 'fid', 'message', 'android', 'android_v2', 'apns', 'webpush', 'fcm_options']
       AND (message ?| ARRAY['to', 'registration_ids', 'notification_key', 'priority', 'time_to_live', 'collapse_key',
                             'content_available', 'mutable_content', 'restricted_package_name', 'dry_run']
            OR (jsonb_typeof(message -> 'notification') = 'object'
                AND EXISTS (SELECT 1 FROM jsonb_object_keys(message -> 'notification') AS k
                            WHERE k NOT IN ('title', 'body', 'image'))))
$fn$;

DROP TRIGGER jobs_legacy ON herald.jobs;
CREATE TRIGGER jobs_legacy BEFORE INSERT ON herald.jobs
    FOR EACH ROW
    WHEN (NEW.kind = 'send'
          AND NOT NEW.message ?| ARRAY['token', 'topic', 'fid', 'android', 'android_v2', 'apns', 'webpush']
          AND NEW.message ?| ARRAY['to', 'registration_ids', 'notification_key', 'priority', 'time_to_live', 'collapse_key',
                                   'content_available', 'mutable_content', 'restricted_package_name', 'dry_run', 'notification'])
    EXECUTE FUNCTION herald._legacy_row();

-- ---------------------------------------------------------------------------------------------
-- v1 multicast

-- One row per herald.enqueue_multicast call: its jobs, in token order.
CREATE TABLE herald.multicasts (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_ids    bigint[] NOT NULL,
    tokens     text[] NOT NULL,
    dedupe_key text,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX multicasts_dedupe ON herald.multicasts (dedupe_key) WHERE dedupe_key IS NOT NULL;
CREATE INDEX multicasts_created ON herald.multicasts (created_at);

-- The most tokens one call takes, as the Admin SDKs' send_each_for_multicast enforces.
CREATE FUNCTION herald.multicast_max_tokens() RETURNS integer LANGUAGE sql IMMUTABLE AS $fn$ SELECT 500 $fn$;

-- enqueue_multicast: one message (without a target) to up to 500 registration tokens. Each token
-- becomes a job of its own (retried, pruned and dead-lettered as any send); the returned id
-- reads the outcomes with herald.multicast_result. Refused, with nothing enqueued: a null or
-- non-object message, a message that names its own target, an empty or null token list, more
-- than 500 tokens, an empty or null token, and a message herald.validate_message refuses. A
-- dedupe_key held by a multicast that still has pending jobs returns that multicast's id.
CREATE FUNCTION herald.enqueue_multicast(message jsonb, tokens text[], run_at timestamptz DEFAULT now(),
                                         queue text DEFAULT 'default', priority integer DEFAULT 0,
                                         max_attempts integer DEFAULT 25, dedupe_key text DEFAULT NULL,
                                         validate_only boolean DEFAULT false, campaign_id bigint DEFAULT NULL)
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
    INSERT INTO herald.jobs (id, message, run_at, queue, priority, max_attempts, validate_only, campaign_id)
    SELECT ids[u.o], enqueue_multicast.message || jsonb_build_object('token', u.t),
           coalesce(enqueue_multicast.run_at, now()), coalesce(enqueue_multicast.queue, 'default'),
           coalesce(enqueue_multicast.priority, 0), coalesce(enqueue_multicast.max_attempts, 25),
           coalesce(enqueue_multicast.validate_only, false), enqueue_multicast.campaign_id
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

-- A v1 error code and message from a reason the worker recorded: "CODE: message", "gave up after
-- N attempts (max_attempts); last error: CODE: message", a validation issue ("message.x: ..."),
-- or a discard for a token pruned earlier.
CREATE FUNCTION herald._v1_error(reason text) RETURNS jsonb
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog
AS $fn$
    SELECT CASE
        WHEN reason IS NULL THEN jsonb_build_object('code', 'UNKNOWN', 'message', 'no reason was recorded')
        WHEN reason ~ '^message[.:\[]' THEN jsonb_build_object('code', 'INVALID_ARGUMENT', 'message', reason)
        WHEN reason LIKE '%was pruned earlier%' THEN jsonb_build_object('code', 'UNREGISTERED', 'message', reason)
        ELSE (SELECT jsonb_build_object('code', CASE WHEN last ~ '^[A-Z][A-Z0-9_]*:' THEN split_part(last, ':', 1) ELSE 'UNKNOWN' END,
                                        'message', reason)
              FROM (SELECT coalesce(substring(reason FROM 'last error: (.*)$'), reason) AS last) AS l)
    END
$fn$;

-- multicast_result: the outcome of each token of a multicast, in token order, in the shape of the
-- Admin SDKs' BatchResponse: {"success_count", "failure_count", "responses": [...]}, each entry
-- {"success": true, "message_id": "projects/p/messages/1"}, {"success": false, "error": {"code":
-- "UNREGISTERED", "message": "..."}}, or {"pending": true} while its job is not final (counted
-- in neither count). A job cancelled by hand reads {"success": false, "error": {"code": "CANCELLED"}}.
CREATE FUNCTION herald.multicast_result(multicast_id bigint) RETURNS jsonb
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    m herald.multicasts;
    responses jsonb := '[]';
    item jsonb;
    successes integer := 0;
    failures integer := 0;
    x record;
    job record;
    dead record;
BEGIN
    SELECT * INTO m FROM herald.multicasts c WHERE c.id = multicast_result.multicast_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'herald.multicast_result: no multicast with id %', multicast_result.multicast_id
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Give the id herald.enqueue_multicast returned; multicasts are forgotten 7 days after they were made.';
    END IF;
    FOR x IN SELECT u.id, u.o FROM unnest(m.job_ids) WITH ORDINALITY AS u(id, o) ORDER BY u.o LOOP
        SELECT j.state, j.fcm_message_name, j.last_error INTO job FROM herald.jobs j WHERE j.id = x.id;
        IF FOUND THEN
            IF job.state = 'completed' THEN
                item := jsonb_build_object('success', true, 'message_id', job.fcm_message_name);
            ELSIF job.state = 'discarded' THEN
                item := jsonb_build_object('success', false, 'error', herald._v1_error(job.last_error));
            ELSIF job.state = 'cancelled' THEN
                item := jsonb_build_object('success', false,
                                           'error', jsonb_build_object('code', 'CANCELLED', 'message', coalesce(job.last_error, 'cancelled before it was sent')));
            ELSE
                item := '{"pending": true}';
            END IF;
        ELSE
            SELECT d.reason INTO dead FROM herald.dead_letters d WHERE d.job_id = x.id ORDER BY d.dead_at DESC, d.id DESC LIMIT 1;
            IF NOT FOUND THEN
                RAISE EXCEPTION 'herald.multicast_result: job % of multicast % is neither in herald.jobs nor in herald.dead_letters', x.id, m.id
                    USING ERRCODE = 'invalid_parameter_value',
                          HINT = 'Finished jobs are deleted after the worker''s --retention (24h by default); read results before then.';
            END IF;
            item := jsonb_build_object('success', false, 'error', herald._v1_error(dead.reason));
        END IF;
        IF item ? 'success' THEN
            IF (item ->> 'success')::boolean THEN successes := successes + 1; ELSE failures := failures + 1; END IF;
        END IF;
        responses := responses || jsonb_build_array(item);
    END LOOP;
    RETURN jsonb_build_object('success_count', successes, 'failure_count', failures, 'responses', responses);
END
$fn$;
