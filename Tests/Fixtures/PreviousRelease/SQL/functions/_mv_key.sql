-- A member name appended to a field: .name, or ["odd name"].
-- Its own search_path, as every herald function's: called with any other, no function or
-- operator of another schema can stand in for a built-in it uses.
CREATE OR REPLACE FUNCTION herald._mv_key(k text, words jsonb, vmax integer) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT CASE WHEN k ~ '^[A-Za-z0-9_-]+$' AND octet_length(k) <= vmax THEN '.' || k
                ELSE '[' || herald._mv_quote(k, words, vmax) || ']' END
$fn$;
