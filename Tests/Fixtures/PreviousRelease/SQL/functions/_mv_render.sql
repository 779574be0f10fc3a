-- A value as descriptions show it.
-- Its own search_path, as every herald function's: called with any other, no function or
-- operator of another schema can stand in for a built-in it uses.
CREATE OR REPLACE FUNCTION herald._mv_render(v jsonb, words jsonb, vmax integer) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE SET search_path = pg_catalog, pg_temp
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
