-- claim_batch: the claim. Up to p_limit due jobs of the queues p_queues (NULL: every queue) go to
-- 'running' under a lease of p_lease seconds held by p_worker. Each (queue, campaign) pair with
-- due jobs gets its share of the batch in turn, then what is left goes to pairs that had more,
-- so a backlog in one pair never delays another; priority decides within a pair. The token
-- buckets of the FCM project (p_fcm_project at p_fcm_project_rate a second; 0: no limit), of each
-- queue and of each campaign are spent under row locks, so the limits hold across processes and
-- hosts. p_fcm_project_granted: FCM project tokens taken beforehand with
-- herald.take_project_tokens (what the claim does not use goes back); NULL: the claim takes them
-- itself. Nothing is claimed while the FCM project is held back after a quota answer
-- (herald.project_pauses). p_now: the time the claim happens at (NULL: now()), which tests move.
-- p_project: whose jobs are claimed, a registry name (herald.projects; the caller sends them with
-- that project's credentials) or NULL for jobs of no project (the pool's own credentials);
-- nothing is claimed while that project is paused (herald.pause_project_sending). p_fcm_project,
-- by contrast, is the FCM project id whose rate and quota pauses the claim honours.
--
-- Returns the jobs claimed (claimed) and, when a limit held jobs back, come_back_in: the seconds
-- until it lets them go (NULL when nothing was held back).
CREATE OR REPLACE FUNCTION herald.claim_batch(
    p_queues text[], p_limit integer, p_lease double precision, p_worker text,
    p_fcm_project text DEFAULT NULL, p_fcm_project_rate double precision DEFAULT 0,
    p_fcm_project_granted integer DEFAULT NULL,
    p_now timestamptz DEFAULT NULL, p_project text DEFAULT NULL,
    OUT claimed herald.claimed_job[], OUT come_back_in double precision)
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
    v_now timestamptz := coalesce(p_now, now());
    budget integer := p_limit;        -- jobs this claim may still take
    fcm_tokens double precision;      -- FCM project tokens granted and not yet used (NULL: no FCM project rate)
    unit_queues text[];
    unit_campaigns bigint[];
    units integer;
    more boolean[];                   -- pairs that took their whole share and may have more
    locked_queues text[];
    locked_campaigns bigint[];
    share integer;
    wanted integer;
    a record;                         -- herald._claim_allowance's answer for one pair
    got integer;
    taken herald.claimed_job[];
    audience boolean;                 -- the pair's queue has a frequency cap or quiet hours
    taken_ids bigint[];               -- with them: the jobs taken's ids, tokens and own time zones
    taken_tokens text[];
    taken_zones text[];
