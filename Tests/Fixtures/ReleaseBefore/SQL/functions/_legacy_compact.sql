-- Compact JSON text as JSON.stringify writes it (and the Swift side): no spaces, members in
-- jsonb's order, strings escaped by to_json.
CREATE OR REPLACE FUNCTION herald._legacy_compact(v jsonb) RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    CASE jsonb_typeof(v)
    WHEN 'object' THEN
        RETURN '{' || coalesce((SELECT string_agg(to_json(e.key)::text || ':' || herald._legacy_compact(e.value), ',' ORDER BY e.o)
                                FROM jsonb_each(v) WITH ORDINALITY AS e(key, value, o)), '') || '}';
    WHEN 'array' THEN
        RETURN '[' || coalesce((SELECT string_agg(herald._legacy_compact(e.value), ',' ORDER BY e.o)
                                FROM jsonb_array_elements(v) WITH ORDINALITY AS e(value, o)), '') || ']';
    WHEN 'string' THEN
        RETURN to_json(v #>> '{}')::text;
    ELSE
        RETURN v::text;
    END CASE;
END
$fn$;
