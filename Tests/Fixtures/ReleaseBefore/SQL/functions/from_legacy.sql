-- at: the clock for apns-expiration (now + time_to_live); the worker computes it again on each
-- attempt for rows it sends, so this value only shows what a request built at that time carries.
CREATE OR REPLACE FUNCTION herald.from_legacy(payload jsonb, at timestamptz DEFAULT now()) RETURNS jsonb
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT herald._legacy_raise(herald._legacy_translate(payload, floor(extract(epoch FROM coalesce(at, now())))::bigint))
$fn$;
