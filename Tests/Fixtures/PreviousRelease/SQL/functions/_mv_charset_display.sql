-- The charset as descriptions show it: [a-z0-9_].
-- Its own search_path, as every herald function's: called with any other, no function or
-- operator of another schema can stand in for a built-in it uses.
CREATE OR REPLACE FUNCTION herald._mv_charset_display(charset jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT '[' || string_agg(e, '' ORDER BY o) || ']'
    FROM jsonb_array_elements_text(charset) WITH ORDINALITY AS x(e, o)
$fn$;
