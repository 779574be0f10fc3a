-- Available jobs per queue from the claim index, with the age of the oldest due one. (Before the
-- schema had a 'scheduled' state, jobs due later waited as available: they are counted as such.)
-- The state is written here, not passed as a parameter: a generic plan for state = $1 could not
-- use a partial index and would read the whole table.
SELECT queue, CASE WHEN run_at > now() THEN 'scheduled' ELSE 'available' END, count(*),
       extract(epoch FROM now() - min(run_at) FILTER (WHERE run_at <= now()))
FROM herald.jobs WHERE state = 'available' GROUP BY 1, 2
