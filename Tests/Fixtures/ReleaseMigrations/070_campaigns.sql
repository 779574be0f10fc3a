-- Herald: campaigns, steerable queues, rate limits shared by every pool, and fair claiming.
--
-- * herald.campaigns: a named batch of jobs (herald.jobs.campaign_id) with a state, an optional
--   rate (max_per_second), an analytics label put on its messages, and max_errors, after which it
--   pauses itself. Its counts are kept as its jobs are inserted and recorded, so reading the
--   progress of a campaign of a million jobs costs a few index lookups, not a count.
-- * herald.queues: per queue, paused, max_per_second and max_in_flight. A queue without a row
--   has no limits.
-- * herald.project_rates: the FCM project's rate (herald work --max-rate), shared by every pool.
-- * herald.claim_jobs: the claim. It takes the due jobs of every (queue, campaign) pair in turn,
--   so a backlog in one never delays another, and spends the token buckets of the project, the
--   queues and the campaigns it claims for, under row locks: the limits hold across processes
--   and hosts with no other server. When a limit held it back, it returns one extra row without
--   a job that says in how many seconds to come back.

CREATE TABLE herald.campaigns (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name            text NOT NULL,
    state           text NOT NULL DEFAULT 'scheduled'
                    CHECK (state IN ('scheduled', 'running', 'paused', 'cancelled', 'finished')),
    max_per_second  double precision CHECK (max_per_second > 0),
    analytics_label text CHECK (analytics_label ~ '^[-a-zA-Z0-9_.~%]{1,50}$'),
    max_errors      integer NOT NULL DEFAULT 1000 CHECK (max_errors > 0),
    paused_reason   text,
    created_at      timestamptz NOT NULL DEFAULT now(),
    started_at      timestamptz,
    finished_at     timestamptz,
    -- Kept by Herald: every job of the campaign is in exactly one of completed, dead, discarded
    -- (pruned included), cancelled, or still pending or running.
    total           bigint NOT NULL DEFAULT 0,
    completed       bigint NOT NULL DEFAULT 0,
    dead            bigint NOT NULL DEFAULT 0,
    discarded       bigint NOT NULL DEFAULT 0,
    cancelled       bigint NOT NULL DEFAULT 0,
    -- Dead letters since the campaign was last resumed (what max_errors is compared with).
    errors          bigint NOT NULL DEFAULT 0,
    -- The rate limit's token bucket.
    tokens          double precision NOT NULL DEFAULT 0,
    refilled_at     timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT campaigns_name_key UNIQUE (name)
);

