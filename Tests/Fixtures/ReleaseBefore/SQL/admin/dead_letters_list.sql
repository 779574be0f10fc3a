-- The newest dead letters of queue $1 (NULL: any) whose reason is LIKE $2 (NULL: any), of registry
-- project $5 (NULL: any), below id $3 (NULL: from the newest), at most $4. Columns as
-- DeadLetters.letters reads them.
SELECT id, job_id, queue, kind, reason, attempts, max_attempts, dedupe_key,
       to_char(dead_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
       to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'), message::text, errors::text, project
FROM herald.dead_letters
WHERE ($1::text IS NULL OR queue = $1) AND ($2::text IS NULL OR reason LIKE $2)
  AND ($3::bigint IS NULL OR id < $3) AND ($5::text IS NULL OR project = $5)
ORDER BY id DESC LIMIT $4
