-- Completed jobs above id $1 and the last finished_at (seconds since 1970).
SELECT count(*) FILTER (WHERE state = 'completed'), extract(epoch FROM max(finished_at))::float8
FROM herald.jobs WHERE id > $1
