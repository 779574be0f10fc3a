-- Every issue of an FCM v1 message object under the loaded rules, in rule order; '{}' when the
-- message may be sent. A SQL NULL is judged as JSON null.
CREATE OR REPLACE FUNCTION herald.validate_message(message jsonb) RETURNS text[]
LANGUAGE plpgsql STABLE PARALLEL SAFE
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    def jsonb;
    words jsonb;
    vmax integer;
    issues text[] := '{}';
    step record;
    rule jsonb;
    type_name text;
    val jsonb;
    field text;
    cond jsonb;
    holds boolean;
    probe jsonb;
    s text;
    k text;
    v jsonb;
    idx bigint;
    found text[];
    problem jsonb;
    key text;
    params jsonb;
    charset jsonb;
    lim bigint;
    largest bigint;
    largest_name text;
    platform jsonb;
    part jsonb;
    alt text;
    size bigint;
    sizes jsonb;
    prefix text;
    known text[];
    suggestion text;
BEGIN
    SELECT r.definition INTO def FROM herald.message_rules AS r WHERE r.id;
    IF def IS NULL THEN
        RAISE EXCEPTION 'herald.validate_message: no message rules are loaded'
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'Run herald migrate; it loads the rules of the installed Herald.';
    END IF;
    message := coalesce(message, 'null'::jsonb);
    words := def -> 'words';
    vmax := coalesce((def ->> 'value_max_characters')::integer, 64);

    -- Only the rules whose parent object exists, and of those only the ones with a value to
    -- judge or a presence to check: a message without an apns block never reads its 40 rules.
    FOR step IN
        SELECT q.* FROM (
            SELECT st.position, st.field, st.presence, st.types, st.check_kind, st.has_when, st.rule,
                   CASE WHEN cardinality(st.path) = 0 THEN message ELSE nullif(message #> st.path, 'null'::jsonb) END AS val
            FROM herald.message_rule_steps AS st
            WHERE cardinality(st.path) = 0 OR jsonb_typeof(message #> st.parent) = 'object'
        ) AS q
        WHERE q.val IS NOT NULL OR q.presence IS NOT NULL
        ORDER BY q.position
    LOOP
        rule := step.rule;
        field := step.field;
        val := step.val;

        IF step.has_when THEN
            holds := true;
            FOR cond IN SELECT e FROM jsonb_array_elements(rule -> 'when') WITH ORDINALITY AS x(e, o) ORDER BY o LOOP
                IF cond ? 'present' THEN
                    holds := herald._mv_resolve(message, cond ->> 'present') IS NOT NULL;
                ELSE
                    probe := herald._mv_resolve(message, cond ->> 'path');
                    IF jsonb_typeof(probe) IS DISTINCT FROM 'string' THEN
                        holds := false;
                    ELSIF cond ? 'in' THEN
                        holds := (probe #>> '{}') = ANY (ARRAY(SELECT jsonb_array_elements_text(cond -> 'in')));
                    ELSE
                        holds := NOT ((probe #>> '{}') = ANY (ARRAY(SELECT jsonb_array_elements_text(cond -> 'not_in'))));
                    END IF;
                END IF;
                EXIT WHEN NOT holds;
            END LOOP;
            CONTINUE WHEN NOT holds;
        END IF;

        IF step.presence = 'required' THEN
            IF val IS NULL THEN
                issues := issues || (field || ': ' || herald._mv_fill(coalesce(rule -> 'messages' ->> 'required', def -> 'messages' ->> 'required', 'required'),
                                     jsonb_build_object('when', rule ->> 'when_text')));
            END IF;
            CONTINUE;
        ELSIF step.presence = 'forbidden' THEN
            IF val IS NOT NULL THEN
                issues := issues || (field || ': ' || herald._mv_fill(coalesce(rule -> 'messages' ->> 'forbidden', def -> 'messages' ->> 'forbidden', 'forbidden'),
                                     jsonb_build_object('when', rule ->> 'when_text')));
            END IF;
            CONTINUE;
        END IF;
        CONTINUE WHEN val IS NULL;

        IF step.types IS NOT NULL THEN
            holds := false;
            FOREACH type_name IN ARRAY step.types LOOP
                IF herald._mv_is_type(val, type_name) THEN
                    holds := true;
                    EXIT;
                END IF;
            END LOOP;
            IF NOT holds THEN
                issues := issues || (field || ': ' || herald._mv_fill(coalesce(rule -> 'messages' ->> 'type', def -> 'messages' ->> 'type', 'type'),
                    jsonb_build_object(
                        'expected', array_to_string(ARRAY(SELECT words ->> t FROM unnest(step.types) WITH ORDINALITY AS u(t, o) ORDER BY o),
                                                    words ->> 'type_separator'),
                        'value', herald._mv_render(val, words, vmax))));
                CONTINUE;
            END IF;
        END IF;

        CONTINUE WHEN step.check_kind IS NULL;
        key := NULL;
        params := '{}'::jsonb;
        s := CASE WHEN jsonb_typeof(val) = 'string' THEN val #>> '{}' END;

        CASE step.check_kind
        WHEN 'one_target' THEN
            IF jsonb_typeof(val) = 'object' THEN
                found := ARRAY(SELECT t FROM jsonb_array_elements_text(rule -> 'targets') WITH ORDINALITY AS x(t, o)
                               WHERE jsonb_typeof(val -> t) IS DISTINCT FROM 'null' AND val ? t ORDER BY o);
                params := jsonb_build_object('targets', (SELECT string_agg(t, words ->> 'list_separator' ORDER BY o)
                                                         FROM jsonb_array_elements_text(rule -> 'targets') WITH ORDINALITY AS x(t, o)),
                                             'found', array_to_string(found, words ->> 'list_separator'));
                IF cardinality(found) = 0 THEN
                    key := 'one_target.none';
                ELSIF cardinality(found) > 1 THEN
                    key := 'one_target.many';
                END IF;
            END IF;

        WHEN 'nonempty' THEN
            IF s = '' THEN key := 'nonempty'; END IF;

        WHEN 'enum' THEN
            IF s IS NOT NULL AND NOT (s = ANY (ARRAY(SELECT jsonb_array_elements_text(rule -> 'values')))) THEN
                key := 'enum';
                params := params || jsonb_build_object('allowed',
                    (SELECT string_agg(to_json(t)::text, words ->> 'list_separator' ORDER BY o)
                     FROM jsonb_array_elements_text(rule -> 'values') WITH ORDINALITY AS x(t, o)));
            END IF;

        WHEN 'charset', 'topic' THEN
            IF s IS NOT NULL THEN
                charset := def -> 'charsets' -> (rule ->> 'charset');
                IF rule ->> 'check' = 'topic' AND left(s, char_length(rule ->> 'prefix')) = (rule ->> 'prefix') THEN
                    key := 'topic.prefix';
                    params := params || jsonb_build_object('prefix', to_json(rule ->> 'prefix')::text);
                ELSIF s !~ herald._mv_charset_regex(charset) THEN
                    key := 'charset';
                    params := params || jsonb_build_object('chars', herald._mv_charset_display(charset));
                ELSIF octet_length(s) < (CASE WHEN rule ->> 'check' = 'topic' THEN 1 ELSE coalesce((rule ->> 'min')::integer, 0) END) THEN
                    key := 'length.short';
                    params := params || jsonb_build_object('min', CASE WHEN rule ->> 'check' = 'topic' THEN '1' ELSE rule ->> 'min' END);
                ELSIF rule ->> 'check' = 'charset' AND rule ? 'max' AND octet_length(s) > (rule ->> 'max')::integer THEN
                    key := 'length.long';
                    params := params || jsonb_build_object('max', rule ->> 'max');
                END IF;
            END IF;

        WHEN 'condition' THEN
            IF s IS NOT NULL THEN
                charset := def -> 'charsets' -> (rule ->> 'charset');
                problem := herald._mv_condition(s, (rule ->> 'max_topics')::integer, herald._mv_charset_regex(charset));
                IF problem IS NOT NULL THEN
                    key := problem ->> 'key';
                    params := params || jsonb_build_object(
                        'position', coalesce(problem ->> 'position', ''),
                        'where', CASE WHEN problem ->> 'position' IS NULL THEN words ->> 'at_end'
                                      ELSE herald._mv_fill(words ->> 'at_position', jsonb_build_object('position', problem ->> 'position')) END,
                        'max', rule ->> 'max_topics',
                        'chars', herald._mv_charset_display(charset));
                    IF problem ? 'topic' THEN
                        params := params || jsonb_build_object('topic', herald._mv_quote(problem ->> 'topic', words, vmax));
                    END IF;
                END IF;
            END IF;

        WHEN 'duration' THEN
            IF s IS NOT NULL THEN
                IF s !~ E'^[0-9]+(\\.[0-9]{1,9})?s$' THEN
                    key := 'duration.format';
                ELSIF left(s, -1)::numeric > (rule ->> 'max')::numeric THEN
                    key := 'duration.range';
                    params := params || jsonb_build_object('max', rule ->> 'max');
                END IF;
            END IF;

        WHEN 'color' THEN
            IF s IS NOT NULL AND s !~ '^#[0-9a-fA-F]{6}$' THEN key := 'color'; END IF;

        WHEN 'https_url' THEN
            IF s IS NOT NULL AND (s !~ '^[Hh][Tt][Tt][Pp][Ss]://[^/?#]' OR s ~ E'[\\u0001-\\u0020\\u007f]') THEN
                key := 'https_url';
            END IF;

        WHEN 'max_bytes' THEN
            IF s IS NOT NULL AND octet_length(s) > (rule ->> 'max')::integer THEN
                key := 'max_bytes';
                params := params || jsonb_build_object('max', rule ->> 'max');
            END IF;

        WHEN 'data_map', 'string_map' THEN
            IF jsonb_typeof(val) = 'object' THEN
                FOR k, v IN SELECT e.key, e.value FROM jsonb_each(val) AS e ORDER BY e.key COLLATE "C" LOOP
                    IF jsonb_typeof(v) <> 'string' THEN
                        issues := issues || (field || herald._mv_key(k, words, vmax) || ': ' ||
                            herald._mv_fill(coalesce(rule -> 'messages' ->> 'type', def -> 'messages' ->> 'type', 'type'),
                                jsonb_build_object('expected', words ->> 'string', 'value', herald._mv_render(v, words, vmax))));
                    ELSIF rule ->> 'check' = 'data_map' THEN
                        IF k = ANY (ARRAY(SELECT jsonb_array_elements_text(rule -> 'reserved'))) THEN
                            issues := issues || (field || herald._mv_key(k, words, vmax) || ': ' ||
                                herald._mv_fill(coalesce(rule -> 'messages' ->> 'reserved_key.name', def -> 'messages' ->> 'reserved_key.name', 'reserved_key.name'),
                                    jsonb_build_object('key', herald._mv_quote(k, words, vmax))));
                        ELSE
                            prefix := (SELECT p FROM jsonb_array_elements_text(rule -> 'reserved_prefixes') WITH ORDINALITY AS x(p, o)
                                       WHERE left(k, char_length(p)) = p ORDER BY o LIMIT 1);
                            IF prefix IS NOT NULL THEN
                                issues := issues || (field || herald._mv_key(k, words, vmax) || ': ' ||
                                    herald._mv_fill(coalesce(rule -> 'messages' ->> 'reserved_key.prefix', def -> 'messages' ->> 'reserved_key.prefix', 'reserved_key.prefix'),
                                        jsonb_build_object('key', herald._mv_quote(k, words, vmax), 'prefix', to_json(prefix)::text)));
                            END IF;
                        END IF;
                    END IF;
                END LOOP;
            END IF;

        WHEN 'string_array' THEN
            IF jsonb_typeof(val) = 'array' THEN
                FOR v, idx IN SELECT e, o - 1 FROM jsonb_array_elements(val) WITH ORDINALITY AS x(e, o) ORDER BY o LOOP
                    IF jsonb_typeof(v) <> 'string' THEN
                        issues := issues || (field || '[' || idx || ']: ' ||
                            herald._mv_fill(coalesce(rule -> 'messages' ->> 'type', def -> 'messages' ->> 'type', 'type'),
                                jsonb_build_object('expected', words ->> 'string', 'value', herald._mv_render(v, words, vmax))));
                    END IF;
                END LOOP;
            END IF;

        WHEN 'known_fields' THEN
            -- Members the rules do not name, unless the operator allowed their path; even a null
            -- one, as FCM refuses a name it does not know whatever its value. In byte order of
            -- the names, as the map checks.
            IF jsonb_typeof(val) = 'object' THEN
                known := ARRAY(SELECT jsonb_array_elements_text(rule -> 'fields'));
                FOR k IN SELECT e.key FROM jsonb_each(val) AS e
                         WHERE NOT (e.key = ANY (known))
                           AND NOT EXISTS (SELECT 1 FROM herald.message_extra_fields AS x WHERE x.path = field || '.' || e.key)
                         ORDER BY e.key COLLATE "C" LOOP
                    suggestion := herald._mv_suggest(k, rule -> 'fields');
                    IF suggestion IS NULL THEN
                        issues := issues || (field || herald._mv_key(k, words, vmax) || ': ' ||
                            herald._mv_fill(coalesce(rule -> 'messages' ->> 'unknown_field', def -> 'messages' ->> 'unknown_field', 'unknown_field'), '{}'::jsonb));
                    ELSE
                        issues := issues || (field || herald._mv_key(k, words, vmax) || ': ' ||
                            herald._mv_fill(coalesce(rule -> 'messages' ->> 'unknown_field.suggest', def -> 'messages' ->> 'unknown_field.suggest', 'unknown_field.suggest'),
                                jsonb_build_object('suggestion', to_json(suggestion)::text)));
                    END IF;
                END LOOP;
            END IF;

        WHEN 'payload_size' THEN
            IF jsonb_typeof(val) = 'object' THEN
                largest := -1;
                sizes := '{}'::jsonb;  -- each distinct part measured once for all platforms; -1 = absent
                FOR platform IN SELECT e FROM jsonb_array_elements(rule -> 'platforms') WITH ORDINALITY AS x(e, o) ORDER BY o LOOP
                    size := 0;
                    FOR part IN SELECT e FROM jsonb_array_elements(platform -> 'parts') WITH ORDINALITY AS x(e, o) ORDER BY o LOOP
                        FOR alt IN SELECT e FROM jsonb_array_elements_text(part) WITH ORDINALITY AS x(e, o) ORDER BY o LOOP
                            IF NOT sizes ? alt THEN
                                probe := herald._mv_resolve(message, alt);
                                sizes := sizes || jsonb_build_object(alt, CASE WHEN probe IS NULL THEN -1 ELSE herald._mv_size(probe) END);
                            END IF;
                            IF (sizes ->> alt)::bigint >= 0 THEN
                                size := size + (sizes ->> alt)::bigint;
                                EXIT;
                            END IF;
                        END LOOP;
                    END LOOP;
                    IF size > largest THEN
                        largest := size;
                        largest_name := platform ->> 'name';
                    END IF;
                END LOOP;
                IF EXISTS (SELECT 1 FROM jsonb_array_elements_text(rule -> 'topic_targets') AS t
                           WHERE val ? t AND jsonb_typeof(val -> t) <> 'null') THEN
                    lim := (rule ->> 'topic_max')::bigint;
                    key := 'payload_size.topic';
                ELSE
                    lim := (rule ->> 'max')::bigint;
                    key := 'payload_size.message';
                END IF;
                IF largest > lim THEN
                    params := jsonb_build_object('platform', largest_name, 'size', largest::text, 'max', lim::text);
                ELSE
                    key := NULL;
                END IF;
            END IF;

        ELSE
            RAISE EXCEPTION 'herald.validate_message: unknown rule check "%"', step.check_kind
                USING ERRCODE = 'object_not_in_prerequisite_state',
                      HINT = 'The loaded rules are newer than this database''s interpreter; run the matching herald migrate.';
        END CASE;

        IF key IS NOT NULL THEN
            params := jsonb_build_object('value', herald._mv_render(val, words, vmax)) || params;
            issues := issues || (field || ': ' || herald._mv_fill(coalesce(rule -> 'messages' ->> key, def -> 'messages' ->> key, key), params));
        END IF;
    END LOOP;
    RETURN issues;
END
$fn$;

COMMENT ON FUNCTION herald.validate_message(jsonb) IS
    'Issues of an FCM v1 message object (empty when it may be sent), unknown fields included; the same answers as Herald''s worker.';
