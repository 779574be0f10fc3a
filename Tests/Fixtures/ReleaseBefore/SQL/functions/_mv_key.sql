-- A member name appended to a field: .name, or ["odd name"].
-- No SET clause, so PostgreSQL can inline it into validate_message (which pins search_path);
-- it uses only pg_catalog functions and operators, found first on any search_path.
CREATE OR REPLACE FUNCTION herald._mv_key(k text, words jsonb, vmax integer) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $fn$
    SELECT CASE WHEN k ~ '^[A-Za-z0-9_-]+$' AND octet_length(k) <= vmax THEN '.' || k
                ELSE '[' || herald._mv_quote(k, words, vmax) || ']' END
$fn$;
