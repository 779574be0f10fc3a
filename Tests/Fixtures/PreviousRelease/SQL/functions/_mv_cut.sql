-- The first vmax characters of s, marked when cut.
-- Its own search_path, as every herald function's: called with any other, no function or
-- operator of another schema can stand in for a built-in it uses.
CREATE OR REPLACE FUNCTION herald._mv_cut(s text, words jsonb, vmax integer) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT CASE WHEN char_length(s) > vmax THEN left(s, vmax) || (words ->> 'truncated') ELSE s END
$fn$;
