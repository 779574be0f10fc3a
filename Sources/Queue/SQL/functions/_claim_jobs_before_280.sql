-- _claim_jobs_before_280: herald.claim_jobs as releases before migration 280 named its
-- parameters (p_project for the FCM project), kept for callers of those releases. 280 renamed it
-- aside instead of dropping it, so a call that resolved it before that herald migrate committed
-- still finds its function (it keeps its OID); this body hands the call to the new claim_jobs.
-- Dropped by a later release (docs/sql-layout.md).
CREATE OR REPLACE FUNCTION herald._claim_jobs_before_280(p_queues text[], p_limit integer, p_lease double precision, p_worker text,
                                  p_project text DEFAULT NULL, p_project_rate double precision DEFAULT 0,
                                  p_project_granted integer DEFAULT NULL)
RETURNS TABLE (id bigint, queue text, kind text, message text, attempt integer, max_attempts integer,
               token_pruned boolean, last_error text, created_at double precision, due_at double precision,
               group_key text, group_members text, validate_only boolean, campaign_id bigint,
               wait_seconds double precision)
LANGUAGE sql SET search_path = pg_catalog, pg_temp AS $$
    SELECT * FROM herald.claim_jobs(p_queues, p_limit, p_lease, p_worker, p_project, p_project_rate, p_project_granted)
$$;
