-- The charset as descriptions show it: [a-z0-9_].
-- No SET clause, so PostgreSQL can inline it into validate_message (which pins search_path);
-- it uses only pg_catalog functions and operators, found first on any search_path.
CREATE OR REPLACE FUNCTION herald._mv_charset_display(charset jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $fn$
    SELECT '[' || string_agg(e, '' ORDER BY o) || ']'
    FROM jsonb_array_elements_text(charset) WITH ORDINALITY AS x(e, o)
$fn$;
