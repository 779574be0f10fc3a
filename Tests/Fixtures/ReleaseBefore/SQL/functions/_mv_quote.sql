-- s cut and quoted as a JSON string (the Swift side escapes exactly like to_json).
-- No SET clause, so PostgreSQL can inline it into validate_message (which pins search_path);
-- it uses only pg_catalog functions and operators, found first on any search_path.
CREATE OR REPLACE FUNCTION herald._mv_quote(s text, words jsonb, vmax integer) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $fn$
    SELECT to_json(herald._mv_cut(s, words, vmax))::text
$fn$;
