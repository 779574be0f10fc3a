-- Running jobs per queue: they hold a lease, so the lease index (on locked_until) finds them.
SELECT queue, 'running', count(*), NULL::float8 FROM herald.jobs
WHERE locked_until IS NOT NULL AND state = 'running' GROUP BY 1
