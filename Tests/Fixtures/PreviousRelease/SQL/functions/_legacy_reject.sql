-- A rejection as _legacy_translate returns it.
CREATE OR REPLACE FUNCTION herald._legacy_reject(code text, path text, reason text) RETURNS jsonb
LANGUAGE sql IMMUTABLE PARALLEL SAFE SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT jsonb_build_object('error', jsonb_build_object('code', code, 'path', path, 'reason', reason))
$fn$;
