-- The claim's frequency cap and quiet hours (herald.set_frequency_cap, herald.set_quiet_hours):
-- of the jobs p_jobs just claimed from queue p_queue at p_now, those that may not go now are put
-- back to wait (scheduled, run_at when they may, their attempt given back) and left out; a job
-- over a cap whose queue discards is kept with token_pruned set and last_error saying why (the
-- worker discards it with that reason). A send counts towards its token's cap when claimed. The
-- tokens' rows in herald.token_sends are locked (in token order), so every pool agrees. A queue
-- without either rule returns p_jobs after one lookup; with them, a few statements per batch,
-- not per job.
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
    IF q.cap_max IS NOT NULL THEN
        INSERT INTO herald.token_sends (queue, token)
        SELECT DISTINCT p_queue, j.message->>'token' FROM unnest(p_jobs) u JOIN herald.jobs j ON j.id = u.id
        WHERE j.message->>'token' IS NOT NULL
        ORDER BY 2
        ON CONFLICT DO NOTHING;
    END IF;
    WITH batch AS (
        SELECT u.ord, u.id, j.message->>'token' AS token,
               p_now AT TIME ZONE coalesce(j.time_zone, d.time_zone, 'UTC') AS local_at,
               coalesce(j.time_zone, d.time_zone, 'UTC') AS zone
        FROM unnest(p_jobs) WITH ORDINALITY AS u(id, queue, kind, message, attempt, max_attempts, token_pruned, last_error,
                                                 created_at, run_at, group_key, group_members, validate_only, campaign_id, ord)
        JOIN herald.jobs j ON j.id = u.id
        LEFT JOIN herald.device_tokens d ON d.token = j.message->>'token'
    ), quiet AS (
        SELECT b.*,
               CASE WHEN q.quiet_from IS NOT NULL
                     AND ((q.quiet_from < q.quiet_until AND b.local_at::time >= q.quiet_from AND b.local_at::time < q.quiet_until)
                       OR (q.quiet_from > q.quiet_until AND (b.local_at::time >= q.quiet_from OR b.local_at::time < q.quiet_until)))
                    THEN (b.local_at::date + q.quiet_until
                          + CASE WHEN b.local_at::date + q.quiet_until <= b.local_at THEN interval '1 day' ELSE interval '0' END)
                         AT TIME ZONE b.zone END AS opens
        FROM batch b
    ), sends AS (
        SELECT s.token, ARRAY(SELECT t FROM unnest(s.sent_at) t WHERE t > p_now - q.cap_per ORDER BY t) AS recent
        FROM herald.token_sends s
        WHERE q.cap_max IS NOT NULL AND s.queue = p_queue AND s.token IN (SELECT token FROM quiet WHERE opens IS NULL)
        ORDER BY s.token
        FOR UPDATE
    ), ranked AS (
        SELECT qt.*, coalesce(cardinality(s.recent), 0) AS before, s.recent,
               row_number() OVER (PARTITION BY qt.token ORDER BY qt.ord) AS r
        FROM quiet qt LEFT JOIN sends s ON s.token = qt.token
        WHERE qt.opens IS NULL
    ), verdict AS (
        SELECT ranked.id, ranked.token, ranked.before, ranked.recent,
               q.cap_max IS NOT NULL AND ranked.token IS NOT NULL AND ranked.before + ranked.r > q.cap_max AS over,
               CASE WHEN ranked.before + ranked.r - q.cap_max <= ranked.before
                    THEN ranked.recent[ranked.before + ranked.r - q.cap_max] ELSE p_now END + q.cap_per AS allowed_at
        FROM ranked
    ), counted AS (
        UPDATE herald.token_sends s
        SET sent_at = v.recent || array_fill(p_now, ARRAY[v.n])
        FROM (SELECT token, min(recent) AS recent, count(*) FILTER (WHERE NOT over)::integer AS n
              FROM verdict WHERE token IS NOT NULL AND q.cap_max IS NOT NULL GROUP BY token) v
        WHERE s.queue = p_queue AND s.token = v.token
        RETURNING 1
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
