-- The first vmax characters of s, marked when cut.
-- No SET clause, so PostgreSQL can inline it into validate_message (which pins search_path);
-- it uses only pg_catalog functions and operators, found first on any search_path.
CREATE OR REPLACE FUNCTION herald._mv_cut(s text, words jsonb, vmax integer) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $fn$
    SELECT CASE WHEN char_length(s) > vmax THEN left(s, vmax) || (words ->> 'truncated') ELSE s END
$fn$;
