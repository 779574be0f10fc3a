-- claim_jobs: herald.claim_batch in the shape workers of the previous release read, so that a
-- rolling upgrade never stops a pool: one row per job claimed, and, when a limit held jobs back,
-- one more row with a null id whose wait_seconds is claim_batch's come_back_in. This release's
-- workers call claim_batch; drop this function once no worker of the previous release runs.
CREATE OR REPLACE FUNCTION herald.claim_jobs(p_queues text[], p_limit integer, p_lease double precision, p_worker text,
                                  p_project text DEFAULT NULL, p_project_rate double precision DEFAULT 0,
                                  p_project_granted integer DEFAULT NULL)
RETURNS TABLE (id bigint, queue text, kind text, message text, attempt integer, max_attempts integer,
               token_pruned boolean, last_error text, created_at double precision, due_at double precision,
               group_key text, group_members text, validate_only boolean, campaign_id bigint,
               wait_seconds double precision)
LANGUAGE sql SET search_path = pg_catalog AS $$
    WITH claim AS MATERIALIZED (
        SELECT b.claimed, b.come_back_in
        FROM herald.claim_batch(p_queues, p_limit, p_lease, p_worker, p_project, p_project_rate, p_project_granted) b
    )
    SELECT j.*, NULL::float8 FROM claim, unnest(claim.claimed) j
    UNION ALL
    SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, claim.come_back_in
    FROM claim WHERE claim.come_back_in IS NOT NULL
$$;
