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
