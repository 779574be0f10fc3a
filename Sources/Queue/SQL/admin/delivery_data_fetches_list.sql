-- Every FCM project of the registry with its Android apps (JSON) and last fetch of FCM's delivery
-- data, by name; the days and rows stored for it.
SELECT p.name, pg_catalog.array_to_json(p.android_apps)::text AS android_apps,
       to_char(f.attempted_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') AS attempted_at,
       to_char(f.fetched_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') AS fetched_at,
       f.outcome, f.reason,
       (SELECT count(*) FROM herald.delivery_data d WHERE d.project = p.name) AS rows_held,
       (SELECT to_char(max(d.day), 'YYYY-MM-DD') FROM herald.delivery_data d WHERE d.project = p.name) AS latest_day
FROM herald.projects p LEFT JOIN herald.delivery_data_fetches f ON f.project = p.name
WHERE p.service = 'fcm'
ORDER BY p.name
