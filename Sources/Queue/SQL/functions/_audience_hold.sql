-- The claim's frequency cap and quiet hours (herald.set_frequency_cap, herald.set_quiet_hours):
-- of the jobs p_jobs just claimed from queue p_queue at p_now, those that may not go now are put
-- back to wait (scheduled, run_at when they may, their attempt given back) and left out; a job
-- over a cap whose queue discards is kept with token_pruned set and last_error saying why (the
-- worker discards it with that reason). A send counts towards its token's cap when claimed. The
-- tokens' rows in herald.token_sends are upserted once per batch (in token order), so every pool
-- agrees. A queue without either rule returns p_jobs after one lookup; with them, one statement
-- per batch (two more when jobs wait), not per job.
CREATE OR REPLACE FUNCTION herald._audience_hold(p_queue text, p_jobs herald.claimed_job[], p_now timestamptz)
RETURNS herald.claimed_job[] LANGUAGE plpgsql SET search_path = pg_catalog AS $fn$
DECLARE
    q herald.queues;
    held bigint[];
    held_at timestamptz[];
    discarded bigint[];
    reasons text[];
    kept herald.claimed_job[];
    job herald.claimed_job;
    i integer;
BEGIN
    SELECT * INTO q FROM herald.queues qs WHERE qs.name = p_queue;
    IF NOT FOUND OR (q.cap_max IS NULL AND q.quiet_from IS NULL) OR p_jobs IS NULL OR cardinality(p_jobs) = 0 THEN
        RETURN p_jobs;
    END IF;
    WITH batch AS (
        SELECT u.ord, u.id, u.message::jsonb->>'token' AS token,
               p_now AT TIME ZONE coalesce(j.time_zone, d.time_zone, 'UTC') AS local_at,
               coalesce(j.time_zone, d.time_zone, 'UTC') AS zone
        FROM unnest(p_jobs) WITH ORDINALITY AS u(id, queue, kind, message, attempt, max_attempts, token_pruned, last_error,
                                                 created_at, run_at, group_key, group_members, validate_only, campaign_id, ord)
        LEFT JOIN herald.jobs j ON q.quiet_from IS NOT NULL AND j.id = u.id
        LEFT JOIN herald.device_tokens d ON q.quiet_from IS NOT NULL AND d.token = u.message::jsonb->>'token'
    ), quiet AS (
        SELECT b.*,
               CASE WHEN q.quiet_from IS NOT NULL
                     AND ((q.quiet_from < q.quiet_until AND b.local_at::time >= q.quiet_from AND b.local_at::time < q.quiet_until)
                       OR (q.quiet_from > q.quiet_until AND (b.local_at::time >= q.quiet_from OR b.local_at::time < q.quiet_until)))
                    THEN (b.local_at::date + q.quiet_until
                          + CASE WHEN b.local_at::date + q.quiet_until <= b.local_at THEN interval '1 day' ELSE interval '0' END)
                         AT TIME ZONE b.zone END AS opens
        FROM batch b
    ), ranked AS (
        SELECT qt.*, row_number() OVER (PARTITION BY qt.token ORDER BY qt.ord) AS r
        FROM quiet qt WHERE qt.opens IS NULL
    ), counted AS (
        -- One upsert per token, in token order: the row is locked for the claim's transaction,
        -- sends older than the period dropped, and as many of this batch's sends appended as
        -- the cap allows (last_counted); the rest of the token's jobs wait.
        INSERT INTO herald.token_sends AS s (queue, token, sent_at, last_counted)
        SELECT p_queue, n.token, array_fill(p_now, ARRAY[least(n.jobs, q.cap_max)]), least(n.jobs, q.cap_max)
        FROM (SELECT rk.token, count(*)::integer AS jobs FROM ranked rk
              WHERE rk.token IS NOT NULL AND q.cap_max IS NOT NULL GROUP BY rk.token) n
        ORDER BY n.token
        ON CONFLICT (queue, token) DO UPDATE
        SET (sent_at, last_counted) = (
            SELECT kept.sends || array_fill(p_now, ARRAY[room.n]), room.n
            FROM (SELECT ARRAY(SELECT t FROM unnest(s.sent_at) t WHERE t > p_now - q.cap_per ORDER BY t) AS sends) kept,
                 LATERAL (SELECT greatest(0, least(cardinality(excluded.sent_at), q.cap_max - cardinality(kept.sends))) AS n) room)
        RETURNING s.token, s.sent_at, s.last_counted
    ), verdict AS (
        SELECT rk.id, rk.token, cardinality(c.sent_at) - c.last_counted AS before,
               c.token IS NOT NULL AND rk.r > c.last_counted AS over,
               -- The k-th job over the cap goes when the k-th oldest send of the period expires.
               coalesce(c.sent_at[rk.r - c.last_counted], p_now) + q.cap_per AS allowed_at
        FROM ranked rk LEFT JOIN counted c ON c.token = rk.token
    )
    SELECT coalesce(array_agg(x.id) FILTER (WHERE x.wait IS NOT NULL), '{}'),
           coalesce(array_agg(x.wait) FILTER (WHERE x.wait IS NOT NULL), '{}'),
           coalesce(array_agg(x.id) FILTER (WHERE x.why IS NOT NULL), '{}'),
           coalesce(array_agg(x.why) FILTER (WHERE x.why IS NOT NULL), '{}')
    INTO held, held_at, discarded, reasons
    FROM (SELECT qt.id, qt.opens AS wait, NULL::text AS why FROM quiet qt WHERE qt.opens IS NOT NULL
          UNION ALL
          SELECT v.id, CASE WHEN NOT q.cap_discard THEN v.allowed_at END,
                 CASE WHEN q.cap_discard THEN 'CAPPED: token ' || left(v.token, 12) || '... had ' || v.before || ' sends of queue '
                                              || p_queue || ' in the last ' || q.cap_per || ' (the cap: ' || q.cap_max || '); not sent' END
          FROM verdict v WHERE v.over) x;

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
