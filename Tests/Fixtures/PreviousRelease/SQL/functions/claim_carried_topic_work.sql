-- The topic claim of a worker carrying many projects (herald work without --project, or with it
-- given several times): up to p_limit due rows, leased to p_worker, of
--   - the registry's FCM projects it carries: p_names (NULL: every one), less p_skip, each row
--     returned with the registry name whose key it goes out with (registry_name);
--   - with p_own_fcm_project (the pool's own key), the rows of no project ('') and of that FCM
--     project (unless a skipped entry is that FCM project's), returned with registry_name NULL:
--     they go out with the pool's own key.
-- A project an operator paused keeps its rows waiting, as it keeps its jobs; a project paused
-- for its key is tried (its key may work again), and a key that still fails retries the rows.
-- herald.claim_topic_work is the claim of a worker of one FCM project.
CREATE OR REPLACE FUNCTION herald.claim_carried_topic_work(
    p_own_fcm_project text, p_names text[], p_skip text[], p_worker text, p_limit integer, p_lease_seconds double precision)
RETURNS TABLE (registry_name text, project text, topic text, token text, state text, generation bigint, attempts integer)
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
AS $fn$
    WITH carried AS (
        -- The registry's FCM projects the worker carries, each with the entry whose key it uses.
        SELECT p.name, p.fcm_project_id AS fcm_project FROM herald.projects p
        WHERE p.service = 'fcm'
          AND (p_names IS NULL OR p.name = ANY (p_names))
          AND NOT (p.name = ANY (coalesce(p_skip, '{}'::text[])))
          AND (p.paused_reason IS NULL OR p.paused_reason LIKE 'credentials: %')
          AND p.fcm_project_id IS DISTINCT FROM p_own_fcm_project
        UNION ALL
        -- With the pool's own key: the rows of no project and of its own FCM project.
        SELECT NULL, o.fcm_project FROM unnest(ARRAY['', p_own_fcm_project]) AS o(fcm_project)
        WHERE p_own_fcm_project IS NOT NULL
          AND NOT EXISTS (SELECT 1 FROM herald.projects k
                          WHERE k.fcm_project_id = o.fcm_project AND k.name = ANY (coalesce(p_skip, '{}'::text[])))
    ), picked AS (
        -- One probe of topic_subscriptions_project_due per carried project, so no other
        -- project's rows are read (a skipped project's backlog costs nothing); the first p_limit
        -- over them all in the claim's order. A project's rows locked beyond those are let go
        -- when the statement ends.
        SELECT c.name, d.row_id, d.run_at, d.topic, d.token
        FROM carried c
        CROSS JOIN LATERAL (
            SELECT s.ctid AS row_id, s.run_at, s.topic, s.token FROM herald.topic_subscriptions s
            WHERE s.project = c.fcm_project AND s.state IN ('pending', 'removing') AND s.run_at <= now()
              AND (s.locked_until IS NULL OR s.locked_until < now())
            ORDER BY s.run_at, s.topic, s.token
            LIMIT p_limit
            FOR UPDATE OF s SKIP LOCKED
        ) d
        ORDER BY d.run_at, d.topic, d.token
        LIMIT p_limit
    )
    UPDATE herald.topic_subscriptions s
    SET locked_until = now() + make_interval(secs => p_lease_seconds), locked_by = p_worker, attempts = s.attempts + 1
    FROM picked
    -- The rows by their ctid, as an array: the planner cannot know how few p_limit leaves, and
    -- joined alone it read the whole table (about 250 ms beside 200,000 rows); a TID scan reads them.
    WHERE s.ctid = ANY (ARRAY(SELECT p.row_id FROM picked p)) AND s.ctid = picked.row_id
    RETURNING picked.name, s.project, s.topic, s.token, s.state, s.generation, s.attempts
$fn$;
