-- The claim's frequency cap and quiet hours (herald.set_frequency_cap, herald.set_quiet_hours):
-- of the jobs p_jobs just claimed from queue p_queue at p_now (p_ids, p_tokens and p_zones: their
-- ids, tokens and own time zones, in the same order, as herald._claim_unit gives them), those
-- that may not go now are put
-- back to wait (scheduled, run_at when they may, their attempt given back) and left out; a job
-- over a cap whose queue discards is kept with token_pruned set and last_error saying why (the
-- worker discards it with that reason). A send counts towards its token's cap when claimed. The
-- tokens' rows in herald.token_sends are upserted once per batch (in token order), so every pool
-- agrees. A queue without either rule returns p_jobs after one lookup; with them, one statement
-- per batch (more only when jobs wait), not per job.
CREATE OR REPLACE FUNCTION herald._audience_hold(p_queue text, p_jobs herald.claimed_job[], p_ids bigint[], p_tokens text[],
                                                 p_zones text[], p_now timestamptz)
RETURNS herald.claimed_job[] LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
    q herald.queues;
    held bigint[] := '{}';
    held_at timestamptz[] := '{}';
    discarded bigint[] := '{}';
    reasons text[] := '{}';
    short bigint := 0;                -- jobs of the batch the cap did not count
    utc_local timestamp;              -- p_now on a UTC wall clock
    utc_opens timestamptz;            -- when quiet hours end for a job in UTC (NULL: not quiet now)
    kept herald.claimed_job[];
    job herald.claimed_job;
    i integer;
