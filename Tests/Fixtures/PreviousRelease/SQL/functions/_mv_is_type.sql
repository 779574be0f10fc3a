-- Its own search_path, as every herald function's: called with any other, no function or
-- operator of another schema can stand in for a built-in it uses.
CREATE OR REPLACE FUNCTION herald._mv_is_type(v jsonb, type_name text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT CASE type_name
        WHEN 'integer' THEN CASE WHEN jsonb_typeof(v) = 'number' THEN v::numeric = trunc(v::numeric) ELSE false END
        WHEN 'boolean' THEN jsonb_typeof(v) = 'boolean'
        ELSE jsonb_typeof(v) = type_name
    END
$fn$;