CREATE TABLE herald.queues (
    name           text PRIMARY KEY,
    paused         boolean NOT NULL DEFAULT false,
    max_per_second double precision CHECK (max_per_second > 0),
    max_in_flight  integer CHECK (max_in_flight > 0),
    tokens         double precision NOT NULL DEFAULT 0,
    refilled_at    timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE herald.project_rates (
    project_id     text PRIMARY KEY,
    max_per_second double precision NOT NULL CHECK (max_per_second > 0),
    tokens         double precision NOT NULL,
    refilled_at    timestamptz NOT NULL
);

ALTER TABLE herald.jobs ADD COLUMN campaign_id bigint
    CONSTRAINT jobs_campaign_id_fkey REFERENCES herald.campaigns (id);
ALTER TABLE herald.dead_letters ADD COLUMN campaign_id bigint;

-- The claim walks one (queue, campaign) pair at a time, in priority order within it.
CREATE INDEX jobs_claim_unit ON herald.jobs (queue, (coalesce(campaign_id, 0)), priority, run_at, id)
    WHERE state = 'available';
DROP INDEX herald.jobs_claim;
-- A campaign's jobs not yet finished (running counts, cancel, finish), and its recent deliveries.
CREATE INDEX jobs_campaign_pending ON herald.jobs (campaign_id, state)
    WHERE campaign_id IS NOT NULL AND state IN ('scheduled', 'available', 'running');
CREATE INDEX jobs_campaign_sent ON herald.jobs (campaign_id, finished_at)
    WHERE campaign_id IS NOT NULL AND state = 'completed';
CREATE INDEX dead_letters_campaign ON herald.dead_letters (campaign_id) WHERE campaign_id IS NOT NULL;

-- How many tokens a bucket holds at most: a tenth of a second's worth (at least one), so a
-- limit is spread over the second instead of spent at its start.
CREATE FUNCTION herald._burst(rate double precision) RETURNS double precision
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT greatest(1.0, rate / 10) $$;

-- A bucket's tokens at `at`: what it held, plus what the rate added since, up to the burst.
CREATE FUNCTION herald._refill(tokens double precision, rate double precision, refilled_at timestamptz, at timestamptz)
RETURNS double precision LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT least(herald._burst(rate), tokens + greatest(0, extract(epoch FROM at - refilled_at)) * rate) $$;

-- How long until a bucket holding `tokens` has enough for the next claim: half its burst (at
-- least one token, at most what the claim wants).
CREATE FUNCTION herald._wait(tokens double precision, rate double precision, wanted integer) RETURNS double precision
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT greatest(0.001, (greatest(1.0, least(herald._burst(rate) / 2, wanted)) - tokens) / rate) $$;

-- Counts the jobs a statement added to each campaign; refuses jobs for a cancelled campaign.
CREATE FUNCTION herald._count_campaign_jobs() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog AS $$
DECLARE
    refused text;
BEGIN
    SELECT c.name INTO refused
    FROM herald.campaigns c WHERE c.state = 'cancelled' AND c.id IN (SELECT i.campaign_id FROM inserted i)
    LIMIT 1;
    IF refused IS NOT NULL THEN
        RAISE EXCEPTION 'herald.jobs: campaign % is cancelled; create a new campaign for these jobs', refused
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    UPDATE herald.campaigns c
    SET total = c.total + n.count,
        state = CASE WHEN c.state = 'finished' THEN 'running' ELSE c.state END,
        finished_at = CASE WHEN c.state = 'finished' THEN NULL ELSE c.finished_at END
    FROM (SELECT i.campaign_id, count(*) AS count FROM inserted i WHERE i.campaign_id IS NOT NULL GROUP BY i.campaign_id) n
    WHERE c.id = n.campaign_id;
    RETURN NULL;
END $$;

CREATE TRIGGER jobs_campaign_totals AFTER INSERT ON herald.jobs
    REFERENCING NEW TABLE AS inserted
    FOR EACH STATEMENT EXECUTE FUNCTION herald._count_campaign_jobs();

-- create_campaign: a new campaign in state 'scheduled'; it runs when its first job is claimed.
CREATE FUNCTION herald.create_campaign(name text, max_per_second double precision DEFAULT NULL,
                                       analytics_label text DEFAULT NULL, max_errors integer DEFAULT 1000)
RETURNS bigint LANGUAGE plpgsql SET search_path = pg_catalog AS $$
DECLARE
    new_id bigint;
BEGIN
    IF create_campaign.name IS NULL OR btrim(create_campaign.name) = '' THEN
        RAISE EXCEPTION 'herald.create_campaign: name must not be empty' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF create_campaign.max_per_second IS NOT NULL AND NOT create_campaign.max_per_second > 0 THEN
        RAISE EXCEPTION 'herald.create_campaign: max_per_second must be more than 0 (or null for no limit), not %', create_campaign.max_per_second
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF create_campaign.analytics_label IS NOT NULL AND create_campaign.analytics_label !~ '^[-a-zA-Z0-9_.~%]{1,50}$' THEN
        RAISE EXCEPTION 'herald.create_campaign: analytics_label "%" is not one FCM accepts: 1 to 50 of a-z A-Z 0-9 - _ . ~ %%', create_campaign.analytics_label
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF create_campaign.max_errors IS NULL OR create_campaign.max_errors < 1 THEN
        RAISE EXCEPTION 'herald.create_campaign: max_errors must be at least 1, not %', coalesce(create_campaign.max_errors::text, 'null')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    INSERT INTO herald.campaigns (name, max_per_second, analytics_label, max_errors)
    VALUES (create_campaign.name, create_campaign.max_per_second, create_campaign.analytics_label, create_campaign.max_errors)
    ON CONFLICT ON CONSTRAINT campaigns_name_key DO NOTHING
    RETURNING id INTO new_id;
    IF new_id IS NULL THEN
        RAISE EXCEPTION 'herald.create_campaign: a campaign named "%" exists already (id %)', create_campaign.name,
            (SELECT c.id FROM herald.campaigns c WHERE c.name = create_campaign.name)
            USING ERRCODE = 'unique_violation';
    END IF;
    RETURN new_id;
END $$;

-- The campaign with this id, locked, or an error naming the id.
CREATE FUNCTION herald._campaign(campaign_id bigint, caller text) RETURNS herald.campaigns
LANGUAGE plpgsql SET search_path = pg_catalog AS $$
DECLARE
    found_row herald.campaigns;
BEGIN
    SELECT * INTO found_row FROM herald.campaigns c WHERE c.id = _campaign.campaign_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION '%: no campaign with id %', caller, coalesce(_campaign.campaign_id::text, 'null')
            USING ERRCODE = 'no_data_found';
    END IF;
    RETURN found_row;
END $$;

-- A running campaign whose jobs have all been settled is finished, even before the maintenance
-- leader marks it so: says whether the campaign is finished (pause and cancel then refuse it).
CREATE FUNCTION herald._finish_if_done(c herald.campaigns) RETURNS boolean
LANGUAGE plpgsql SET search_path = pg_catalog AS $$
BEGIN
    IF c.state = 'running' AND NOT EXISTS (
        SELECT 1 FROM herald.jobs j WHERE j.campaign_id = c.id AND j.state IN ('scheduled', 'available', 'running')) THEN
        UPDATE herald.campaigns SET state = 'finished', finished_at = coalesce(finished_at, now()) WHERE id = c.id;
        RETURN true;
    END IF;
    RETURN c.state = 'finished';
END $$;

-- pause_campaign: no job of it is claimed until it is resumed; requests in flight finish.
CREATE FUNCTION herald.pause_campaign(campaign_id bigint) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog AS $$
DECLARE
    c herald.campaigns := herald._campaign(pause_campaign.campaign_id, 'herald.pause_campaign');
BEGIN
    IF herald._finish_if_done(c) THEN
        c.state := 'finished';
    END IF;
    IF c.state IN ('cancelled', 'finished') THEN
        RAISE EXCEPTION 'herald.pause_campaign: campaign % (%) is %; there is nothing left to pause', c.id, c.name, c.state
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    UPDATE herald.campaigns SET state = 'paused', paused_reason = 'paused with herald.pause_campaign'
    WHERE id = c.id AND state <> 'paused';
END $$;

-- resume_campaign: claims go on; max_errors counts dead letters afresh from here.
CREATE FUNCTION herald.resume_campaign(campaign_id bigint) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog AS $$
DECLARE
    c herald.campaigns := herald._campaign(resume_campaign.campaign_id, 'herald.resume_campaign');
BEGIN
    IF c.state = 'cancelled' THEN
        RAISE EXCEPTION 'herald.resume_campaign: campaign % (%) was cancelled and cannot be resumed; create a new one', c.id, c.name
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    UPDATE herald.campaigns
    SET state = CASE WHEN started_at IS NULL THEN 'scheduled' ELSE 'running' END, paused_reason = NULL, errors = 0
    WHERE id = c.id AND state = 'paused';
END $$;

-- cancel_campaign: its jobs not yet claimed become 'cancelled' (returned: how many); requests in
-- flight finish. A cancelled campaign takes no new jobs.
CREATE FUNCTION herald.cancel_campaign(campaign_id bigint) RETURNS integer
LANGUAGE plpgsql SET search_path = pg_catalog AS $$
DECLARE
    c herald.campaigns := herald._campaign(cancel_campaign.campaign_id, 'herald.cancel_campaign');
    n integer;
BEGIN
    IF herald._finish_if_done(c) THEN
        c.state := 'finished';
    END IF;
    IF c.state = 'finished' THEN
        RAISE EXCEPTION 'herald.cancel_campaign: campaign % (%) has finished; there is nothing left to cancel', c.id, c.name
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    UPDATE herald.jobs j SET state = 'cancelled', finished_at = now(), last_error = 'campaign cancelled'
    WHERE j.campaign_id = c.id AND j.state IN ('scheduled', 'available');
    GET DIAGNOSTICS n = ROW_COUNT;
    UPDATE herald.campaigns
    SET state = 'cancelled', cancelled = cancelled + n, paused_reason = NULL,
        finished_at = coalesce(finished_at, now())
    WHERE id = c.id;
    RETURN n;
END $$;

-- campaign_progress: one row per campaign; every job counted exactly once (pruned as discarded).
CREATE VIEW herald.campaign_progress AS
    SELECT c.id AS campaign_id, c.name,
           CASE WHEN c.state IN ('running', 'scheduled') AND c.total > 0 AND live.pending = 0 AND live.running = 0
                THEN 'finished' ELSE c.state END AS state,
           c.total, live.pending, live.running, c.completed, c.dead, c.discarded, c.cancelled,
           recent.sent AS sent_last_minute, c.started_at,
           coalesce(c.finished_at, CASE WHEN c.state IN ('running', 'scheduled') AND c.total > 0 AND live.pending = 0 AND live.running = 0
                                        THEN now() END) AS finished_at,
           CASE WHEN live.pending + live.running > 0 AND recent.sent > 0 AND c.state = 'running'
                THEN now() + make_interval(secs => (live.pending + live.running) * 60.0 / recent.sent) END AS eta
    FROM herald.campaigns c
    CROSS JOIN LATERAL (
        SELECT r.running, greatest(0, c.total - c.completed - c.dead - c.discarded - c.cancelled - r.running) AS pending
        FROM (SELECT count(*) AS running FROM herald.jobs j WHERE j.campaign_id = c.id AND j.state = 'running') r
    ) live
    CROSS JOIN LATERAL (
        SELECT count(*) AS sent FROM herald.jobs j
        WHERE j.campaign_id = c.id AND j.state = 'completed' AND j.finished_at > now() - interval '1 minute'
    ) recent;

-- Queues you can steer. A queue exists once it has jobs, dead letters or settings.
CREATE FUNCTION herald._known_queue(name text, caller text) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog AS $$
BEGIN
    IF _known_queue.name IS NULL OR _known_queue.name = '' THEN
        RAISE EXCEPTION '%: queue name must not be empty', caller USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM herald.queues q WHERE q.name = _known_queue.name)
       AND NOT EXISTS (SELECT 1 FROM herald.jobs j WHERE j.queue = _known_queue.name)
       AND NOT EXISTS (SELECT 1 FROM herald.dead_letters d WHERE d.queue = _known_queue.name) THEN
        RAISE EXCEPTION '%: no queue named "%" (no job, dead letter or settings use that name)', caller, _known_queue.name
            USING ERRCODE = 'no_data_found',
                  HINT = 'herald.set_queue_limits creates the settings of a queue before its first job.';
    END IF;
