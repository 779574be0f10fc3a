-- Jobs per state (the summary of `herald stats`).
SELECT state, count(*) FROM herald.jobs GROUP BY state ORDER BY state
