-- Takes the leadership $1 for process $2, or renews it, until $3 seconds from now: one row when
-- $2 holds it afterwards (it was free, expired, already $2's, or its holder's session is gone),
-- none when another process's lease still runs and its session is still listed. The database's
-- clock decides, so the pools' clocks need not agree.
--
-- The holder's session is this connection's backend (pid and start). A holder whose backend is
-- no longer in pg_stat_activity died or lost its connection: nothing it held needs a timer. A
-- backend listed without its start (a role that may not see another's sessions) counts as alive.
INSERT INTO herald.leaders AS l (name, leader_id, elected_at, expires_at, backend_pid, backend_start)
SELECT $1, $2, pg_catalog.now(), pg_catalog.now() + pg_catalog.make_interval(secs => $3::float8),
       me.pid, me.backend_start
FROM pg_catalog.pg_stat_get_activity(pg_catalog.pg_backend_pid()) AS me
ON CONFLICT (name) DO UPDATE
SET leader_id = EXCLUDED.leader_id,
    elected_at = CASE WHEN l.leader_id = EXCLUDED.leader_id THEN l.elected_at ELSE EXCLUDED.elected_at END,
    expires_at = EXCLUDED.expires_at,
    backend_pid = EXCLUDED.backend_pid,
    backend_start = EXCLUDED.backend_start
WHERE l.leader_id = EXCLUDED.leader_id OR l.expires_at < pg_catalog.now()
   OR (l.backend_pid IS NOT NULL
       AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_stat_get_activity(l.backend_pid) AS holder
                       WHERE holder.backend_start IS NULL OR holder.backend_start = l.backend_start))
RETURNING l.leader_id
