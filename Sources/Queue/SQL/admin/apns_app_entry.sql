-- Registered APNs app $1 (herald.apns_apps), the columns of apns_apps_list.
SELECT name, key_file, key_id, team_id, topic, sandbox, max_rate, paused_reason,
       to_char(paused_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
       to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
       to_char(updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'), paused_cause
FROM herald.apns_apps WHERE name = $1