END $$;

CREATE FUNCTION herald.pause_queue(name text) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog AS $$
BEGIN
    PERFORM herald._known_queue(pause_queue.name, 'herald.pause_queue');
    INSERT INTO herald.queues AS q (name, paused) VALUES (pause_queue.name, true)
    ON CONFLICT ON CONSTRAINT queues_pkey DO UPDATE SET paused = true, updated_at = now();
    PERFORM pg_notify('herald_jobs', '');
END $$;

CREATE FUNCTION herald.resume_queue(name text) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog AS $$
BEGIN
    PERFORM herald._known_queue(resume_queue.name, 'herald.resume_queue');
    UPDATE herald.queues q SET paused = false, updated_at = now() WHERE q.name = resume_queue.name;
    PERFORM pg_notify('herald_jobs', '');
END $$;

-- set_queue_limits: null removes a limit.
CREATE FUNCTION herald.set_queue_limits(name text, max_per_second double precision DEFAULT NULL,
                                        max_in_flight integer DEFAULT NULL)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog AS $$
BEGIN
    IF set_queue_limits.name IS NULL OR set_queue_limits.name = '' THEN
        RAISE EXCEPTION 'herald.set_queue_limits: queue name must not be empty' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF set_queue_limits.max_per_second IS NOT NULL AND NOT set_queue_limits.max_per_second > 0 THEN
        RAISE EXCEPTION 'herald.set_queue_limits: max_per_second must be more than 0 (or null for no limit), not %', set_queue_limits.max_per_second
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF set_queue_limits.max_in_flight IS NOT NULL AND set_queue_limits.max_in_flight < 1 THEN
        RAISE EXCEPTION 'herald.set_queue_limits: max_in_flight must be at least 1 (or null for no limit), not %', set_queue_limits.max_in_flight
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    INSERT INTO herald.queues AS q (name, max_per_second, max_in_flight, tokens, refilled_at)
    VALUES (set_queue_limits.name, set_queue_limits.max_per_second, set_queue_limits.max_in_flight,
            herald._burst(coalesce(set_queue_limits.max_per_second, 1)), now())
    ON CONFLICT ON CONSTRAINT queues_pkey DO UPDATE
    SET max_per_second = excluded.max_per_second, max_in_flight = excluded.max_in_flight, updated_at = now(),
        tokens = least(q.tokens, herald._burst(coalesce(excluded.max_per_second, 1)));
