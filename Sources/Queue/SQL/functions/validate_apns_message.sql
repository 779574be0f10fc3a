-- Every issue of an APNs message (a message with apns_token, for Apple's provider API) under the
-- loaded rules (herald.apns_rules, from Sources/FCM/Rules/apns-rules.json), as `field: reason`
-- in the rule file's order; '{}' when it may be sent. The same answers, word for word, as
-- APNsMessageRules.validate in Swift. A SQL NULL is judged as JSON null. Each rule is first
-- judged with operators on the lists herald.apns_rules keeps beside the definition, and only a
-- rule that fails runs the queries that name its fields: a message that passes costs one read
-- of the rules, since every APNs job written passes through here (trigger jobs_apns).
CREATE OR REPLACE FUNCTION herald.validate_apns_message(message jsonb) RETURNS text[]
LANGUAGE plpgsql STABLE PARALLEL SAFE
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    def jsonb;
    targets text[];
    known_apns text[];
    known_priorities text[];
    types jsonb;
    aps_names text[];
    header_list text[];
    bounded_headers text[];
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
    -- The definition is stored uncompressed (migration 335): read once here, each operator
    -- below reads it in place rather than decompressing all of it again.
    SELECT r.definition, r.fcm_targets, r.apns_fields, r.priorities, r.push_types, r.aps_field_names,
           r.header_names, r.bounded_header_names
    INTO def, targets, known_apns, known_priorities, types, aps_names, header_list, bounded_headers
    FROM herald.apns_rules AS r WHERE r.id;
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
    IF message ?| targets THEN
        FOREACH target IN ARRAY targets LOOP
            IF coalesce(jsonb_typeof(message -> target), 'null') <> 'null' THEN
                issues := issues || ('message.' || target || ': ' || herald._mv_fill(texts ->> 'fcm_target', jsonb_build_object('field', target)));
            END IF;
        END LOOP;
    END IF;

    token := nullif(message -> (def -> 'token' ->> 'field'), 'null'::jsonb);
    IF token IS NULL THEN
        issues := issues || ('message.' || (def -> 'token' ->> 'field') || ': ' || (texts ->> 'token.required'));
    ELSIF jsonb_typeof(token) <> 'string' THEN
        issues := issues || ('message.' || (def -> 'token' ->> 'field') || ': '
                             || herald._mv_fill(texts ->> 'token.type', jsonb_build_object('type', jsonb_typeof(token))));
    ELSE
        s := token #>> '{}';
        IF s !~ '^[0-9A-Fa-f]*$' OR octet_length(s) < (def -> 'token' ->> 'min_hex_digits')::integer
           OR octet_length(s) > (def -> 'token' ->> 'max_hex_digits')::integer OR octet_length(s) % 2 <> 0 THEN
            issues := issues || ('message.' || (def -> 'token' ->> 'field') || ': '
                                 || herald._mv_fill(texts ->> 'token.shape', jsonb_build_object(
                                        'min', def -> 'token' ->> 'min_hex_digits', 'max', def -> 'token' ->> 'max_hex_digits',
                                        'length', char_length(s)::text)));
        END IF;
    END IF;

    apns := nullif(message -> 'apns', 'null'::jsonb);
    IF apns IS NULL THEN
        RETURN issues || ('message.apns: ' || (texts ->> 'apns.required'));
    ELSIF jsonb_typeof(apns) <> 'object' THEN
        RETURN issues || ('message.apns: ' || herald._mv_fill(texts ->> 'object.type', jsonb_build_object('type', jsonb_typeof(apns))));
    END IF;
    IF (apns - known_apns) <> '{}'::jsonb THEN
        FOR k IN SELECT e.key FROM jsonb_each(apns - known_apns) AS e ORDER BY e.key COLLATE "C" LOOP
            issues := issues || ('message.apns' || herald._apns_member(k) || ': ' || herald._mv_fill(texts ->> 'apns.unknown',
                jsonb_build_object('fields', array_to_string(known_apns, ', '))));
        END LOOP;
    END IF;

    push_name := def ->> 'default_push_type';
    headers := nullif(apns -> 'headers', 'null'::jsonb);
    IF headers IS NOT NULL AND jsonb_typeof(headers) <> 'object' THEN
        issues := issues || ('message.apns.headers: ' || herald._mv_fill(texts ->> 'object.type', jsonb_build_object('type', jsonb_typeof(headers))));
    ELSIF headers IS NOT NULL THEN
        -- Only a message naming a header the rules do not list, or one the rules bound, or giving
        -- a value that is not a string, has its headers judged one by one.
        IF (headers - header_list) <> '{}'::jsonb OR headers ?| bounded_headers
           OR jsonb_path_exists(headers, '$.* ? (@.type() != "string" && @.type() != "null")') THEN
            FOR k, s IN SELECT e.key, herald._apns_header_reason(def, e.key, e.value) FROM jsonb_each(headers) AS e
                        WHERE jsonb_typeof(e.value) <> 'null' ORDER BY e.key COLLATE "C" LOOP
                CONTINUE WHEN s IS NULL;
                issues := issues || ('message.apns.headers' || herald._apns_member(k) || ': ' || s);
            END LOOP;
        END IF;
        v := nullif(headers -> (def ->> 'push_type_header'), 'null'::jsonb);
        IF v IS NOT NULL THEN
            push_name := CASE WHEN jsonb_typeof(v) = 'string' THEN v #>> '{}' END;
            IF push_name IS NOT NULL AND NOT types ? push_name THEN
                s := (SELECT n ->> 'why' FROM jsonb_array_elements(def -> 'push_types_not_sent') AS n WHERE n ->> 'name' = push_name);
                issues := issues || ('message.apns.headers.' || (def ->> 'push_type_header') || ': ' || herald._mv_fill(
                    texts ->> CASE WHEN s IS NULL THEN 'push_type.unknown' ELSE 'push_type.not_sent' END,
                    jsonb_build_object('value', herald._apns_render(push_name, vmax), 'why', coalesce(s, ''),
                                       'allowed', (SELECT string_agg(t.e ->> 'name', ', ' ORDER BY o)
                                                   FROM jsonb_array_elements(def -> 'push_types') WITH ORDINALITY AS t(e, o)))));
            END IF;
        END IF;
        push_type := types -> push_name;
        v := headers -> (def ->> 'priority_header');
        IF jsonb_typeof(v) = 'string' THEN
            priority := v #>> '{}';
            IF NOT (priority = ANY (known_priorities)) THEN
                issues := issues || ('message.apns.headers.' || (def ->> 'priority_header') || ': ' || herald._mv_fill(texts ->> 'priority.unknown',
                    jsonb_build_object('value', herald._apns_render(priority, vmax), 'allowed', array_to_string(known_priorities, ', '))));
            ELSIF push_type ? 'priorities' AND NOT ((push_type -> 'priorities') ? priority) THEN
                issues := issues || ('message.apns.headers.' || (def ->> 'priority_header') || ': ' || herald._mv_fill(texts ->> 'priority.push_type',
                    jsonb_build_object('value', herald._apns_render(priority, vmax), 'push_type', push_name,
                                       'allowed', (SELECT string_agg(t, ', ' ORDER BY o)
                                                   FROM jsonb_array_elements_text(push_type -> 'priorities') WITH ORDINALITY AS x(t, o)))));
            END IF;
        END IF;
    END IF;
    IF push_type IS NULL AND push_name IS NOT NULL THEN
        push_type := types -> push_name;
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
        IF push_type ? 'aps_required' THEN
            FOR k IN SELECT t FROM jsonb_array_elements_text(push_type -> 'aps_required') WITH ORDINALITY AS x(t, o)
                     WHERE coalesce(jsonb_typeof(aps -> t), 'null') = 'null' ORDER BY o LOOP
                issues := issues || ('message.apns.payload.aps.' || k || ': '
                                     || herald._mv_fill(texts ->> 'aps_field.required', jsonb_build_object('push_type', push_name)));
            END LOOP;
        END IF;
        IF aps ?| aps_names THEN
            FOR field IN SELECT e FROM jsonb_array_elements(def -> 'aps_fields') WITH ORDINALITY AS x(e, o) ORDER BY o LOOP
                v := nullif(aps -> (field ->> 'name'), 'null'::jsonb);
                CONTINUE WHEN v IS NULL;
                IF field ->> 'type' = 'string' THEN
                    IF jsonb_typeof(v) <> 'string' THEN
                        issues := issues || ('message.apns.payload.aps.' || (field ->> 'name') || ': '
                                             || herald._mv_fill(texts ->> 'aps_field.string', jsonb_build_object('type', jsonb_typeof(v))));
                    ELSIF field ? 'values' AND NOT ((field -> 'values') ? (v #>> '{}')) THEN
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
        END IF;
    ELSE
        issues := issues || ('message.apns.payload.aps: ' || herald._mv_fill(texts ->> 'object.type', jsonb_build_object('type', jsonb_typeof(aps))));
    END IF;
    -- jsonb's text is the compact JSON plus a space after each ':' and ',', less 4 bytes for
    -- each \b or \f (the sender writes \u0008 and \u000c): within the limit and free of both,
    -- the payload fits without being measured member by member.
    IF push_type IS NOT NULL AND (octet_length(payload::text) > (push_type ->> 'max_payload_bytes')::bigint
                                  OR strpos(payload::text, '\b') > 0 OR strpos(payload::text, '\f') > 0) THEN
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
