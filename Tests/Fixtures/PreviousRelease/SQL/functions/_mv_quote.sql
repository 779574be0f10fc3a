-- s cut and quoted as a JSON string (the Swift side escapes exactly like to_json).
-- Its own search_path, as every herald function's: called with any other, no function or
-- operator of another schema can stand in for a built-in it uses.
CREATE OR REPLACE FUNCTION herald._mv_quote(s text, words jsonb, vmax integer) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT to_json(herald._mv_cut(s, words, vmax))::text
$fn$;
