-- A device group left with no members is gone, as at FCM.
DELETE FROM herald.device_groups WHERE name = $1 AND pg_catalog.cardinality(members) = 0
