-- The registered projects by name (herald.project_registry), times as ISO 8601 UTC text.
SELECT name, fcm_project_id, credentials, max_rate, state, paused_reason,
       to_char(paused_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
       to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
       to_char(updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')
FROM herald.project_registry
