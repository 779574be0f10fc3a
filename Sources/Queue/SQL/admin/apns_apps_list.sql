-- The registered APNs apps by name (herald.apns_apps), times as ISO 8601 UTC text.
SELECT name, key_file, key_id, team_id, topic, sandbox, max_rate, paused_reason,
       to_char(paused_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
       to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
       to_char(updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'), paused_cause
FROM herald.apns_apps
