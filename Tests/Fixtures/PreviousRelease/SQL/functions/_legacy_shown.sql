-- A value as a reason shows it: compact JSON cut at 40 characters.
CREATE OR REPLACE FUNCTION herald._legacy_shown(v jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT CASE WHEN char_length(herald._legacy_compact(v)) <= 40 THEN herald._legacy_compact(v)
                ELSE left(herald._legacy_compact(v), 40) || '...' END
$fn$;
