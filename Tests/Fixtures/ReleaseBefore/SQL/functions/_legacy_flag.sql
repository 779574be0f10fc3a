-- true/false or 1/0; NULL for anything else.
CREATE OR REPLACE FUNCTION herald._legacy_flag(v jsonb) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $fn$
    SELECT CASE jsonb_typeof(v)
           WHEN 'boolean' THEN (v #>> '{}')::boolean
           WHEN 'number' THEN CASE (v #>> '{}')::numeric WHEN 1 THEN true WHEN 0 THEN false END
           END
$fn$;
