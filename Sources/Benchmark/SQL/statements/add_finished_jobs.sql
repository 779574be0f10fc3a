-- $1 jobs that finished an hour ago (completed, within the default 24 h retention), as a table
-- that has delivered for a while holds (--finished-rows).
INSERT INTO herald.jobs (message, state, attempts, created_at, run_at, finished_at, fcm_message_name)
SELECT pg_catalog.jsonb_build_object('token', 'bench-done-' || g, 'notification', pg_catalog.jsonb_build_object('title', 'Herald bench')),
       'completed', 1, now() - interval '2 hours', now() - interval '2 hours', now() - interval '1 hour',
       'projects/herald-local/messages/' || g
FROM generate_series(1, $1::bigint) AS g
