-- The (queue, campaign) pairs that have available jobs, in (queue, campaign) order: one probe of
-- the index jobs_claim_unit each (a skip scan), so a backlog of a million jobs in one pair costs
-- the others nothing. Left out: queues not in p_queues (NULL: any queue), paused queues, and
-- campaigns paused or cancelled. campaign_id 0 stands for jobs of no campaign. (PL/pgSQL, not
-- SQL, so its plan is kept between claims: a SQL function's statements are planned on every call.)
CREATE OR REPLACE FUNCTION herald._claim_units(p_queues text[])
RETURNS TABLE (queue text, campaign_id bigint) LANGUAGE plpgsql SET search_path = pg_catalog AS $fn$
BEGIN
    RETURN QUERY
    WITH RECURSIVE units AS (
        (SELECT j.queue AS q, coalesce(j.campaign_id, 0) AS c FROM herald.jobs j
         WHERE j.state = 'available' ORDER BY j.queue, coalesce(j.campaign_id, 0) LIMIT 1)
        UNION ALL
        SELECT nx.q, nx.c FROM units u CROSS JOIN LATERAL (
            SELECT j.queue AS q, coalesce(j.campaign_id, 0) AS c FROM herald.jobs j
            WHERE j.state = 'available' AND (j.queue, coalesce(j.campaign_id, 0)) > (u.q, u.c)
            ORDER BY j.queue, coalesce(j.campaign_id, 0) LIMIT 1) nx
    )
    SELECT u.q, u.c FROM units u
    WHERE (p_queues IS NULL OR u.q = ANY (p_queues))
      AND NOT EXISTS (SELECT 1 FROM herald.queues qs WHERE qs.name = u.q AND qs.paused)
      AND (u.c = 0 OR EXISTS (SELECT 1 FROM herald.campaigns cs WHERE cs.id = u.c AND cs.state IN ('scheduled', 'running', 'finished')))
    ORDER BY u.q, u.c;
END
$fn$;
