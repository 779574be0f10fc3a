-- Whether the queues $1 (all when NULL) hold a job not yet finished: scheduled, available or running.
SELECT EXISTS (SELECT 1 FROM herald.jobs WHERE state IN ('scheduled', 'available', 'running')
               AND ($1::text[] IS NULL OR queue = ANY ($1::text[]))) AS pending
