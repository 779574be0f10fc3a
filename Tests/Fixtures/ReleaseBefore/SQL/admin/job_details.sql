-- One job, every column, times as UTC ISO 8601 text.
SELECT id, queue, kind, state, priority, attempts, max_attempts, dedupe_key,
       to_char(run_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
       to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
       to_char(finished_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
       to_char(locked_until AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
       last_error, fcm_message_name, message::text, errors::text
FROM herald.jobs WHERE id = $1
