-- Herald: validation of FCM messages inside PostgreSQL.
--
-- herald.validate_message(message jsonb) returns text[]: the same issue descriptions, in the
-- same order, as the worker's Swift MessageValidator, so an application can refuse a bad
-- message inside its own transaction, e.g.
--
--     INSERT INTO herald.jobs (message) SELECT $1
--     WHERE cardinality(herald.validate_message($1)) = 0;
--
-- Both validators interpret one rule list, Sources/FCM/Rules/message-rules.json. The binary
-- carries it (FCM's MessageRules.json) and `herald migrate` stores it on every run with
--
--     SELECT herald.load_message_rules($1::jsonb)      -- $1 = MessageRules.json
--
-- so the rules in the database are those of the binary that last migrated it. This file holds
-- only the interpreter; a new rule kind needs a new migration that replaces these functions.
--
-- Everything here runs inside users' transactions: validate_message only reads, no dynamic SQL,
-- every name schema-qualified, search_path pinned on the functions that run queries (the small
-- SQL helpers inline into them), nothing that depends on the database's locale (byte order via
-- COLLATE "C", explicit character classes instead of \d or \s). Roles that call it need USAGE
-- on schema herald and SELECT on herald.message_rules and herald.message_rule_steps.

CREATE TABLE IF NOT EXISTS herald.message_rules (
    id boolean PRIMARY KEY DEFAULT true CHECK (id),
    format integer NOT NULL,
    definition jsonb NOT NULL,
    loaded_at timestamptz NOT NULL DEFAULT now()
);

COMMENT ON TABLE herald.message_rules IS
    'The FCM message rules herald.validate_message applies; written by herald migrate (one row).';

-- The rules of herald.message_rules one per row with their paths split, so validate_message
-- finds the rules that apply to a message (those whose parent object exists) in one query.
CREATE TABLE IF NOT EXISTS herald.message_rule_steps (
    position integer PRIMARY KEY,
    path text[] NOT NULL,
    parent text[] NOT NULL,
    field text NOT NULL,
    presence text,
    types text[],
    check_kind text,
    has_when boolean NOT NULL,
    rule jsonb NOT NULL
);

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
        'https_url', 'max_bytes', 'data_map', 'string_map', 'string_array', 'payload_size']))
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

-- The small SQL helpers below leave search_path alone so PostgreSQL can inline them into
-- validate_message (a SET clause forbids inlining), which pins search_path itself; they use only
-- pg_catalog functions and operators, which are found first on any search_path.

-- Fills {name} placeholders of a template from params in one pass (a value containing {...}
-- is never expanded again); unknown names stay as written.
CREATE OR REPLACE FUNCTION herald._mv_fill(template text, params jsonb) RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    result text := '';
    rest text := template;
    open_at integer;
    close_at integer;
    name text;
BEGIN
    LOOP
        open_at := strpos(rest, '{');
        EXIT WHEN open_at = 0;
        close_at := strpos(substr(rest, open_at + 1), '}');
        EXIT WHEN close_at = 0;
        name := substr(rest, open_at + 1, close_at - 1);
        result := result || substr(rest, 1, open_at - 1);
        IF params ? name THEN
            result := result || coalesce(params ->> name, '');
        ELSE
            result := result || substr(rest, open_at, close_at + 1);
        END IF;
        rest := substr(rest, open_at + close_at + 1);
    END LOOP;
    RETURN result || rest;
END
$fn$;

-- The first vmax characters of s, marked when cut.
CREATE OR REPLACE FUNCTION herald._mv_cut(s text, words jsonb, vmax integer) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $fn$
    SELECT CASE WHEN char_length(s) > vmax THEN left(s, vmax) || (words ->> 'truncated') ELSE s END
$fn$;

-- s cut and quoted as a JSON string (the Swift side escapes exactly like to_json).
CREATE OR REPLACE FUNCTION herald._mv_quote(s text, words jsonb, vmax integer) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $fn$
    SELECT to_json(herald._mv_cut(s, words, vmax))::text