BEGIN
    SELECT * INTO q FROM herald.queues qs WHERE qs.name = p_queue;
    IF NOT FOUND OR (q.cap_max IS NULL AND q.quiet_from IS NULL) OR p_ids IS NULL OR cardinality(p_ids) = 0 THEN
        RETURN p_jobs;
    END IF;

    -- Quiet hours: the jobs claimed inside them in their zone (the job's, else the token's, else
    -- UTC) wait for the window's end there. The UTC answer is worked out once per batch.
    IF q.quiet_from IS NOT NULL THEN
        utc_local := p_now AT TIME ZONE 'UTC';
        IF (q.quiet_from < q.quiet_until AND utc_local::time >= q.quiet_from AND utc_local::time < q.quiet_until)
           OR (q.quiet_from > q.quiet_until AND (utc_local::time >= q.quiet_from OR utc_local::time < q.quiet_until)) THEN
            utc_opens := (utc_local::date + q.quiet_until
                          + CASE WHEN utc_local::date + q.quiet_until <= utc_local THEN interval '1 day' ELSE interval '0' END)
                         AT TIME ZONE 'UTC';
        END IF;
        WITH batch AS (
            SELECT u.id, u.token, coalesce(u.zone, (SELECT d.time_zone FROM herald.device_tokens d WHERE d.token = u.token)) AS zone
            FROM unnest(p_ids, p_tokens, p_zones) AS u(id, token, zone)
        ), local AS (
            SELECT b.id, b.token, b.zone, p_now AT TIME ZONE b.zone AS at FROM batch b WHERE b.zone IS NOT NULL
        ), quiet AS (
            SELECT b.id, utc_opens AS opens FROM batch b WHERE b.zone IS NULL AND utc_opens IS NOT NULL
            UNION ALL
            SELECT l.id, (l.at::date + q.quiet_until
                                   + CASE WHEN l.at::date + q.quiet_until <= l.at THEN interval '1 day' ELSE interval '0' END)
                                  AT TIME ZONE l.zone
            FROM local l
            WHERE (q.quiet_from < q.quiet_until AND l.at::time >= q.quiet_from AND l.at::time < q.quiet_until)
               OR (q.quiet_from > q.quiet_until AND (l.at::time >= q.quiet_from OR l.at::time < q.quiet_until))
        )
        SELECT coalesce(array_agg(qt.id), '{}'), coalesce(array_agg(qt.opens), '{}') INTO held, held_at FROM quiet qt;
    END IF;

    -- The cap: one upsert per token of the jobs not held, in token order (the row stays locked
    -- for the claim's transaction): sends older than the period dropped, and as many of this
    -- batch's sends appended as the cap allows (last_counted). sent_at is kept in time order, so
    -- the expired sends are a prefix (width_bucket counts those at or before the period's start
    -- by binary search) and the new ones go at the end, unless a claim that started later
    -- committed first (then the row is sorted again). The common answer, every job counted,
    -- needs no per-job verdict.
    IF q.cap_max IS NOT NULL THEN
        WITH n AS (
            SELECT u.token, count(*)::integer AS jobs
            FROM unnest(p_ids, p_tokens) AS u(id, token)
            WHERE cardinality(held) = 0 OR NOT u.id = ANY (held)
            GROUP BY 1
        ), counted AS (
            INSERT INTO herald.token_sends AS s (queue, token, sent_at, last_counted)
            SELECT p_queue, n.token, array_fill(p_now, ARRAY[least(n.jobs, q.cap_max)]), least(n.jobs, q.cap_max)
            FROM n WHERE n.token IS NOT NULL
            ORDER BY n.token
            ON CONFLICT (queue, token) DO UPDATE
            SET sent_at = CASE WHEN cardinality(s.sent_at) = 0 OR s.sent_at[cardinality(s.sent_at)] <= p_now
                               THEN s.sent_at[width_bucket(p_now - q.cap_per, s.sent_at) + 1:]
                                    || array_fill(p_now, ARRAY[greatest(0, least(cardinality(excluded.sent_at),
                                           q.cap_max - cardinality(s.sent_at) + width_bucket(p_now - q.cap_per, s.sent_at)))])
                               ELSE ARRAY(SELECT t FROM unnest(s.sent_at[width_bucket(p_now - q.cap_per, s.sent_at) + 1:]
                                    || array_fill(p_now, ARRAY[greatest(0, least(cardinality(excluded.sent_at),
                                           q.cap_max - cardinality(s.sent_at) + width_bucket(p_now - q.cap_per, s.sent_at)))])) t
                                    ORDER BY t) END,
                last_counted = greatest(0, least(cardinality(excluded.sent_at),
                                                 q.cap_max - cardinality(s.sent_at) + width_bucket(p_now - q.cap_per, s.sent_at)))
            RETURNING s.last_counted
        )
        SELECT (SELECT coalesce(sum(n.jobs), 0) FROM n WHERE n.token IS NOT NULL) - (SELECT coalesce(sum(c.last_counted), 0) FROM counted c)
        INTO short;
    END IF;

    -- Some jobs over the cap: the k-th job over it for a token goes when the k-th oldest send of
    -- the period expires (the token's row, locked and updated above, says when).
    IF short > 0 THEN
        WITH ranked AS (
            SELECT u.id, u.token, row_number() OVER (PARTITION BY u.token ORDER BY u.ord) AS r
            FROM unnest(p_ids, p_tokens) WITH ORDINALITY AS u(id, token, ord)
            WHERE cardinality(held) = 0 OR NOT u.id = ANY (held)
        ), over AS (
            SELECT rk.id, rk.token, cardinality(s.sent_at) - s.last_counted AS before,
                   coalesce(s.sent_at[rk.r - s.last_counted], p_now) + q.cap_per AS allowed_at
            FROM ranked rk JOIN herald.token_sends s ON s.queue = p_queue AND s.token = rk.token
            WHERE rk.r > s.last_counted
        )
        SELECT held || coalesce(array_agg(o.id) FILTER (WHERE NOT q.cap_discard), '{}'),
               held_at || coalesce(array_agg(o.allowed_at) FILTER (WHERE NOT q.cap_discard), '{}'),
               coalesce(array_agg(o.id) FILTER (WHERE q.cap_discard), '{}'),
               coalesce(array_agg('CAPPED: token ' || left(o.token, 12) || '... had ' || o.before || ' sends of queue '
                                  || p_queue || ' in the last ' || q.cap_per || ' (the cap: ' || q.cap_max || '); not sent')
                        FILTER (WHERE q.cap_discard), '{}')
        INTO held, held_at, discarded, reasons
        FROM over o;
    END IF;

    IF cardinality(held) = 0 AND cardinality(discarded) = 0 THEN
        RETURN p_jobs;
    END IF;
    UPDATE herald.jobs j
    SET state = 'scheduled', attempts = greatest(j.attempts - 1, 0), locked_until = NULL, locked_by = NULL, run_at = h.at
    FROM unnest(held, held_at) AS h(id, at) WHERE j.id = h.id;
    UPDATE herald.jobs j SET last_error = d.why FROM unnest(discarded, reasons) AS d(id, why) WHERE j.id = d.id;
    kept := '{}';
    FOREACH job IN ARRAY p_jobs LOOP
        CONTINUE WHEN job.id = ANY (held);
        i := array_position(discarded, job.id);
        IF i IS NOT NULL THEN
            job.token_pruned := true;
            job.last_error := reasons[i];
        END IF;
        kept := kept || job;
    END LOOP;
    RETURN kept;
END $fn$;
