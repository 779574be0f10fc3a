-- _claim_batch_before_280: herald.claim_batch as releases before migration 280 named its
-- parameters (p_project for the FCM project, p_jobs_project for the registry's), kept for callers
-- of those releases. 280 renamed it aside instead of dropping it, so a call that resolved it
-- before that herald migrate committed still finds its function (it keeps its OID); this body
-- hands the call to the new claim_batch. Dropped by a later release (docs/sql-layout.md).
CREATE OR REPLACE FUNCTION herald._claim_batch_before_280(
    p_queues text[], p_limit integer, p_lease double precision, p_worker text,
    p_project text DEFAULT NULL, p_project_rate double precision DEFAULT 0, p_project_granted integer DEFAULT NULL,
    p_now timestamptz DEFAULT NULL, p_jobs_project text DEFAULT NULL,
    OUT claimed herald.claimed_job[], OUT come_back_in double precision)
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    SELECT c.claimed, c.come_back_in INTO claimed, come_back_in
    FROM herald.claim_batch(p_queues, p_limit, p_lease, p_worker, p_project, p_project_rate, p_project_granted,
                            p_now, p_jobs_project) AS c;
END
$$;
