-- The service of registry entry $1 ('fcm' or 'apns'); no row when nothing is registered by that name.
SELECT service FROM herald.projects WHERE name = $1
