-- The newest dead letter job $1 became. Columns as DeadLetters.letters reads them.
SELECT id, job_id, queue, kind, reason, attempts, max_attempts, dedupe_key,
       to_char(dead_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
       to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'), message::text, errors::text, project
FROM herald.dead_letters
WHERE job_id = $1 ORDER BY id DESC LIMIT 1
