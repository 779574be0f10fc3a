-- The newest $1 operator actions.
SELECT to_char(at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'), action, array_to_json(ids)::text, details::text, source
FROM herald.admin_log ORDER BY id DESC LIMIT $1