END $$;

-- enqueue gains campaign_id (and keeps every other parameter of migration 051).
DROP FUNCTION herald.enqueue(jsonb, timestamptz, text, integer, integer, text, boolean);
CREATE FUNCTION herald.enqueue(message jsonb, run_at timestamptz DEFAULT now(),
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

-- Legacy multicasts keep their campaign on every fanned-out job.
CREATE OR REPLACE FUNCTION herald._legacy_row() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    translation jsonb;
BEGIN
    IF current_setting('herald.legacy_fanning_out', true) = 'on' OR NOT herald.is_legacy(NEW.message) THEN
        RETURN NEW;
    END IF;
    IF jsonb_typeof(NEW.message -> 'registration_ids') IS DISTINCT FROM 'array'
       OR jsonb_array_length(NEW.message -> 'registration_ids') < 2 THEN
        NEW.validate_only := NEW.validate_only OR coalesce(herald._legacy_flag(NEW.message -> 'dry_run'), false);
        RETURN NEW;
    END IF;
    translation := herald._legacy_translate(NEW.message, floor(extract(epoch FROM now()))::bigint);
    IF translation ? 'error' THEN
        RETURN NEW;
    END IF;
    NEW.validate_only := NEW.validate_only OR (translation ->> 'validate_only')::boolean;
    PERFORM herald._legacy_fan_out(NEW.message, translation, NEW.run_at, NEW.queue, NEW.priority, NEW.max_attempts, NEW.id,
                                   NEW.campaign_id);
    NEW.message := (NEW.message - 'registration_ids')
                   || jsonb_build_object('registration_ids', jsonb_build_array(NEW.message -> 'registration_ids' -> 0));
    RETURN NEW;
END
$fn$;

CREATE FUNCTION herald._legacy_fan_out(payload jsonb, translation jsonb, run_at timestamptz, queue text,
                                       priority integer, max_attempts integer, first_id bigint, campaign_id bigint)
RETURNS bigint[] LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    ids bigint[] := herald._legacy_fan_out(payload, translation, run_at, queue, priority, max_attempts, first_id);
BEGIN
    IF _legacy_fan_out.campaign_id IS NOT NULL THEN
        -- The rows were inserted without it: join them to the campaign and count them there.
        UPDATE herald.jobs j SET campaign_id = _legacy_fan_out.campaign_id
        WHERE j.id = ANY (ids) AND (first_id IS NULL OR j.id <> first_id);
        UPDATE herald.campaigns c SET total = c.total + cardinality(ids) - CASE WHEN first_id IS NULL THEN 0 ELSE 1 END
        WHERE c.id = _legacy_fan_out.campaign_id;
    END IF;
    RETURN ids;
END
$fn$;

DROP FUNCTION herald.enqueue_legacy_form(text, timestamptz, text, integer, integer);
DROP FUNCTION herald.enqueue_legacy(jsonb, timestamptz, text, integer, integer);

CREATE FUNCTION herald.enqueue_legacy(payload jsonb, run_at timestamptz DEFAULT now(), queue text DEFAULT 'default',
                                      priority integer DEFAULT 0, max_attempts integer DEFAULT 25,
                                      campaign_id bigint DEFAULT NULL)
RETURNS bigint[] LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    translation jsonb := herald._legacy_raise(herald._legacy_translate(payload, floor(extract(epoch FROM now()))::bigint));
BEGIN
    IF enqueue_legacy.campaign_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM herald.campaigns c WHERE c.id = enqueue_legacy.campaign_id) THEN
        RAISE EXCEPTION 'herald.enqueue_legacy: no campaign with id %', enqueue_legacy.campaign_id USING ERRCODE = 'foreign_key_violation';
    END IF;
    RETURN herald._legacy_fan_out(payload, translation, run_at, queue, priority, max_attempts, NULL, enqueue_legacy.campaign_id);
