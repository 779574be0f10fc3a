-- Whether the queues $1 (all when NULL) hold a job of project $2 (a registry name; NULL: jobs of
-- no project) not yet finished: scheduled, available or running. One EXISTS per state, each
-- matching a partial index (jobs_scheduled, jobs_claim_unit, jobs_lease: a running job holds a
-- lease), so the answer costs a few index probes however many finished rows the table keeps;
-- `state IN (...)` over the whole table scanned them all (1.2 s each beside 5,000,000 finished
-- jobs).
SELECT EXISTS (SELECT 1 FROM herald.jobs WHERE state = 'available' AND coalesce(project, '') = coalesce($2::text, '')
               AND ($1::text[] IS NULL OR queue = ANY ($1::text[])))
    OR EXISTS (SELECT 1 FROM herald.jobs WHERE state = 'scheduled' AND project IS NOT DISTINCT FROM $2::text
               AND ($1::text[] IS NULL OR queue = ANY ($1::text[])))
    OR EXISTS (SELECT 1 FROM herald.jobs WHERE locked_until IS NOT NULL AND state = 'running'
               AND project IS NOT DISTINCT FROM $2::text
               AND ($1::text[] IS NULL OR queue = ANY ($1::text[]))) AS pending
