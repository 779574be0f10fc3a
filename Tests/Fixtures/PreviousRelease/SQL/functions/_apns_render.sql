-- A value shown in an APNs validation issue: JSON-quoted, cut after `max_characters` characters
-- with … (APNsMessageRules.render in Swift).
CREATE OR REPLACE FUNCTION herald._apns_render(value text, max_characters integer) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT to_jsonb(left(value, max_characters))::text || CASE WHEN char_length(value) > max_characters THEN '…' ELSE '' END
$fn$;
