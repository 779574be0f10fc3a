-- Herald: unknown FCM field names are caught before sending, with an allow-list the operator
-- extends when FCM adds a field.
--
-- The rule list (Sources/FCM/Rules/message-rules.json) gains the check `known_fields`: an
-- object such as `android` names its members, and any other member is reported by path with
-- the nearest known name, e.g. `message.android.tll: unknown field; did you mean "ttl"?`.
-- This migration teaches the interpreter of 020 that check: load_message_rules accepts it and
-- validate_message (replaced whole, unchanged otherwise) applies it.
--
-- herald.message_extra_fields is the allow-list. A row `message.android.new_option` lets that
-- member through in the object the rules otherwise close (what is inside it is not checked).
-- validate_message reads the table on every call; each `herald work` process reads it when it
-- starts, so restart the workers after adding a row. Roles that call validate_message also need
-- SELECT on herald.message_extra_fields.

CREATE TABLE IF NOT EXISTS herald.message_extra_fields (
    path text PRIMARY KEY
        CONSTRAINT message_extra_fields_path CHECK (path ~ '^message(\.[A-Za-z0-9_-]+)+$'),
    note text,
    added_at timestamptz NOT NULL DEFAULT now()
);

COMMENT ON TABLE herald.message_extra_fields IS
    'Message fields allowed beyond Herald''s rules (e.g. message.android.new_option, for a field FCM added after this release); workers read it when they start.';

-- Edits between a and b: insertions, deletions, substitutions and swaps of two adjacent
-- characters (optimal string alignment), ASCII letters compared in lower case. The Swift
-- validator's KnownFields.distance computes the same.
CREATE OR REPLACE FUNCTION herald._mv_distance(a text, b text) RETURNS integer
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    s text[] := CASE WHEN a = '' THEN '{}'::text[]
                     ELSE regexp_split_to_array(translate(a, 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz'), '') END;
    t text[] := CASE WHEN b = '' THEN '{}'::text[]
                     ELSE regexp_split_to_array(translate(b, 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz'), '') END;
    n integer := coalesce(cardinality(s), 0);
    m integer := coalesce(cardinality(t), 0);
    d integer[];
    cost integer;
BEGIN
    IF n = 0 THEN RETURN m; END IF;
    IF m = 0 THEN RETURN n; END IF;
    d := array_fill(0, ARRAY[n + 1, m + 1], ARRAY[0, 0]);
    FOR i IN 0..n LOOP d[i][0] := i; END LOOP;
    FOR j IN 0..m LOOP d[0][j] := j; END LOOP;
    FOR i IN 1..n LOOP
        FOR j IN 1..m LOOP
            cost := CASE WHEN s[i] = t[j] THEN 0 ELSE 1 END;
            d[i][j] := least(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost);
            IF i > 1 AND j > 1 AND s[i] = t[j - 1] AND s[i - 1] = t[j] THEN
                d[i][j] := least(d[i][j], d[i - 2][j - 2] + 1);
            END IF;
        END LOOP;
    END LOOP;
    RETURN d[n][m];
END
$fn$;

-- The known name (of the JSON list names) nearest to k, when it is close enough to be the one
-- meant: at most 1 edit for a name of up to 3 characters, 2 up to 6, else 3; ties go to the name
-- listed first. NULL when none is.
CREATE OR REPLACE FUNCTION herald._mv_suggest(k text, names jsonb) RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    name text;
    lim integer;
    distance integer;
    best text;
    best_distance integer;
BEGIN
    FOR name IN SELECT e FROM jsonb_array_elements_text(names) WITH ORDINALITY AS x(e, o) ORDER BY o LOOP
        lim := CASE WHEN char_length(name) <= 3 THEN 1 WHEN char_length(name) <= 6 THEN 2 ELSE 3 END;
        CONTINUE WHEN abs(char_length(k) - char_length(name)) > lim;
        distance := herald._mv_distance(k, name);
        IF distance <= lim AND (best_distance IS NULL OR distance < best_distance) THEN
            best := name;
            best_distance := distance;
        END IF;
    END LOOP;
    RETURN best;
END
$fn$;

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

-- Every issue of an FCM v1 message object under the loaded rules, in rule order; '{}' when the
-- message may be sent. A SQL NULL is judged as JSON null.
CREATE OR REPLACE FUNCTION herald.validate_message(message jsonb) RETURNS text[]
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
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
