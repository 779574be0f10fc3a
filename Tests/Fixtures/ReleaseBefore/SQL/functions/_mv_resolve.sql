-- The value at a dot-separated path below message; NULL when absent or JSON null.
-- No SET clause, so PostgreSQL can inline it into validate_message (which pins search_path);
-- it uses only pg_catalog functions and operators, found first on any search_path.
CREATE OR REPLACE FUNCTION herald._mv_resolve(message jsonb, path text) RETURNS jsonb
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $fn$
    SELECT CASE WHEN jsonb_typeof(x) = 'null' THEN NULL ELSE x END
    FROM (SELECT message #> string_to_array(path, '.') AS x) AS resolved
$fn$;
