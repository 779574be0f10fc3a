-- The claim's frequency cap and quiet hours (herald.set_frequency_cap, herald.set_quiet_hours):
-- of the jobs p_jobs just claimed from queue p_queue at p_now, those that may not go now are put
-- back to wait (scheduled, run_at when they may, their attempt given back) and left out; a job
-- over a cap whose queue discards is kept with token_pruned set and last_error saying why (the
-- worker discards it with that reason). A send counts towards its token's cap when claimed. The
-- token's row in herald.token_sends is locked, so every pool agrees. A queue without either
-- rule returns p_jobs after one lookup.
CREATE OR REPLACE FUNCTION herald._audience_hold(p_queue text, p_jobs herald.claimed_job[], p_now timestamptz)
RETURNS herald.claimed_job[] LANGUAGE plpgsql SET search_path = pg_catalog AS $fn$
DECLARE
    q herald.queues;
    kept herald.claimed_job[] := '{}';
    job herald.claimed_job;
    v_token text;
    v_zone text;
    local_at timestamp;
    clock time;
    opens timestamptz;
    times timestamptz[];
BEGIN
    SELECT * INTO q FROM herald.queues qs WHERE qs.name = p_queue;
    IF NOT FOUND OR (q.cap_max IS NULL AND q.quiet_from IS NULL) OR p_jobs IS NULL THEN
        RETURN p_jobs;
    END IF;
    FOREACH job IN ARRAY p_jobs LOOP
        SELECT j.message->>'token', coalesce(j.time_zone, d.time_zone, 'UTC') INTO v_token, v_zone
        FROM herald.jobs j LEFT JOIN herald.device_tokens d ON d.token = j.message->>'token' WHERE j.id = job.id;
        opens := NULL;
        IF q.quiet_from IS NOT NULL THEN
            local_at := p_now AT TIME ZONE v_zone;
            clock := local_at::time;
            IF (q.quiet_from < q.quiet_until AND clock >= q.quiet_from AND clock < q.quiet_until)
               OR (q.quiet_from > q.quiet_until AND (clock >= q.quiet_from OR clock < q.quiet_until)) THEN
                opens := (local_at::date + q.quiet_until
                          + CASE WHEN local_at::date + q.quiet_until <= local_at THEN interval '1 day' ELSE interval '0' END)
                         AT TIME ZONE v_zone;
            END IF;
        END IF;
        IF opens IS NULL AND q.cap_max IS NOT NULL AND v_token IS NOT NULL THEN
            INSERT INTO herald.token_sends AS s (queue, token) VALUES (p_queue, v_token) ON CONFLICT DO NOTHING;
            SELECT ARRAY(SELECT t FROM unnest(s.sent_at) t WHERE t > p_now - q.cap_per ORDER BY t) INTO times
            FROM herald.token_sends s WHERE s.queue = p_queue AND s.token = v_token FOR UPDATE;
            IF cardinality(times) >= q.cap_max THEN
                IF q.cap_discard THEN
                    job.token_pruned := true;
                    job.last_error := 'CAPPED: token ' || left(v_token, 12) || '... had ' || cardinality(times) || ' sends of queue '
                                      || p_queue || ' in the last ' || q.cap_per || ' (the cap: ' || q.cap_max || '); not sent';
                    UPDATE herald.jobs SET last_error = job.last_error WHERE id = job.id;
                    kept := kept || job;
                    CONTINUE;
                END IF;
                opens := times[cardinality(times) - q.cap_max + 1] + q.cap_per;
            ELSE
                UPDATE herald.token_sends s SET sent_at = times || p_now WHERE s.queue = p_queue AND s.token = v_token;
            END IF;
        END IF;
        IF opens IS NOT NULL THEN
            UPDATE herald.jobs SET state = 'scheduled', run_at = opens, attempts = greatest(attempts - 1, 0),
                                   locked_until = NULL, locked_by = NULL
            WHERE id = job.id;
            CONTINUE;
        END IF;
        kept := kept || job;
    END LOOP;
    RETURN kept;
END $fn$;
