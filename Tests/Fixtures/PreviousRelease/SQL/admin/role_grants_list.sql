-- herald grant --list: the roles given a kind, and whether each still exists.
SELECT g.role, g.kind, to_char(g.granted_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
       EXISTS (SELECT 1 FROM pg_catalog.pg_roles r WHERE r.rolname = g.role)
FROM herald.role_grants g ORDER BY g.role
