-- The (queue, campaign) pairs that have available jobs of project p_project (the registry name;
-- NULL: jobs of no project), in (queue, campaign) order: one probe of the index jobs_claim_unit
-- each (a skip scan within the project), so a backlog of a million jobs in one pair, or in another
-- project, costs the others nothing. Left out: queues not in p_queues (NULL: any queue), paused queues, and
-- campaigns paused or cancelled. campaign_id 0 stands for jobs of no campaign. (PL/pgSQL, not
-- SQL, so its plan is kept between claims: a SQL function's statements are planned on every call.)
CREATE OR REPLACE FUNCTION herald._claim_units(p_queues text[], p_project text DEFAULT NULL)
RETURNS TABLE (queue text, campaign_id bigint) LANGUAGE plpgsql SET search_path = pg_catalog AS $fn$
DECLARE
    v_project text := coalesce(p_project, '');
BEGIN
    RETURN QUERY
    WITH RECURSIVE units AS (
        (SELECT j.queue AS q, coalesce(j.campaign_id, 0) AS c FROM herald.jobs j
         WHERE j.state = 'available' AND coalesce(j.project, '') = v_project
         ORDER BY coalesce(j.project, ''), j.queue, coalesce(j.campaign_id, 0) LIMIT 1)
        UNION ALL
        -- The next pair in index order, whatever its project, then stop at another project's:
        -- with the project's equality in the probe too, the index scan starts at the project's
        -- first entry and reads its whole backlog to pass the pair (38 ms over 200,000 jobs).
        SELECT nx.q, nx.c FROM units u CROSS JOIN LATERAL (
            SELECT coalesce(j.project, '') AS p, j.queue AS q, coalesce(j.campaign_id, 0) AS c FROM herald.jobs j
            WHERE j.state = 'available'
              AND (coalesce(j.project, ''), j.queue, coalesce(j.campaign_id, 0)) > (v_project, u.q, u.c)
            ORDER BY coalesce(j.project, ''), j.queue, coalesce(j.campaign_id, 0) LIMIT 1) nx
        WHERE nx.p = v_project
    )
    SELECT u.q, u.c FROM units u
    WHERE (p_queues IS NULL OR u.q = ANY (p_queues))
      AND NOT EXISTS (SELECT 1 FROM herald.queues qs WHERE qs.name = u.q AND qs.paused)
      AND (u.c = 0 OR EXISTS (SELECT 1 FROM herald.campaigns cs WHERE cs.id = u.c AND cs.state IN ('scheduled', 'running', 'finished')))
    ORDER BY u.q, u.c;
END
$fn$;
