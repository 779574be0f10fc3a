-- Payload bytes of a value: member names and strings in UTF-8 bytes, numbers as their plain
-- decimal text, true 4, false 5, null 4. Iterative, so no nesting depth can exhaust the stack.
-- Its own search_path, as every herald function's: called with any other, no function or
-- operator of another schema can stand in for a built-in it uses.
CREATE OR REPLACE FUNCTION herald._mv_size(v jsonb) RETURNS bigint
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
    SELECT coalesce(sum(CASE jsonb_typeof(item)
        WHEN 'string' THEN octet_length(item #>> '{}')
        WHEN 'number' THEN length(item::text)
        WHEN 'boolean' THEN CASE WHEN item = 'true'::jsonb THEN 4 ELSE 5 END
        WHEN 'null' THEN 4
        WHEN 'object' THEN (SELECT coalesce(sum(octet_length(k)), 0) FROM jsonb_object_keys(item) AS k)
        ELSE 0
    END), 0)::bigint
    FROM walk
$fn$;
