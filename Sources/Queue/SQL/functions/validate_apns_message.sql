-- Every issue of an APNs message (a message with apns_token, for Apple's provider API) under the
-- loaded rules (herald.apns_rules, from Sources/FCM/Rules/apns-rules.json), as `field: reason`
-- in the rule file's order; '{}' when it may be sent. The same answers, word for word, as
-- APNsMessageRules.validate in Swift. A SQL NULL is judged as JSON null.
CREATE OR REPLACE FUNCTION herald.validate_apns_message(message jsonb) RETURNS text[]
LANGUAGE plpgsql STABLE PARALLEL SAFE
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    def jsonb;
    texts jsonb;
    vmax integer;
    issues text[] := '{}';
    target text;
    token jsonb;
    s text;
    apns jsonb;
    headers jsonb;
    payload jsonb;
    aps jsonb;
    k text;
    v jsonb;
    push_type jsonb;
    push_name text;
    priority text;
    field jsonb;
    size bigint;
BEGIN
    SELECT r.definition INTO def FROM herald.apns_rules AS r WHERE r.id;
    IF def IS NULL THEN
        RAISE EXCEPTION 'herald.validate_apns_message: no APNs rules are loaded'
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'Run herald migrate; it loads the rules of the installed Herald.';
    END IF;
    message := coalesce(message, 'null'::jsonb);
    texts := def -> 'messages';
    vmax := (def ->> 'value_max_characters')::integer;

    IF jsonb_typeof(message) <> 'object' THEN
        RETURN ARRAY['message: ' || herald._mv_fill(texts ->> 'message.type', jsonb_build_object('type', jsonb_typeof(message)))];
    END IF;
    FOR target IN SELECT t FROM jsonb_array_elements_text(def -> 'fcm_targets') WITH ORDINALITY AS x(t, o) ORDER BY o LOOP
        IF coalesce(jsonb_typeof(message -> target), 'null') <> 'null' THEN
            issues := issues || ('message.' || target || ': ' || herald._mv_fill(texts ->> 'fcm_target', jsonb_build_object('field', target)));
        END IF;
    END LOOP;

    token := nullif(message -> (def -> 'token' ->> 'field'), 'null'::jsonb);
    IF token IS NULL THEN
        issues := issues || ('message.' || (def -> 'token' ->> 'field') || ': ' || (texts ->> 'token.required'));
    ELSIF jsonb_typeof(token) <> 'string' THEN
        issues := issues || ('message.' || (def -> 'token' ->> 'field') || ': '
                             || herald._mv_fill(texts ->> 'token.type', jsonb_build_object('type', jsonb_typeof(token))));
    ELSE
        s := token #>> '{}';
        IF s !~ '^[0-9A-Fa-f]*$' OR octet_length(s) < (def -> 'token' ->> 'min_hex_digits')::integer THEN
            issues := issues || ('message.' || (def -> 'token' ->> 'field') || ': '
                                 || herald._mv_fill(texts ->> 'token.shape', jsonb_build_object(
                                        'min', def -> 'token' ->> 'min_hex_digits', 'length', char_length(s)::text)));
        END IF;
    END IF;

    apns := nullif(message -> 'apns', 'null'::jsonb);
    IF apns IS NULL THEN
        RETURN issues || ('message.apns: ' || (texts ->> 'apns.required'));
    ELSIF jsonb_typeof(apns) <> 'object' THEN
        RETURN issues || ('message.apns: ' || herald._mv_fill(texts ->> 'object.type', jsonb_build_object('type', jsonb_typeof(apns))));
    END IF;
    FOR k IN SELECT e.key FROM jsonb_each(apns) AS e
             WHERE NOT (e.key = ANY (ARRAY(SELECT jsonb_array_elements_text(def -> 'apns_fields'))))
             ORDER BY e.key COLLATE "C" LOOP
        issues := issues || ('message.apns' || herald._apns_member(k) || ': ' || herald._mv_fill(texts ->> 'apns.unknown',
            jsonb_build_object('fields', (SELECT string_agg(t, ', ' ORDER BY o)
                                          FROM jsonb_array_elements_text(def -> 'apns_fields') WITH ORDINALITY AS x(t, o)))));
    END LOOP;

    push_name := def ->> 'default_push_type';
    headers := nullif(apns -> 'headers', 'null'::jsonb);
    IF headers IS NOT NULL AND jsonb_typeof(headers) <> 'object' THEN
        issues := issues || ('message.apns.headers: ' || herald._mv_fill(texts ->> 'object.type', jsonb_build_object('type', jsonb_typeof(headers))));
    ELSIF headers IS NOT NULL THEN
        FOR k, v IN SELECT e.key, e.value FROM jsonb_each(headers) AS e
                    WHERE jsonb_typeof(e.value) NOT IN ('string', 'null') ORDER BY e.key COLLATE "C" LOOP
            issues := issues || ('message.apns.headers' || herald._apns_member(k) || ': '
                                 || herald._mv_fill(texts ->> 'header.type', jsonb_build_object('type', jsonb_typeof(v))));
        END LOOP;
        v := nullif(headers -> (def ->> 'push_type_header'), 'null'::jsonb);
        IF v IS NOT NULL THEN
            push_name := CASE WHEN jsonb_typeof(v) = 'string' THEN v #>> '{}' END;
            IF push_name IS NOT NULL AND NOT EXISTS (SELECT 1 FROM jsonb_array_elements(def -> 'push_types') AS t(e) WHERE t.e ->> 'name' = push_name) THEN
                issues := issues || ('message.apns.headers.' || (def ->> 'push_type_header') || ': ' || herald._mv_fill(texts ->> 'push_type.unknown',
                    jsonb_build_object('value', herald._apns_render(push_name, vmax),
                                       'allowed', (SELECT string_agg(t.e ->> 'name', ', ' ORDER BY o)
                                                   FROM jsonb_array_elements(def -> 'push_types') WITH ORDINALITY AS t(e, o)))));
            END IF;
        END IF;
        SELECT t.e INTO push_type FROM jsonb_array_elements(def -> 'push_types') AS t(e) WHERE t.e ->> 'name' = push_name;
        v := headers -> (def ->> 'priority_header');
        IF jsonb_typeof(v) = 'string' THEN
            priority := v #>> '{}';
            IF NOT (priority = ANY (ARRAY(SELECT jsonb_array_elements_text(def -> 'priorities')))) THEN
                issues := issues || ('message.apns.headers.' || (def ->> 'priority_header') || ': ' || herald._mv_fill(texts ->> 'priority.unknown',
                    jsonb_build_object('value', herald._apns_render(priority, vmax),
                                       'allowed', (SELECT string_agg(t, ', ' ORDER BY o)
                                                   FROM jsonb_array_elements_text(def -> 'priorities') WITH ORDINALITY AS x(t, o)))));
            ELSIF push_type ? 'priorities' AND NOT (priority = ANY (ARRAY(SELECT jsonb_array_elements_text(push_type -> 'priorities')))) THEN
                issues := issues || ('message.apns.headers.' || (def ->> 'priority_header') || ': ' || herald._mv_fill(texts ->> 'priority.push_type',
                    jsonb_build_object('value', herald._apns_render(priority, vmax), 'push_type', push_name,
                                       'allowed', (SELECT string_agg(t, ', ' ORDER BY o)
                                                   FROM jsonb_array_elements_text(push_type -> 'priorities') WITH ORDINALITY AS x(t, o)))));
            END IF;
        END IF;
    END IF;
    IF push_type IS NULL AND push_name IS NOT NULL THEN
        SELECT t.e INTO push_type FROM jsonb_array_elements(def -> 'push_types') AS t(e) WHERE t.e ->> 'name' = push_name;
    END IF;

    payload := nullif(apns -> 'payload', 'null'::jsonb);
    IF payload IS NULL THEN
        RETURN issues || ('message.apns.payload: ' || (texts ->> 'payload.required'));
    ELSIF jsonb_typeof(payload) <> 'object' THEN
        RETURN issues || ('message.apns.payload: ' || herald._mv_fill(texts ->> 'object.type', jsonb_build_object('type', jsonb_typeof(payload))));
    END IF;
    aps := nullif(payload -> 'aps', 'null'::jsonb);
    IF aps IS NULL THEN
        RETURN issues || ('message.apns.payload.aps: ' || (texts ->> 'aps.required'));
    ELSIF jsonb_typeof(aps) = 'object' THEN
        FOR k IN SELECT t FROM jsonb_array_elements_text(coalesce(push_type -> 'aps_required', '[]'::jsonb)) WITH ORDINALITY AS x(t, o)
                 WHERE coalesce(jsonb_typeof(aps -> t), 'null') = 'null' ORDER BY o LOOP
            issues := issues || ('message.apns.payload.aps.' || k || ': '
                                 || herald._mv_fill(texts ->> 'aps_field.required', jsonb_build_object('push_type', push_name)));
        END LOOP;
        FOR field IN SELECT e FROM jsonb_array_elements(def -> 'aps_fields') WITH ORDINALITY AS x(e, o) ORDER BY o LOOP
            v := nullif(aps -> (field ->> 'name'), 'null'::jsonb);
            CONTINUE WHEN v IS NULL;
            IF field ->> 'type' = 'string' THEN
                IF jsonb_typeof(v) <> 'string' THEN
                    issues := issues || ('message.apns.payload.aps.' || (field ->> 'name') || ': '
                                         || herald._mv_fill(texts ->> 'aps_field.string', jsonb_build_object('type', jsonb_typeof(v))));
                ELSIF field ? 'values' AND NOT ((v #>> '{}') = ANY (ARRAY(SELECT jsonb_array_elements_text(field -> 'values')))) THEN
                    issues := issues || ('message.apns.payload.aps.' || (field ->> 'name') || ': ' || herald._mv_fill(texts ->> 'aps_field.enum',
                        jsonb_build_object('value', herald._apns_render(v #>> '{}', vmax),
                                           'allowed', (SELECT string_agg(t, ', ' ORDER BY o)
                                                       FROM jsonb_array_elements_text(field -> 'values') WITH ORDINALITY AS x(t, o)))));
                END IF;
            ELSIF jsonb_typeof(v) <> 'number' OR v::text !~ '^-?[0-9]+$' THEN
                issues := issues || ('message.apns.payload.aps.' || (field ->> 'name') || ': '
                                     || herald._mv_fill(texts ->> 'aps_field.integer', jsonb_build_object('type', jsonb_typeof(v))));
            END IF;
        END LOOP;
    ELSE
        issues := issues || ('message.apns.payload.aps: ' || herald._mv_fill(texts ->> 'object.type', jsonb_build_object('type', jsonb_typeof(aps))));
    END IF;
    IF push_type IS NOT NULL THEN
        size := herald._apns_payload_bytes(payload);
        IF size > (push_type ->> 'max_payload_bytes')::bigint THEN
            issues := issues || ('message.apns.payload: ' || herald._mv_fill(texts ->> 'payload.size',
                jsonb_build_object('size', size::text, 'max', push_type ->> 'max_payload_bytes', 'push_type', push_name)));
        END IF;
    END IF;
    RETURN issues;
END
$fn$;

COMMENT ON FUNCTION herald.validate_apns_message(jsonb) IS
    'Issues of an APNs message (with apns_token; empty when it may be sent); the same answers as Herald''s worker.';
