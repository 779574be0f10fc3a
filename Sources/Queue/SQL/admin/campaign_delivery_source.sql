-- Where campaign $1's delivery data comes from: its project, the project's service and Android
-- apps (JSON), and the project's last fetch of FCM's delivery data (times as ISO 8601 UTC text).
-- No row: no such campaign.
SELECT c.project, p.service, pg_catalog.array_to_json(p.android_apps)::text AS android_apps,
       to_char(f.attempted_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') AS attempted_at,
       to_char(f.fetched_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') AS fetched_at,
       f.outcome, f.reason
FROM herald.campaigns c
LEFT JOIN herald.projects p ON p.name = c.project
LEFT JOIN herald.delivery_data_fetches f ON f.project = c.project
WHERE c.id = $1