END
$fn$;

CREATE FUNCTION herald.enqueue_legacy_form(body text, run_at timestamptz DEFAULT now(), queue text DEFAULT 'default',
                                           priority integer DEFAULT 0, max_attempts integer DEFAULT 25,
                                           campaign_id bigint DEFAULT NULL)
RETURNS bigint[] LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    payload jsonb := herald._legacy_raise(herald._legacy_form_payload(body));
BEGIN
    RETURN herald.enqueue_legacy(payload, run_at, queue, priority, max_attempts, enqueue_legacy_form.campaign_id);
END
$fn$;

-- The claim: see the top of this file. Returns the claimed jobs, and, when a limit held a unit
-- back, one more row with a null id whose wait_seconds says when to try again.
CREATE FUNCTION herald.claim_jobs(p_queues text[], p_limit integer, p_lease double precision, p_worker text,
                                  p_project text DEFAULT NULL, p_project_rate double precision DEFAULT 0)
RETURNS TABLE (id bigint, queue text, kind text, message text, attempt integer, max_attempts integer,
               token_pruned boolean, last_error text, created_at double precision, due_at double precision,
               group_key text, group_members text, validate_only boolean, campaign_id bigint,
               wait_seconds double precision)
LANGUAGE plpgsql SET search_path = pg_catalog AS $fn$
#variable_conflict use_column
DECLARE
    v_now timestamptz := now();
    v_budget integer := p_limit;
    v_project double precision;       -- the project's tokens (null: no project rate)
    v_wait double precision;          -- seconds until a unit held back by a limit may go on
    v_queues text[];
    v_cids bigint[];
    v_more boolean[];
    v_n integer;
    v_share integer;
    v_allow integer;
    v_got integer;
    v_running bigint;
    v_label text;
    v_q herald.queues;
    v_c herald.campaigns;
    v_qt double precision;
    v_ct double precision;
    v_desired integer;
    v_room integer;
    v_locked_queues text[];
    v_locked_campaigns bigint[];
