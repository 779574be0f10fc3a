-- Herald: the project's token bucket (herald work --max-rate) is spent in a statement of its own.
--
-- Until now herald.claim_jobs spent it with an INSERT ... ON CONFLICT on herald.project_rates at
-- its start, so the row stayed locked until the claim committed and the claims of every worker of
-- one project ran one after another. Now a worker first takes up to a claim's worth of tokens
-- with herald.take_project_tokens, in its own short transaction, then claims within what it was
-- granted, and the claim gives back what it did not use as its last write (a lock held from
-- there to the commit only). Tokens are never spent twice: a grant leaves the bucket at once, and
-- a worker that stops between the two statements only leaves its grant unspent.
--
-- herald.claim_jobs gains p_project_granted; called without it (a worker of an older version),
-- it takes the tokens itself within the claim, as before.

-- Takes up to p_wanted tokens from the bucket of FCM project p_project (p_rate a second). Returns
-- how many were granted and, when fewer than wanted, in how many seconds the bucket holds enough
-- for a claim again. Grants nothing while the project is held back after a quota answer (and
-- then no wait: the pause's end is what the worker waits for).
CREATE FUNCTION herald.take_project_tokens(p_project text, p_rate double precision, p_wanted integer)
RETURNS TABLE (granted integer, wait_seconds double precision)
LANGUAGE plpgsql SET search_path = pg_catalog AS $fn$
DECLARE
    v_now timestamptz := now();
    v_tokens double precision;
BEGIN
    IF p_project IS NULL OR NOT p_rate > 0 THEN
        RAISE EXCEPTION 'herald.take_project_tokens: needs a project id and a rate above 0 (got %, %)',
            coalesce(p_project, 'null'), coalesce(p_rate::text, 'null')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF EXISTS (SELECT 1 FROM herald.sender_pauses s WHERE s.project_id = p_project AND s.paused_until > v_now) THEN
        granted := 0; wait_seconds := NULL;
        RETURN NEXT;
        RETURN;
    END IF;
    INSERT INTO herald.project_rates AS r (project_id, max_per_second, tokens, refilled_at)
    VALUES (p_project, p_rate, herald._burst(p_rate), v_now)
    ON CONFLICT (project_id) DO UPDATE
    SET tokens = herald._refill(r.tokens, excluded.max_per_second, r.refilled_at, excluded.refilled_at),
        max_per_second = excluded.max_per_second, refilled_at = excluded.refilled_at
    RETURNING r.tokens INTO v_tokens;
    granted := least(greatest(p_wanted, 0), greatest(0, floor(v_tokens))::integer);
    IF granted > 0 THEN
        UPDATE herald.project_rates r SET tokens = v_tokens - granted WHERE r.project_id = p_project;
    END IF;
    wait_seconds := CASE WHEN granted < p_wanted THEN herald._wait(v_tokens - granted, p_rate, p_wanted) END;
    RETURN NEXT;
END
$fn$;

-- Puts back tokens a claim was granted and did not use, up to the bucket's burst.
CREATE FUNCTION herald._give_back_project_tokens(p_project text, p_tokens double precision) RETURNS void
LANGUAGE sql SET search_path = pg_catalog AS $$
    UPDATE herald.project_rates r SET tokens = least(herald._burst(r.max_per_second), r.tokens + p_tokens)
    WHERE r.project_id = p_project AND p_tokens > 0
$$;

-- The claim of migration 070, spending tokens granted beforehand (p_project_granted) when given.
DROP FUNCTION herald.claim_jobs(text[], integer, double precision, text, text, double precision);
CREATE FUNCTION herald.claim_jobs(p_queues text[], p_limit integer, p_lease double precision, p_worker text,
                                  p_project text DEFAULT NULL, p_project_rate double precision DEFAULT 0,
                                  p_project_granted integer DEFAULT NULL)
RETURNS TABLE (id bigint, queue text, kind text, message text, attempt integer, max_attempts integer,
               token_pruned boolean, last_error text, created_at double precision, due_at double precision,
               group_key text, group_members text, validate_only boolean, campaign_id bigint,
               wait_seconds double precision)
LANGUAGE plpgsql SET search_path = pg_catalog AS $fn$
#variable_conflict use_column
DECLARE
    v_now timestamptz := now();
    v_budget integer := p_limit;
    v_project double precision;       -- the project's tokens granted and not yet used (null: no project rate)
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
        IF p_project_granted IS NOT NULL AND NOT p_project_rate > 0 THEN
            RAISE EXCEPTION 'herald.claim_jobs: p_project_granted (%) needs the project rate it was granted under, not %',
                p_project_granted, coalesce(p_project_rate::text, 'null') USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF EXISTS (SELECT 1 FROM herald.sender_pauses s WHERE s.project_id = p_project AND s.paused_until > v_now) THEN
            PERFORM herald._give_back_project_tokens(p_project, p_project_granted);
            RETURN;
        END IF;
        IF p_project_granted IS NOT NULL THEN
            -- Taken by herald.take_project_tokens in its own transaction: no lock held here.
            v_project := greatest(p_project_granted, 0);
        ELSIF p_project_rate > 0 THEN
            -- A caller that took no tokens first: take them within this claim (the row stays
            -- locked until it commits).
            SELECT t.granted INTO v_project FROM herald.take_project_tokens(p_project, p_project_rate, p_limit) t;
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

    -- The last write of the claim: the bucket's row stays locked only until the commit.
    IF v_project > 0 THEN
        PERFORM herald._give_back_project_tokens(p_project, v_project);
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
