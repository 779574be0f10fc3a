-- Stores the APNs message rules (Sources/FCM/Rules/apns-rules.json; herald migrate passes the
-- binary's own on every run) after checking this database understands their format.
CREATE OR REPLACE FUNCTION herald.load_apns_rules(new_rules jsonb) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF jsonb_typeof(new_rules) IS DISTINCT FROM 'object'
       OR jsonb_typeof(new_rules -> 'push_types') IS DISTINCT FROM 'array'
       OR jsonb_typeof(new_rules -> 'messages') IS DISTINCT FROM 'object' THEN
        RAISE EXCEPTION 'herald.load_apns_rules: expected an object with "push_types" and "messages"'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF new_rules -> 'format' IS DISTINCT FROM '1'::jsonb THEN
        RAISE EXCEPTION 'herald.load_apns_rules: rule format % is not the format 1 this database understands',
            coalesce(new_rules ->> 'format', 'missing')
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Run the herald migrate of the same release as these rules.';
    END IF;
    INSERT INTO herald.apns_rules AS r (id, definition, fcm_targets, apns_fields, priorities, push_types, aps_field_names,
                                        header_names, bounded_header_names, loaded_at)
    VALUES (true, new_rules,
            ARRAY(SELECT jsonb_array_elements_text(new_rules -> 'fcm_targets')),
            ARRAY(SELECT jsonb_array_elements_text(new_rules -> 'apns_fields')),
            ARRAY(SELECT jsonb_array_elements_text(new_rules -> 'priorities')),
            (SELECT jsonb_object_agg(t.e ->> 'name', t.e) FROM jsonb_array_elements(new_rules -> 'push_types') AS t(e)),
            ARRAY(SELECT f.e ->> 'name' FROM jsonb_array_elements(new_rules -> 'aps_fields') AS f(e)),
            ARRAY(SELECT h.e ->> 'name' FROM jsonb_array_elements(new_rules -> 'headers') AS h(e)),
            ARRAY(SELECT h.e ->> 'name' FROM jsonb_array_elements(new_rules -> 'headers') AS h(e) WHERE h.e ? 'message'),
            now())
    ON CONFLICT (id) DO UPDATE
        SET definition = excluded.definition, fcm_targets = excluded.fcm_targets, apns_fields = excluded.apns_fields,
            priorities = excluded.priorities, push_types = excluded.push_types, aps_field_names = excluded.aps_field_names,
            header_names = excluded.header_names, bounded_header_names = excluded.bounded_header_names,
            loaded_at = excluded.loaded_at
        WHERE r.definition IS DISTINCT FROM excluded.definition;
END
$fn$;
