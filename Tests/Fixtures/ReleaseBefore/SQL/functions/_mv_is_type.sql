-- No SET clause, so PostgreSQL can inline it into validate_message (which pins search_path);
-- it uses only pg_catalog functions and operators, found first on any search_path.
CREATE OR REPLACE FUNCTION herald._mv_is_type(v jsonb, type_name text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $fn$
    SELECT CASE type_name
        WHEN 'integer' THEN CASE WHEN jsonb_typeof(v) = 'number' THEN v::numeric = trunc(v::numeric) ELSE false END
        WHEN 'boolean' THEN jsonb_typeof(v) = 'boolean'
        ELSE jsonb_typeof(v) = type_name
    END
$fn$;
