-- Payload bytes of a value: member names and strings in UTF-8 bytes, numbers as their plain
-- decimal text, true 4, false 5, null 4. Iterative, so no nesting depth can exhaust the stack.
-- No SET clause, so PostgreSQL can inline it into validate_message (which pins search_path);
-- it uses only pg_catalog functions and operators, found first on any search_path.
CREATE OR REPLACE FUNCTION herald._mv_size(v jsonb) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
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
