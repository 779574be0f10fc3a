-- Refuses a topic name or token list FCM would refuse, naming the value.
CREATE OR REPLACE FUNCTION herald._check_topic_call(fn text, topic text, tokens text[]) RETURNS void
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    n integer := coalesce(cardinality(tokens), 0);
    bad integer;
    bad_is_null boolean;
BEGIN
    IF topic IS NULL OR topic = '' THEN
        RAISE EXCEPTION 'herald.%: topic is empty; give a topic name such as ''news''', fn USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF topic LIKE '/topics/%' THEN
        RAISE EXCEPTION 'herald.%: topic "%" starts with "/topics/"; give the topic name alone', fn, topic
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF topic !~ '^[a-zA-Z0-9_.~%-]+$' THEN
        RAISE EXCEPTION 'herald.%: topic "%" has a character outside [a-zA-Z0-9-_.~%%]', fn, left(topic, 100)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF length(topic) > 900 THEN
        RAISE EXCEPTION 'herald.%: topic "%..." is % characters long; FCM takes at most 900', fn, left(topic, 40), length(topic)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- Any number of tokens: the rows are kept per token and the pool sends them 1,000 a request
    -- (Instance ID's limit), so a caller with a table of tokens passes them in one call.
    IF tokens IS NULL THEN
        RAISE EXCEPTION 'herald.%: tokens is NULL; give an array of registration tokens', fn USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF n = 0 THEN
        RAISE EXCEPTION 'herald.%: tokens is empty; give one or more registration tokens', fn USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT o, t IS NULL INTO bad, bad_is_null FROM unnest(tokens) WITH ORDINALITY AS u(t, o) WHERE t IS NULL OR t = '' ORDER BY o LIMIT 1;
    IF bad IS NOT NULL THEN
        RAISE EXCEPTION 'herald.%: tokens[%] is %; every token must be a registration token', fn, bad,
            CASE WHEN bad_is_null THEN 'NULL' ELSE 'empty' END
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
END
$fn$;
