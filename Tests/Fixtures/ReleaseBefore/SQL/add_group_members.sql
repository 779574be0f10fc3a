-- A device group FCM confirmed created or grown: $1 name, $2 notification_key, $3 the new members.
INSERT INTO herald.device_groups (name, notification_key, members, updated_at)
VALUES ($1, $2, $3::text[], now())
ON CONFLICT (name) DO UPDATE SET notification_key = excluded.notification_key,
    members = ARRAY(SELECT DISTINCT m FROM unnest(herald.device_groups.members || excluded.members) AS m ORDER BY m),
    updated_at = now()
