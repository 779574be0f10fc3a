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

-- ---------------------------------------------------------------------------------------------
-- Durable topic subscriptions

-- One row per (project, topic, token) Herald was asked about. project '' means the project of
-- whichever pool carries the row out (its service account's). state: pending (to subscribe),
-- subscribed (done), removing (to unsubscribe), failed (FCM refused this token: error says why).
-- An unsubscribed token has no row. generation changes with every new wish, so an answer to an
-- older request never overwrites a newer wish.
CREATE TABLE herald.topic_subscriptions (
    project      text        NOT NULL DEFAULT '',
    topic        text        NOT NULL,
    token        text        NOT NULL,
    state        text        NOT NULL CHECK (state IN ('pending', 'subscribed', 'removing', 'failed')),
    error        text,
    attempts     integer     NOT NULL DEFAULT 0,
    generation   bigint      NOT NULL DEFAULT 1,
    run_at       timestamptz NOT NULL DEFAULT now(),
    locked_until timestamptz,
    locked_by    text,
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (project, topic, token)
);
CREATE INDEX topic_subscriptions_due ON herald.topic_subscriptions (run_at) WHERE state IN ('pending', 'removing');
CREATE INDEX topic_subscriptions_token ON herald.topic_subscriptions (token);

-- The most tokens one subscribe / unsubscribe call takes (as the Admin SDKs allow), which is also
-- the most one batchAdd / batchRemove request carries.
CREATE FUNCTION herald.topic_max_tokens() RETURNS integer LANGUAGE sql IMMUTABLE AS $fn$ SELECT 1000 $fn$;

-- Refuses a topic name or token list FCM would refuse, naming the value.
CREATE FUNCTION herald._check_topic_call(fn text, topic text, tokens text[]) RETURNS void
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog
AS $fn$
DECLARE
    n integer := coalesce(cardinality(tokens), 0);
    bad integer;
BEGIN
    IF topic IS NULL OR topic = '' THEN
        RAISE EXCEPTION 'herald.%: topic is empty; give a topic name such as ''news''', fn USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF topic LIKE '/topics/%' THEN
        RAISE EXCEPTION 'herald.%: topic "%" starts with "/topics/"; give the topic name alone', fn, topic
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF topic !~ '^[a-zA-Z0-9_.~%-]+$' THEN
        RAISE EXCEPTION 'herald.%: topic "%" has a character outside [a-zA-Z0-9-_.~%%]', fn, left(topic, 100)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF length(topic) > 900 THEN
        RAISE EXCEPTION 'herald.%: topic "%..." is % characters long; FCM takes at most 900', fn, left(topic, 40), length(topic)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF n = 0 THEN
        RAISE EXCEPTION 'herald.%: tokens is empty; give 1 to % registration tokens', fn, herald.topic_max_tokens()
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF n > herald.topic_max_tokens() THEN
        RAISE EXCEPTION 'herald.%: % tokens; at most % tokens per call, split the list into several calls', fn, n, herald.topic_max_tokens()
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT o INTO bad FROM unnest(tokens) WITH ORDINALITY AS u(t, o) WHERE t IS NULL OR t = '' ORDER BY o LIMIT 1;
    IF bad IS NOT NULL THEN
        RAISE EXCEPTION 'herald.%: tokens[%] is empty or null; every token must be a registration token', fn, bad
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
END
$fn$;

-- subscribe: the tokens should be subscribed to the topic. Recorded in the caller's transaction
-- (nothing happens if it rolls back); the pool carries it out with batchAdd. A token already
-- subscribed stays so; a token pruned as UNREGISTERED is recorded failed without a request.
-- Returns how many tokens now wait for a request.
CREATE FUNCTION herald.subscribe(topic text, tokens text[], project text DEFAULT NULL)
RETURNS integer LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    changed integer;
BEGIN
    PERFORM herald._check_topic_call('subscribe', subscribe.topic, subscribe.tokens);
    WITH wanted AS (
        SELECT DISTINCT u.t AS token, p.token IS NOT NULL AS pruned
        FROM unnest(subscribe.tokens) AS u(t)
        LEFT JOIN herald.pruned_tokens p ON p.token = u.t
    ), upserted AS (
        INSERT INTO herald.topic_subscriptions AS s (project, topic, token, state, error)
        SELECT coalesce(subscribe.project, ''), subscribe.topic, w.token,
               CASE WHEN w.pruned THEN 'failed' ELSE 'pending' END,
               CASE WHEN w.pruned THEN 'UNREGISTERED: the token was pruned earlier (FCM reported it unregistered); not subscribed' END
        FROM wanted w
        ON CONFLICT ON CONSTRAINT topic_subscriptions_pkey DO UPDATE
        SET state = excluded.state, error = excluded.error, attempts = 0, run_at = now(), updated_at = now(),
            generation = s.generation + 1
        WHERE s.state IN ('removing', 'failed')
        RETURNING s.state
    )
    SELECT count(*) FILTER (WHERE state = 'pending') INTO changed FROM upserted;
    RETURN changed;
END
$fn$;

-- unsubscribe: the tokens should leave the topic; the pool carries it out with batchRemove (also
-- for tokens Herald never subscribed: an app may have subscribed them itself). Returns how many
-- tokens now wait for a request.
CREATE FUNCTION herald.unsubscribe(topic text, tokens text[], project text DEFAULT NULL)
RETURNS integer LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    changed integer;
BEGIN
    PERFORM herald._check_topic_call('unsubscribe', unsubscribe.topic, unsubscribe.tokens);
    WITH upserted AS (
        INSERT INTO herald.topic_subscriptions AS s (project, topic, token, state)
        SELECT DISTINCT coalesce(unsubscribe.project, ''), unsubscribe.topic, u.t, 'removing'
        FROM unnest(unsubscribe.tokens) AS u(t)
        ON CONFLICT ON CONSTRAINT topic_subscriptions_pkey DO UPDATE
        SET state = 'removing', error = NULL, attempts = 0, run_at = now(), updated_at = now(), generation = s.generation + 1
        WHERE s.state <> 'removing'
        RETURNING s.state
    )
    SELECT count(*) INTO changed FROM upserted;
    RETURN changed;
END
$fn$;

-- The pool's claim: up to p_limit due rows of p_project (or of no project), leased to p_worker.
CREATE FUNCTION herald.claim_topic_work(p_project text, p_worker text, p_limit integer, p_lease_seconds double precision)
RETURNS TABLE (project text, topic text, token text, state text, generation bigint, attempts integer)
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
AS $fn$
    WITH picked AS (
        SELECT s.project, s.topic, s.token FROM herald.topic_subscriptions s
        WHERE s.state IN ('pending', 'removing') AND s.run_at <= now()
          AND (s.locked_until IS NULL OR s.locked_until < now())
          AND s.project IN ('', p_project)
        ORDER BY s.run_at, s.topic, s.token
        LIMIT p_limit
        FOR UPDATE SKIP LOCKED
    )
    UPDATE herald.topic_subscriptions s
    SET locked_until = now() + make_interval(secs => p_lease_seconds), locked_by = p_worker, attempts = s.attempts + 1
    FROM picked
    WHERE s.project = picked.project AND s.topic = picked.topic AND s.token = picked.token
    RETURNING s.project, s.topic, s.token, s.state, s.generation, s.attempts
$fn$;

-- The pool's record of answers: one element per token, {"project", "topic", "token",
-- "generation", "outcome": "done" | "failed" | "retry", "error", "delay" (seconds, for retry)}.
-- A row whose wish changed since the claim (another generation) is only released; a retry
-- without an error (a claim handed back unasked) keeps the last one.
CREATE FUNCTION herald.record_topic_results(p_results jsonb) RETURNS void
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
AS $fn$
    WITH r AS (
        SELECT x ->> 'project' AS project, x ->> 'topic' AS topic, x ->> 'token' AS token,
               (x ->> 'generation')::bigint AS generation, x ->> 'outcome' AS outcome, x ->> 'error' AS error,
               coalesce((x ->> 'delay')::double precision, 0) AS delay
        FROM jsonb_array_elements(p_results) AS x
    ), removed AS (
        DELETE FROM herald.topic_subscriptions s USING r
        WHERE s.project = r.project AND s.topic = r.topic AND s.token = r.token
          AND s.generation = r.generation AND s.state = 'removing' AND r.outcome = 'done'
        RETURNING s.project, s.topic, s.token
    )
    UPDATE herald.topic_subscriptions s
    SET state = CASE WHEN s.generation <> r.generation THEN s.state
                     WHEN r.outcome = 'done' THEN 'subscribed'
                     WHEN r.outcome = 'failed' THEN 'failed'
                     ELSE s.state END,
        error = CASE WHEN s.generation <> r.generation THEN s.error
                     WHEN r.outcome = 'done' THEN NULL
                     ELSE coalesce(r.error, s.error) END,
        run_at = CASE WHEN s.generation = r.generation AND r.outcome = 'retry' THEN now() + make_interval(secs => r.delay)
                      ELSE s.run_at END,
        updated_at = CASE WHEN s.generation = r.generation THEN now() ELSE s.updated_at END,
        locked_until = NULL, locked_by = NULL
    FROM r
    WHERE s.project = r.project AND s.topic = r.topic AND s.token = r.token
      AND NOT EXISTS (SELECT 1 FROM removed d WHERE d.project = r.project AND d.topic = r.topic AND d.token = r.token)
$fn$;

-- A token FCM reported unregistered leaves every topic (FCM drops its subscriptions itself).
CREATE FUNCTION herald._pruned_token_leaves_topics() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    DELETE FROM herald.topic_subscriptions s WHERE s.token = NEW.token;
    RETURN NULL;
END
$fn$;
CREATE TRIGGER pruned_tokens_leave_topics AFTER INSERT OR UPDATE OF token ON herald.pruned_tokens
    FOR EACH ROW EXECUTE FUNCTION herald._pruned_token_leaves_topics();

-- Per topic: subscribers and the tokens still waiting or refused (herald topics list).
CREATE VIEW herald.topic_stats AS
SELECT project, topic,
       count(*) FILTER (WHERE state = 'subscribed') AS subscribed,
       count(*) FILTER (WHERE state = 'pending') AS pending,
       count(*) FILTER (WHERE state = 'removing') AS removing,
       count(*) FILTER (WHERE state = 'failed') AS failed,
       max(updated_at) AS updated_at
FROM herald.topic_subscriptions
GROUP BY project, topic;
