-- Device group $1 as herald.device_groups has it: its notification key and members (JSON).
SELECT notification_key, pg_catalog.array_to_json(members)::text FROM herald.device_groups WHERE name = $1
