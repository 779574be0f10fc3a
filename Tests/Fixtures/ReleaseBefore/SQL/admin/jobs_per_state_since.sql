-- Jobs per state among those created at or after $1 (the embedded default's summary of one run).
SELECT state, count(*) FROM herald.jobs WHERE created_at >= $1::timestamptz GROUP BY state ORDER BY state
