-- The registered FCM projects by name (herald.project_registry; APNs apps are apns_apps_list.sql),
-- times as ISO 8601 UTC text. What a pool works, and herald projects list shows.
SELECT name, fcm_project_id, credentials, max_rate, state, paused_reason,
       to_char(paused_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
       to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
       to_char(updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'), paused_cause,
       pg_catalog.array_to_json(android_apps)::text
FROM herald.project_registry WHERE service = 'fcm'
