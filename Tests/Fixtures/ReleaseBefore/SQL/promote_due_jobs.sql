-- Makes up to $1 scheduled jobs whose run_at has come 'available', earliest first, and wakes the
-- other workers when it did. Returns how many it promoted and in how many seconds the next
-- scheduled job is due, for the caller's timer (relative, so a clock that differs between the
-- worker's host and the database's does not move it). Jobs another worker is promoting right now are
-- skipped, not waited for.
WITH due AS (
    SELECT id FROM herald.jobs
    WHERE state = 'scheduled' AND run_at <= now()
    ORDER BY run_at, id
    LIMIT $1
    FOR UPDATE SKIP LOCKED
),
promoted AS (
    UPDATE herald.jobs j SET state = 'available' FROM due WHERE j.id = due.id RETURNING j.id
)
SELECT (SELECT count(*) FROM promoted) AS promoted,
       (SELECT extract(epoch FROM min(run_at) - now())::float8 FROM herald.jobs
        WHERE state = 'scheduled' AND run_at > now()) AS next_due_in,
       (SELECT pg_notify('herald_jobs', '') WHERE EXISTS (SELECT 1 FROM promoted)) IS NOT NULL AS notified
