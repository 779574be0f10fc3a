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
    INSERT INTO herald.apns_rules AS r (id, definition, loaded_at) VALUES (true, new_rules, now())
    ON CONFLICT (id) DO UPDATE SET definition = excluded.definition, loaded_at = excluded.loaded_at
        WHERE r.definition IS DISTINCT FROM excluded.definition;
END
$fn$;
