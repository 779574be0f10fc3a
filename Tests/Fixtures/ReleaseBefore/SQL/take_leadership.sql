-- Takes the leadership $1 for process $2, or renews it, until $3 seconds from now: one row when
-- $2 holds it afterwards (it was free, expired, or already $2's), none when another process's
-- lease still runs. The database's clock decides, so the pools' clocks need not agree.
INSERT INTO herald.leaders AS l (name, leader_id, elected_at, expires_at)
VALUES ($1, $2, now(), now() + make_interval(secs => $3::float8))
ON CONFLICT (name) DO UPDATE
SET leader_id = EXCLUDED.leader_id,
    elected_at = CASE WHEN l.leader_id = EXCLUDED.leader_id THEN l.elected_at ELSE EXCLUDED.elected_at END,
    expires_at = EXCLUDED.expires_at
WHERE l.leader_id = EXCLUDED.leader_id OR l.expires_at < now()
RETURNING l.leader_id
