-- The projects that have available jobs (project NULL: jobs of no project), with their registry
-- entry's pause (NULL: not paused, or no entry): a skip scan of the index jobs_claim_unit over its
-- leading column, one probe a project, so a backlog of a million jobs in one project costs the
-- listing one probe like any other. A worker carrying many projects claims for these in turn.
WITH RECURSIVE due AS (
    (SELECT coalesce(j.project, '') AS p FROM herald.jobs j
     WHERE j.state = 'available'
     ORDER BY coalesce(j.project, '') LIMIT 1)
    UNION ALL
    SELECT nx.p FROM due d CROSS JOIN LATERAL (
        SELECT coalesce(j.project, '') AS p FROM herald.jobs j
        WHERE j.state = 'available' AND coalesce(j.project, '') > d.p
        ORDER BY coalesce(j.project, '') LIMIT 1) nx
)
SELECT nullif(d.p, '') AS project, r.paused_reason
FROM due d LEFT JOIN herald.projects r ON r.name = d.p
