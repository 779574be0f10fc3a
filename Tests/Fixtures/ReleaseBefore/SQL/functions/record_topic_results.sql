-- The pool's record of answers: one element per token, {"project", "topic", "token",
-- "generation", "outcome": "done" | "failed" | "retry", "error", "delay" (seconds, for retry)}.
-- A row whose wish changed since the claim (another generation) is only released; a retry
-- without an error (a claim handed back unasked) keeps the last one.
CREATE OR REPLACE FUNCTION herald.record_topic_results(p_results jsonb) RETURNS void
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
