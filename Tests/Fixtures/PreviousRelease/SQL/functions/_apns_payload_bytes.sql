-- Bytes of a value as compact JSON, as Herald's sender writes an APNs payload (no space between
-- tokens; in strings \n \r \t \" \\ as two bytes and the other control characters as \u00XX):
-- jsonb's own text less the space it writes after each ':' and ',', plus 4 for each backspace
-- or form feed (jsonb writes \b and \f, the sender \u0008 and \u000c). Iterative, so no nesting
-- depth can exhaust the stack.
CREATE OR REPLACE FUNCTION herald._apns_payload_bytes(v jsonb) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE SET search_path = pg_catalog, pg_temp
AS $fn$
    WITH RECURSIVE walk(item) AS (
        SELECT v
        UNION ALL
        SELECT child.value
        FROM walk,
             LATERAL (SELECT value FROM jsonb_each(CASE WHEN jsonb_typeof(walk.item) = 'object' THEN walk.item END)
                      UNION ALL
                      SELECT value FROM jsonb_array_elements(CASE WHEN jsonb_typeof(walk.item) = 'array' THEN walk.item END)
                     ) AS child
    )
    SELECT octet_length(v::text) - coalesce(sum(CASE jsonb_typeof(item)
        WHEN 'object' THEN greatest(2 * (SELECT count(*) FROM jsonb_object_keys(item)) - 1, 0)
                           - 4 * (SELECT coalesce(sum(char_length(k) - char_length(translate(k, chr(8) || chr(12), ''))), 0)
                                  FROM jsonb_object_keys(item) AS k)
        WHEN 'array' THEN greatest(jsonb_array_length(item) - 1, 0)
        WHEN 'string' THEN -4 * (char_length(item #>> '{}') - char_length(translate(item #>> '{}', chr(8) || chr(12), '')))
        ELSE 0
    END), 0)::bigint
    FROM walk
$fn$;
