-- A device group left with no members is gone, as at FCM.
DELETE FROM herald.device_groups WHERE name = $1 AND cardinality(members) = 0