BEGIN
    claimed := '{}';

    -- A project an operator paused (or whose credentials failed): nothing of it goes.
    IF p_project IS NOT NULL
       AND NOT EXISTS (SELECT 1 FROM herald.projects r WHERE r.name = p_project AND r.paused_reason IS NULL) THEN
        IF p_fcm_project IS NOT NULL THEN
            PERFORM herald._give_back_project_tokens(p_fcm_project, p_fcm_project_granted);
        END IF;
        RETURN;
    END IF;

    -- The FCM project: held back after a quota answer, or its tokens for this claim.
    IF p_fcm_project IS NOT NULL THEN
        IF p_fcm_project_granted IS NOT NULL AND NOT p_fcm_project_rate > 0 THEN
            RAISE EXCEPTION
                'herald.claim_batch: p_fcm_project_granted (%) needs the FCM project rate it was granted under, not %',
                p_fcm_project_granted, coalesce(p_fcm_project_rate::text, 'null') USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF EXISTS (SELECT 1 FROM herald.project_pauses s WHERE s.project_id = p_fcm_project AND s.paused_until > v_now) THEN
            PERFORM herald._give_back_project_tokens(p_fcm_project, p_fcm_project_granted);
            RETURN;
        END IF;
        IF p_fcm_project_granted IS NOT NULL THEN
            fcm_tokens := greatest(p_fcm_project_granted, 0);
        ELSIF p_fcm_project_rate > 0 THEN
            -- Taken within this claim: the bucket's row stays locked until it commits.
            SELECT t.granted INTO fcm_tokens FROM herald.take_project_tokens(p_fcm_project, p_fcm_project_rate, p_limit, v_now) t;
        END IF;
    END IF;

    -- The pairs with due jobs, and the limited rows whose buckets this claim may spend. SKIP
    -- LOCKED: a row another claim (or an application's open transaction) holds is never waited
    -- for; its pairs sit this claim out.
    SELECT array_agg(u.queue ORDER BY u.queue, u.campaign_id), array_agg(u.campaign_id ORDER BY u.queue, u.campaign_id)
    INTO unit_queues, unit_campaigns FROM herald._claim_units(p_queues, p_project) u;
    units := coalesce(array_length(unit_queues, 1), 0);
    IF units > 0 THEN
        SELECT coalesce(array_agg(qs.name), '{}') INTO locked_queues FROM (
            SELECT q.name FROM herald.queues q
            WHERE q.name = ANY (unit_queues) AND (q.max_per_second IS NOT NULL OR q.max_in_flight IS NOT NULL)
            FOR UPDATE SKIP LOCKED) qs;
        SELECT coalesce(array_agg(cs.id), '{}') INTO locked_campaigns FROM (
            SELECT c.id FROM herald.campaigns c WHERE c.id = ANY (unit_campaigns) AND c.max_per_second IS NOT NULL
            FOR UPDATE SKIP LOCKED) cs;
        more := array_fill(false, ARRAY[units]);
    END IF;

    -- Pass 1: each pair its share of the batch; pass 2: what is left, to pairs that had more.
    FOR pass IN 1..2 LOOP
        EXIT WHEN budget <= 0 OR units = 0;
        share := CASE WHEN pass = 1 THEN greatest(1, ceil(budget::numeric / units)::integer) ELSE budget END;
        FOR i IN 1..units LOOP
            EXIT WHEN budget <= 0;
            CONTINUE WHEN pass = 2 AND NOT more[i];
            more[i] := false;
            wanted := least(share, budget);
            a := herald._claim_allowance(unit_queues[i], unit_campaigns[i], wanted, fcm_tokens,
                                         locked_queues, locked_campaigns, v_now);
            IF a.busy THEN
                come_back_in := least(come_back_in, 0.02);
                CONTINUE;
            END IF;
            got := 0;
            IF a.allowed > 0 THEN
                -- Frequency caps and quiet hours put back the jobs that may not go now.
                audience := EXISTS (SELECT 1 FROM herald.queues qs
                                    WHERE qs.name = unit_queues[i] AND (qs.cap_max IS NOT NULL OR qs.quiet_from IS NOT NULL));
                SELECT u.taken, u.ids, u.tokens, u.zones INTO taken, taken_ids, taken_tokens, taken_zones
                FROM herald._claim_unit(unit_queues[i], unit_campaigns[i], a.allowed, p_lease, p_worker, a.label, v_now,
                                        p_project, audience) u;
                IF audience THEN
                    taken := herald._audience_hold(unit_queues[i], taken, taken_ids, taken_tokens, taken_zones, v_now);
                END IF;
                got := coalesce(cardinality(taken), 0);
                claimed := claimed || taken;
            END IF;
            budget := budget - got;
            more[i] := got = a.allowed AND a.allowed = share;
            -- Held back by a limit: it gave all it allowed, less than the pair's share.
            IF got = a.allowed AND a.allowed < wanted THEN
                come_back_in := least(come_back_in,
                    herald._claim_wait(wanted, got, fcm_tokens, p_fcm_project_rate, a.queue_tokens, a.queue_rate,
                                       a.campaign_tokens, a.campaign_rate, a.room));
            END IF;
            IF got > 0 THEN
                fcm_tokens := fcm_tokens - got;
                PERFORM herald._spend_claim_tokens(unit_queues[i], unit_campaigns[i], got, a.queue_tokens,
                                                   a.campaign_tokens, a.campaign_state, v_now);
            END IF;
        END LOOP;
    END LOOP;

    -- The last write of the claim: the FCM project bucket's row stays locked only until the commit.
    IF fcm_tokens > 0 THEN
        PERFORM herald._give_back_project_tokens(p_fcm_project, fcm_tokens);
    END IF;
    IF come_back_in IS NOT NULL THEN
        come_back_in := greatest(come_back_in, 0.001);
    END IF;
END
$fn$;
