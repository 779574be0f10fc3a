-- Refuses a topic name or token list FCM would refuse, naming the value.
CREATE OR REPLACE FUNCTION herald._check_topic_call(fn text, topic text, tokens text[]) RETURNS void
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog
AS $fn$
DECLARE
    n integer := coalesce(cardinality(tokens), 0);
    bad integer;
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
    IF n = 0 THEN
        RAISE EXCEPTION 'herald.%: tokens is empty; give 1 to % registration tokens', fn, herald.topic_max_tokens()
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF n > herald.topic_max_tokens() THEN
        RAISE EXCEPTION 'herald.%: % tokens; at most % tokens per call, split the list into several calls', fn, n, herald.topic_max_tokens()
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT o INTO bad FROM unnest(tokens) WITH ORDINALITY AS u(t, o) WHERE t IS NULL OR t = '' ORDER BY o LIMIT 1;
    IF bad IS NOT NULL THEN
        RAISE EXCEPTION 'herald.%: tokens[%] is empty or null; every token must be a registration token', fn, bad
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
END
$fn$;
