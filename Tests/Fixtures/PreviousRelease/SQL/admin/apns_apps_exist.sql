-- Whether the schema has APNs apps in its registry (migration 290: the view herald.apns_apps).
SELECT to_regclass('herald.apns_apps') IS NOT NULL
