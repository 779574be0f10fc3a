-- Stores a rule list after checking this interpreter understands every part of it.
CREATE OR REPLACE FUNCTION herald.load_message_rules(new_rules jsonb) RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    unknown text;
BEGIN
    IF jsonb_typeof(new_rules) IS DISTINCT FROM 'object'
       OR jsonb_typeof(new_rules -> 'rules') IS DISTINCT FROM 'array' THEN
        RAISE EXCEPTION 'herald.load_message_rules: expected an object with a "rules" list'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF new_rules -> 'format' IS DISTINCT FROM '1'::jsonb THEN
        RAISE EXCEPTION 'herald.load_message_rules: rule format % is not the format 1 this database understands',
            coalesce(new_rules ->> 'format', 'missing')
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Run the herald migrate of the same release as these rules; it installs the matching interpreter.';
    END IF;
    SELECT r ->> 'check' INTO unknown
    FROM jsonb_array_elements(new_rules -> 'rules') AS x(r)
    WHERE r ? 'check' AND NOT (r ->> 'check' = ANY (ARRAY[
        'one_target', 'nonempty', 'enum', 'charset', 'topic', 'condition', 'duration', 'color',
        'https_url', 'max_bytes', 'data_map', 'string_map', 'string_array', 'payload_size', 'known_fields']))
    LIMIT 1;
    IF unknown IS NOT NULL THEN
        RAISE EXCEPTION 'herald.load_message_rules: unknown rule check "%"', unknown
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'The rules are newer than this database''s interpreter; run the matching herald migrate.';
    END IF;
    IF EXISTS (SELECT 1 FROM herald.message_rules AS m WHERE m.id AND m.definition = new_rules) THEN
        RETURN;
    END IF;
    INSERT INTO herald.message_rules AS m (id, format, definition, loaded_at)
    VALUES (true, 1, new_rules, now())
    ON CONFLICT (id) DO UPDATE
        SET format = excluded.format, definition = excluded.definition, loaded_at = excluded.loaded_at;
    DELETE FROM herald.message_rule_steps;
    INSERT INTO herald.message_rule_steps (position, path, parent, field, presence, types, check_kind, has_when, rule)
    SELECT x.o, p.path, p.path[1 : cardinality(p.path) - 1],
           CASE WHEN cardinality(p.path) = 0 THEN 'message' ELSE 'message.' || (x.r ->> 'path') END,
           x.r ->> 'presence',
           CASE WHEN NOT x.r ? 'type' THEN NULL
                WHEN jsonb_typeof(x.r -> 'type') = 'string' THEN ARRAY[x.r ->> 'type']
                ELSE ARRAY(SELECT jsonb_array_elements_text(x.r -> 'type')) END,
           x.r ->> 'check', x.r ? 'when', x.r
    FROM jsonb_array_elements(new_rules -> 'rules') WITH ORDINALITY AS x(r, o),
         LATERAL (SELECT CASE WHEN x.r ->> 'path' = '' THEN '{}'::text[]
                              ELSE string_to_array(x.r ->> 'path', '.') END AS path) AS p;
END
$fn$;