$fn$;

-- A value as descriptions show it.
CREATE OR REPLACE FUNCTION herald._mv_render(v jsonb, words jsonb, vmax integer) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $fn$
    SELECT CASE jsonb_typeof(v)
        WHEN 'string' THEN herald._mv_quote(v #>> '{}', words, vmax)
        WHEN 'number' THEN herald._mv_cut(v::text, words, vmax)
        WHEN 'boolean' THEN v::text
        WHEN 'null' THEN 'null'
        WHEN 'object' THEN words ->> 'an_object'
        ELSE words ->> 'an_array'
    END
$fn$;

-- A member name appended to a field: .name, or ["odd name"].
CREATE OR REPLACE FUNCTION herald._mv_key(k text, words jsonb, vmax integer) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $fn$
    SELECT CASE WHEN k ~ '^[A-Za-z0-9_-]+$' AND octet_length(k) <= vmax THEN '.' || k
                ELSE '[' || herald._mv_quote(k, words, vmax) || ']' END
$fn$;

CREATE OR REPLACE FUNCTION herald._mv_is_type(v jsonb, type_name text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $fn$
    SELECT CASE type_name
        WHEN 'integer' THEN CASE WHEN jsonb_typeof(v) = 'number' THEN v::numeric = trunc(v::numeric) ELSE false END
        WHEN 'boolean' THEN jsonb_typeof(v) = 'boolean'
        ELSE jsonb_typeof(v) = type_name
    END
$fn$;

-- The value at a dot-separated path below message; NULL when absent or JSON null.
CREATE OR REPLACE FUNCTION herald._mv_resolve(message jsonb, path text) RETURNS jsonb
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $fn$
    SELECT CASE WHEN jsonb_typeof(x) = 'null' THEN NULL ELSE x END
    FROM (SELECT message #> string_to_array(path, '.') AS x) AS resolved
$fn$;

-- An anchored ARE for a charset such as ["a-z", "0-9", "_"], characters written as \uXXXX so
-- nothing in the set is special.
CREATE OR REPLACE FUNCTION herald._mv_charset_regex(charset jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $fn$
    SELECT '^[' || string_agg(
        CASE WHEN char_length(e) = 3
             THEN E'\\u' || lpad(to_hex(ascii(substr(e, 1, 1))), 4, '0') || '-' || E'\\u' || lpad(to_hex(ascii(substr(e, 3, 1))), 4, '0')
             ELSE E'\\u' || lpad(to_hex(ascii(e)), 4, '0') END, '' ORDER BY o) || ']*$'
    FROM jsonb_array_elements_text(charset) WITH ORDINALITY AS x(e, o)
$fn$;

-- The charset as descriptions show it: [a-z0-9_].
CREATE OR REPLACE FUNCTION herald._mv_charset_display(charset jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $fn$
    SELECT '[' || string_agg(e, '' ORDER BY o) || ']'
    FROM jsonb_array_elements_text(charset) WITH ORDINALITY AS x(e, o)
$fn$;

-- Payload bytes of a value: member names and strings in UTF-8 bytes, numbers as their plain
-- decimal text, true 4, false 5, null 4. Iterative, so no nesting depth can exhaust the stack.
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

-- Checks an FCM topic condition ('a' in topics && !('b' in topics || 'c' in topics)).
-- Returns NULL when valid, else {"key": message key, "position": 1-based character or null for
-- the end, "topic": name}. A left-to-right automaton (operand expected / operator expected)
-- with a stack of open parentheses; precedence does not matter for validity.
CREATE OR REPLACE FUNCTION herald._mv_condition(cond text, max_topics integer, topic_regex text) RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    ch text[] := CASE WHEN cond = '' THEN '{}'::text[] ELSE regexp_split_to_array(cond, '') END;
    n integer := coalesce(cardinality(ch), 0);
    i integer := 1;
    j integer;
    expect_operand boolean := true;
    open_at integer[] := '{}';
    topics integer := 0;
    c text;
    start_at integer;
    close_at integer;
    name text;
    word text;
    code integer;
BEGIN
    WHILE i <= n AND ch[i] IN (' ', E'\t', E'\n', E'\r') LOOP i := i + 1; END LOOP;
    IF i > n THEN
        RETURN jsonb_build_object('key', 'condition.empty');
    END IF;
    LOOP
        WHILE i <= n AND ch[i] IN (' ', E'\t', E'\n', E'\r') LOOP i := i + 1; END LOOP;
        EXIT WHEN i > n;
        c := ch[i];
        IF expect_operand THEN
            IF c = '!' THEN
                i := i + 1;
                CONTINUE;
            END IF;
            IF c = '(' THEN
                open_at := open_at || i;
                i := i + 1;
                CONTINUE;
            END IF;
            IF c <> '''' THEN
                RETURN jsonb_build_object('key', 'condition.operand', 'position', i);
            END IF;
            start_at := i;
            close_at := i + 1;
            WHILE close_at <= n AND ch[close_at] <> '''' LOOP close_at := close_at + 1; END LOOP;
            IF close_at > n THEN
                RETURN jsonb_build_object('key', 'condition.unterminated', 'position', start_at);
            END IF;
            name := array_to_string(ch[start_at + 1 : close_at - 1], '');
            IF name = '' OR name !~ topic_regex THEN
                RETURN jsonb_build_object('key', 'condition.topic', 'position', start_at, 'topic', name);
            END IF;
            topics := topics + 1;
            IF topics > max_topics THEN
                RETURN jsonb_build_object('key', 'condition.topics', 'position', start_at);
            END IF;
            i := close_at + 1;
            -- 'in', then 'topics', each a whole word of [A-Za-z0-9_]
            FOR step IN 1..2 LOOP
                WHILE i <= n AND ch[i] IN (' ', E'\t', E'\n', E'\r') LOOP i := i + 1; END LOOP;
                j := i;
                LOOP
                    EXIT WHEN j > n;
                    code := ascii(ch[j]);
                    EXIT WHEN NOT (code BETWEEN 97 AND 122 OR code BETWEEN 65 AND 90 OR code BETWEEN 48 AND 57 OR code = 95);
                    j := j + 1;
                END LOOP;
                word := array_to_string(ch[i : j - 1], '');
                IF word IS DISTINCT FROM (CASE step WHEN 1 THEN 'in' ELSE 'topics' END) THEN
                    RETURN jsonb_build_object('key', 'condition.in', 'position', CASE WHEN i <= n THEN i END);
                END IF;
                i := j;
            END LOOP;
            expect_operand := false;
        ELSE
            IF (c = '&' OR c = '|') AND i + 1 <= n AND ch[i + 1] = c THEN
                i := i + 2;
                expect_operand := true;
                CONTINUE;
            END IF;
            IF c = ')' THEN
                IF cardinality(open_at) = 0 THEN
                    RETURN jsonb_build_object('key', 'condition.unmatched', 'position', i);
                END IF;
                open_at := open_at[1 : cardinality(open_at) - 1];
                i := i + 1;
                CONTINUE;
            END IF;
            RETURN jsonb_build_object('key', 'condition.operator', 'position', i);
        END IF;
    END LOOP;
    IF expect_operand THEN
        RETURN jsonb_build_object('key', 'condition.operand', 'position', NULL);
    END IF;
    IF cardinality(open_at) > 0 THEN
        RETURN jsonb_build_object('key', 'condition.unclosed', 'position', open_at[cardinality(open_at)]);
    END IF;
    RETURN NULL;
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
    'Issues of an FCM v1 message object (empty when it may be sent); the same answers as Herald''s worker.';
