-- Whether any job above id $1 has been claimed yet, and the server's clock now.
SELECT EXISTS (SELECT 1 FROM herald.jobs WHERE state = 'running' AND id > $1)
    OR EXISTS (SELECT 1 FROM herald.jobs WHERE state IN ('completed', 'discarded', 'cancelled') AND id > $1),
    extract(epoch FROM clock_timestamp())::float8
