-- The value at a dot-separated path below message; NULL when absent or JSON null.
-- Its own search_path, as every herald function's: called with any other, no function or
-- operator of another schema can stand in for a built-in it uses.
CREATE OR REPLACE FUNCTION herald._mv_resolve(message jsonb, path text) RETURNS jsonb
LANGUAGE sql IMMUTABLE PARALLEL SAFE SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT CASE WHEN jsonb_typeof(x) = 'null' THEN NULL ELSE x END
    FROM (SELECT message #> string_to_array(path, '.') AS x) AS resolved
$fn$;
