-- Extends the leases of jobs $1 that worker $2 still holds, to $3 seconds from now.
UPDATE herald.jobs SET locked_until = now() + make_interval(secs => $3::float8)
WHERE id = ANY ($1::bigint[]) AND state = 'running' AND locked_by = $2
