-- Registered FCM project $1 (herald.project_registry), the columns of projects_list; none for an APNs app.
SELECT name, fcm_project_id, credentials, max_rate, state, paused_reason,
       to_char(paused_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
       to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
       to_char(updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'), paused_cause,
       pg_catalog.array_to_json(android_apps)::text
FROM herald.project_registry WHERE name = $1 AND service = 'fcm'
