-- The pool's claim: up to p_limit due rows of p_fcm_project (or of no project), leased to p_worker.
CREATE OR REPLACE FUNCTION herald.claim_topic_work(p_fcm_project text, p_worker text, p_limit integer, p_lease_seconds double precision)
RETURNS TABLE (project text, topic text, token text, state text, generation bigint, attempts integer)
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
AS $fn$
    WITH picked AS (
        SELECT s.project, s.topic, s.token FROM herald.topic_subscriptions s
        WHERE s.state IN ('pending', 'removing') AND s.run_at <= now()
          AND (s.locked_until IS NULL OR s.locked_until < now())
          AND s.project IN ('', p_fcm_project)
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