BEGIN
    IF p_project IS NOT NULL THEN
        -- A quota answer holds every worker of the project back (herald.sender_pauses).
        IF EXISTS (SELECT 1 FROM herald.sender_pauses s WHERE s.project_id = p_project AND s.paused_until > v_now) THEN
            RETURN;
        END IF;
        IF p_project_rate > 0 THEN
            INSERT INTO herald.project_rates AS r (project_id, max_per_second, tokens, refilled_at)
            VALUES (p_project, p_project_rate, herald._burst(p_project_rate), v_now)
            ON CONFLICT (project_id) DO UPDATE
            SET tokens = herald._refill(r.tokens, excluded.max_per_second, r.refilled_at, excluded.refilled_at),
                max_per_second = excluded.max_per_second, refilled_at = excluded.refilled_at
            RETURNING r.tokens INTO v_project;
        END IF;
    END IF;

    -- The (queue, campaign) pairs with due jobs: one index probe each (a skip scan).
    WITH RECURSIVE units AS (
        (SELECT j.queue AS q, coalesce(j.campaign_id, 0) AS c FROM herald.jobs j
         WHERE j.state = 'available' ORDER BY j.queue, coalesce(j.campaign_id, 0) LIMIT 1)
        UNION ALL
        SELECT nx.q, nx.c FROM units u CROSS JOIN LATERAL (
            SELECT j.queue AS q, coalesce(j.campaign_id, 0) AS c FROM herald.jobs j
            WHERE j.state = 'available' AND (j.queue, coalesce(j.campaign_id, 0)) > (u.q, u.c)
            ORDER BY j.queue, coalesce(j.campaign_id, 0) LIMIT 1) nx
    )
    SELECT array_agg(u.q ORDER BY u.q, u.c), array_agg(u.c ORDER BY u.q, u.c) INTO v_queues, v_cids
    FROM units u
    WHERE (p_queues IS NULL OR u.q = ANY (p_queues))
      AND NOT EXISTS (SELECT 1 FROM herald.queues qs WHERE qs.name = u.q AND qs.paused)
      AND (u.c = 0 OR EXISTS (SELECT 1 FROM herald.campaigns cs WHERE cs.id = u.c AND cs.state IN ('scheduled', 'running', 'finished')));
    v_n := coalesce(array_length(v_queues, 1), 0);

    IF v_n > 0 THEN
        -- The limited rows whose buckets this claim may spend. SKIP LOCKED: a row another claim
        -- (or an application's open transaction) holds is left for now, never waited for; its
        -- pairs sit this claim out and are tried again shortly.
        SELECT coalesce(array_agg(qs.name), '{}') INTO v_locked_queues FROM (
            SELECT q.name FROM herald.queues q
            WHERE q.name = ANY (v_queues) AND (q.max_per_second IS NOT NULL OR q.max_in_flight IS NOT NULL)
            FOR UPDATE SKIP LOCKED) qs;
        SELECT coalesce(array_agg(cs.id), '{}') INTO v_locked_campaigns FROM (
            SELECT c.id FROM herald.campaigns c WHERE c.id = ANY (v_cids) AND c.max_per_second IS NOT NULL
            FOR UPDATE SKIP LOCKED) cs;
        v_more := array_fill(false, ARRAY[v_n]);
        -- Pass 1: each pair its share of the batch; pass 2: what is left, to pairs that had more.
        FOR pass IN 1..2 LOOP
            EXIT WHEN v_budget <= 0;
            v_share := CASE WHEN pass = 1 THEN greatest(1, ceil(v_budget::numeric / v_n)::integer) ELSE v_budget END;
            FOR i IN 1..v_n LOOP
                EXIT WHEN v_budget <= 0;
                CONTINUE WHEN pass = 2 AND NOT v_more[i];
                v_more[i] := false;
                v_desired := least(v_share, v_budget);
                v_allow := v_desired;
                IF v_project IS NOT NULL THEN
                    v_allow := least(v_allow, greatest(0, floor(v_project))::integer);
                END IF;
                v_qt := NULL;
                v_room := NULL;
                SELECT * INTO v_q FROM herald.queues qs WHERE qs.name = v_queues[i];
                IF FOUND AND (v_q.max_per_second IS NOT NULL OR v_q.max_in_flight IS NOT NULL)
                   AND NOT v_queues[i] = ANY (v_locked_queues) THEN
                    v_wait := least(coalesce(v_wait, 1e9), 0.02);
                    CONTINUE;
                END IF;
                IF FOUND THEN
                    IF v_q.max_per_second IS NOT NULL THEN
                        v_qt := herald._refill(v_q.tokens, v_q.max_per_second, v_q.refilled_at, v_now);
                        v_allow := least(v_allow, greatest(0, floor(v_qt))::integer);
                    END IF;
                    IF v_q.max_in_flight IS NOT NULL THEN
                        SELECT count(*) INTO v_running FROM herald.jobs j
                        WHERE j.locked_until IS NOT NULL AND j.state = 'running' AND j.queue = v_queues[i];
                        v_room := greatest(0, v_q.max_in_flight - v_running)::integer;
                        v_allow := least(v_allow, v_room);
                    END IF;
                END IF;
                v_ct := NULL;
                v_label := NULL;
                IF v_cids[i] <> 0 THEN
                    SELECT * INTO v_c FROM herald.campaigns cs WHERE cs.id = v_cids[i];
                    IF v_c.max_per_second IS NOT NULL AND NOT v_cids[i] = ANY (v_locked_campaigns) THEN
                        v_wait := least(coalesce(v_wait, 1e9), 0.02);
                        CONTINUE;
                    END IF;
                    v_label := v_c.analytics_label;
                    IF v_c.max_per_second IS NOT NULL THEN
                        v_ct := herald._refill(v_c.tokens, v_c.max_per_second, v_c.refilled_at, v_now);
                        v_allow := least(v_allow, greatest(0, floor(v_ct))::integer);
                    END IF;
                END IF;
                v_got := 0;
                IF v_allow > 0 THEN
                RETURN QUERY
                WITH picked AS (
                    SELECT j.id AS picked_id FROM herald.jobs j
                    WHERE j.state = 'available' AND j.queue = v_queues[i] AND coalesce(j.campaign_id, 0) = v_cids[i]
                      AND j.run_at <= v_now
                    ORDER BY j.priority, j.run_at, j.id
                    LIMIT v_allow
                    FOR UPDATE SKIP LOCKED
                )
                UPDATE herald.jobs j
                SET state = 'running', attempts = j.attempts + 1,
                    locked_until = v_now + make_interval(secs => p_lease), locked_by = p_worker
                FROM picked WHERE j.id = picked.picked_id
                RETURNING j.id, j.queue, j.kind,
                    (CASE WHEN v_label IS NOT NULL AND j.kind = 'send'
                               AND NOT coalesce(j.message -> 'fcm_options' ? 'analytics_label', false)
                               AND NOT herald.is_legacy(j.message)
                          THEN j.message || jsonb_build_object('fcm_options',
                                   coalesce(j.message -> 'fcm_options', '{}'::jsonb) || jsonb_build_object('analytics_label', v_label))
                          ELSE j.message END)::text,
                    j.attempts, j.max_attempts,
                    (j.kind = 'send' AND j.message ?| ARRAY['token', 'to', 'registration_ids']
                        AND EXISTS (SELECT 1 FROM herald.pruned_tokens p
                                    WHERE p.token = coalesce(j.message->>'token', j.message->>'to', j.message->'registration_ids'->>0))),
                    j.last_error, extract(epoch FROM j.created_at)::float8, extract(epoch FROM j.run_at)::float8,
                    (SELECT g.notification_key FROM herald.device_groups g
                        WHERE j.kind = 'group' AND g.name = j.message->>'notification_key_name'),
                    (SELECT array_to_json(g.members)::text FROM herald.device_groups g
                        WHERE j.kind = 'group' AND g.name = j.message->>'notification_key_name'),
                    j.validate_only, j.campaign_id, NULL::float8;
                GET DIAGNOSTICS v_got = ROW_COUNT;
                END IF;
                v_budget := v_budget - v_got;
                v_more[i] := v_got = v_allow AND v_allow = v_share;
                -- Held back by a limit (it gave all it allowed, less than the unit's share): come
                -- back when the binding bucket holds half its burst again, or room came back.
                IF v_got = v_allow AND v_allow < v_desired THEN
                    IF v_project IS NOT NULL AND v_project - v_got < v_desired THEN
                        v_wait := least(coalesce(v_wait, 1e9), herald._wait(v_project - v_got, p_project_rate, v_desired));
                    END IF;
                    IF v_qt IS NOT NULL AND v_qt - v_got < v_desired THEN
                        v_wait := least(coalesce(v_wait, 1e9), herald._wait(v_qt - v_got, v_q.max_per_second, v_desired));
                    END IF;
                    IF v_ct IS NOT NULL AND v_ct - v_got < v_desired THEN
                        v_wait := least(coalesce(v_wait, 1e9), herald._wait(v_ct - v_got, v_c.max_per_second, v_desired));
                    END IF;
                    IF v_room IS NOT NULL AND v_room - v_got <= 0 THEN
                        v_wait := least(coalesce(v_wait, 1e9), 0.02);
                    END IF;
                END IF;
                IF v_got > 0 THEN
                    IF v_project IS NOT NULL THEN
                        v_project := v_project - v_got;
                    END IF;
                    IF v_qt IS NOT NULL THEN
                        UPDATE herald.queues qs SET tokens = v_qt - v_got, refilled_at = v_now WHERE qs.name = v_queues[i];
                    END IF;
                    -- A campaign's row is written only for its bucket or its first claim, so
                    -- claims do not queue behind each other (or behind recording) on it.
                    IF v_cids[i] <> 0 AND (v_ct IS NOT NULL OR v_c.state <> 'running') THEN
                        UPDATE herald.campaigns cs
                        SET tokens = CASE WHEN v_ct IS NULL THEN cs.tokens ELSE v_ct - v_got END,
                            refilled_at = CASE WHEN v_ct IS NULL THEN cs.refilled_at ELSE v_now END,
                            state = CASE WHEN cs.state IN ('scheduled', 'finished') THEN 'running' ELSE cs.state END,
                            started_at = coalesce(cs.started_at, v_now), finished_at = NULL
                        WHERE cs.id = v_cids[i];
                    END IF;
                END IF;
            END LOOP;
        END LOOP;
    END IF;

    IF v_project IS NOT NULL THEN
        UPDATE herald.project_rates r SET tokens = v_project, refilled_at = v_now WHERE r.project_id = p_project;
    END IF;
    IF v_wait IS NOT NULL THEN
        id := NULL; queue := NULL; kind := NULL; message := NULL; attempt := NULL; max_attempts := NULL;
        token_pruned := NULL; last_error := NULL; created_at := NULL; due_at := NULL; group_key := NULL;
        group_members := NULL; validate_only := NULL; campaign_id := NULL;
        wait_seconds := greatest(v_wait, 0.001);
        RETURN NEXT;
    END IF;
END
$fn$;
