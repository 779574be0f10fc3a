-- Holds back every worker of FCM project $1 for $2 seconds (a project or topic quota answer).
INSERT INTO herald.project_pauses (project_id, paused_until, reason)
VALUES ($1, now() + make_interval(secs => $2::float8), $3)
ON CONFLICT (project_id) DO UPDATE
SET paused_until = greatest(herald.project_pauses.paused_until, excluded.paused_until), reason = excluded.reason
