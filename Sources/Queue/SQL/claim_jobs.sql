-- Claims up to $2 available jobs (of the queues $1, all when NULL) by priority, then run_at,
-- into 'running' under a lease of $3 seconds held by $4. Claims nothing while the FCM project $5
-- is held back after a quota answer (herald.sender_pauses). Only the partial index jobs_claim
-- (available jobs) is walked: scheduled and finished rows cost the claim nothing.
WITH picked AS (
    SELECT id FROM herald.jobs
    WHERE state = 'available' AND run_at <= now() AND ($1::text[] IS NULL OR queue = ANY ($1::text[]))
      AND ($5::text IS NULL OR NOT EXISTS (
          SELECT 1 FROM herald.sender_pauses p WHERE p.project_id = $5::text AND p.paused_until > now()))
    ORDER BY priority, run_at, id
    LIMIT $2
    FOR UPDATE SKIP LOCKED
)
UPDATE herald.jobs j
SET state = 'running', attempts = j.attempts + 1,
    locked_until = now() + make_interval(secs => $3::float8), locked_by = $4
FROM picked WHERE j.id = picked.id
RETURNING j.id, j.queue, j.kind, j.message::text AS message, j.attempts AS attempt, j.max_attempts,
    (j.kind = 'send' AND j.message ?| ARRAY['token', 'to', 'registration_ids']
        AND EXISTS (SELECT 1 FROM herald.pruned_tokens p
                    WHERE p.token = coalesce(j.message->>'token', j.message->>'to', j.message->'registration_ids'->>0))) AS token_pruned,
    j.last_error, extract(epoch FROM j.created_at)::float8 AS created_at,
    extract(epoch FROM j.run_at)::float8 AS due_at,
    (SELECT g.notification_key FROM herald.device_groups g
        WHERE j.kind = 'group' AND g.name = j.message->>'notification_key_name') AS group_key,
    (SELECT array_to_json(g.members)::text FROM herald.device_groups g
        WHERE j.kind = 'group' AND g.name = j.message->>'notification_key_name') AS group_members,
    j.validate_only
