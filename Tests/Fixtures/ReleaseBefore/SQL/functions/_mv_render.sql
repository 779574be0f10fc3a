-- A value as descriptions show it.
-- No SET clause, so PostgreSQL can inline it into validate_message (which pins search_path);
-- it uses only pg_catalog functions and operators, found first on any search_path.
CREATE OR REPLACE FUNCTION herald._mv_render(v jsonb, words jsonb, vmax integer) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $fn$
    SELECT CASE jsonb_typeof(v)
        WHEN 'string' THEN herald._mv_quote(v #>> '{}', words, vmax)
        WHEN 'number' THEN herald._mv_cut(v::text, words, vmax)
        WHEN 'boolean' THEN v::text
        WHEN 'null' THEN 'null'
        WHEN 'object' THEN words ->> 'an_object'
        ELSE words ->> 'an_array'
    END
$fn$;
