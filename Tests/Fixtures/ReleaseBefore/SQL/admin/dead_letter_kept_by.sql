-- Why dead letter $1 was kept: its dedupe key and the pending job holding it (if any).
SELECT d.dedupe_key, j.id FROM herald.dead_letters d
LEFT JOIN herald.jobs j ON j.dedupe_key = d.dedupe_key AND j.state IN ('scheduled', 'available', 'running')
WHERE d.id = $1
