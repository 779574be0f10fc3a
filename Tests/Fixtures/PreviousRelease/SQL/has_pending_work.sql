-- Whether the queues $1 (all when NULL) hold a job of project $2 (a registry name; NULL: jobs of
-- no project) that is due: available, running, or scheduled to run within $3 seconds (a drain's
-- horizon). One EXISTS per state, each matching a partial index (jobs_scheduled,
-- jobs_claim_unit, jobs_lease: a running job holds a lease), so the answer costs a few index
-- probes however many finished rows the table keeps; `state IN (...)` over the whole table
-- scanned them all (1.2 s each beside 5,000,000 finished jobs). Also: how many scheduled jobs
-- wait beyond the horizon (`later`) and when the first of them is due (`next_due`, seconds from
-- now), for the drain's last word.
WITH scope AS (
    SELECT $1::text[] AS queues, $2::text AS project, make_interval(secs => $3::float8) AS horizon
),
later AS (
    SELECT count(*) AS n, min(j.run_at) AS first
    FROM herald.jobs j, scope s
    WHERE j.state = 'scheduled' AND j.project IS NOT DISTINCT FROM s.project AND j.run_at > now() + s.horizon
      AND (s.queues IS NULL OR j.queue = ANY (s.queues))
)
SELECT EXISTS (SELECT 1 FROM herald.jobs j, scope s WHERE j.state = 'available' AND coalesce(j.project, '') = coalesce(s.project, '')
               AND (s.queues IS NULL OR j.queue = ANY (s.queues)))
    OR EXISTS (SELECT 1 FROM herald.jobs j, scope s WHERE j.state = 'scheduled' AND j.project IS NOT DISTINCT FROM s.project
               AND j.run_at <= now() + s.horizon AND (s.queues IS NULL OR j.queue = ANY (s.queues)))
    OR EXISTS (SELECT 1 FROM herald.jobs j, scope s WHERE j.locked_until IS NOT NULL AND j.state = 'running'
               AND j.project IS NOT DISTINCT FROM s.project
               AND (s.queues IS NULL OR j.queue = ANY (s.queues))) AS pending,
       (SELECT n FROM later) AS later,
       extract(epoch FROM (SELECT first FROM later) - now())::float8 AS next_due
