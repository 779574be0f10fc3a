-- Members FCM confirmed removed from device group $1 ($2).
UPDATE herald.device_groups
SET members = ARRAY(SELECT m FROM pg_catalog.unnest(members) AS m WHERE m <> ALL ($2::text[]) ORDER BY m), updated_at = now()
WHERE name = $1
