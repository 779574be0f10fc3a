-- A member name as an APNs validation issue writes it after its parent's path: `.name` for
-- letters, digits, _ and -, else `["name"]` (JSON-quoted), so a path never looks like a deeper
-- one (APNsMessageRules.member in Swift).
CREATE OR REPLACE FUNCTION herald._apns_member(key text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT CASE WHEN key ~ '^[A-Za-z0-9_-]+$' THEN '.' || key ELSE '[' || to_jsonb(key)::text || ']' END
$fn$;
