-- Deletes up to $2 finished jobs that finished more than $1 seconds ago (retention).
DELETE FROM herald.jobs WHERE id IN (
    SELECT id FROM herald.jobs
    WHERE state IN ('completed', 'discarded', 'cancelled') AND finished_at < now() - make_interval(secs => $1::float8)
    LIMIT $2)
