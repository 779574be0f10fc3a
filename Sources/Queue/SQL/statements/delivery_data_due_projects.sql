-- The registry's FCM projects whose delivery data is due: never asked, or last asked more than $1
-- seconds ago (a failed attempt, FCM or the network, after $2 seconds). By name; with their
-- Android apps as a JSON array (empty: nothing to ask). The daily fetch of the maintenance leader
-- reads it, so the pools ask once a day whichever process leads.
SELECT p.name, pg_catalog.array_to_json(p.android_apps)::text AS android_apps
FROM herald.projects p
LEFT JOIN herald.delivery_data_fetches f ON f.project = p.name
WHERE p.service = 'fcm'
  AND (f.project IS NULL
       OR f.attempted_at < now() - make_interval(secs => CASE WHEN f.outcome = 'failed' THEN $2::float8 ELSE $1::float8 END))
ORDER BY p.name
