-- Jobs finished (per state) and dead letters per minute since $1 (seconds since the epoch).
SELECT (floor(extract(epoch FROM finished_at) / 60) * 60)::bigint, state, count(*) FROM herald.jobs
WHERE state IN ('completed', 'discarded', 'cancelled') AND finished_at >= to_timestamp($1::float8) GROUP BY 1, 2
UNION ALL
SELECT (floor(extract(epoch FROM dead_at) / 60) * 60)::bigint, 'dead', count(*) FROM herald.dead_letters
WHERE dead_at >= to_timestamp($1::float8) GROUP BY 1
