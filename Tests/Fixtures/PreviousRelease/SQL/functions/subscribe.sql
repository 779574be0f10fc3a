-- subscribe: the tokens should be subscribed to the topic. Recorded in the caller's transaction
-- (nothing happens if it rolls back); the pool carries it out with batchAdd. A token already
-- subscribed stays so; a token pruned as UNREGISTERED is recorded failed without a request.
-- Returns how many tokens now wait for a request.
CREATE OR REPLACE FUNCTION herald.subscribe(topic text, tokens text[], project text DEFAULT NULL)
RETURNS integer LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    changed integer;
BEGIN
    PERFORM herald._check_topic_call('subscribe', subscribe.topic, subscribe.tokens);
    WITH wanted AS (
        SELECT DISTINCT u.t AS token, p.token IS NOT NULL AS pruned
        FROM unnest(subscribe.tokens) AS u(t)
        LEFT JOIN herald.pruned_tokens p ON p.token = u.t
    ), upserted AS (
        INSERT INTO herald.topic_subscriptions AS s (project, topic, token, state, error)
        SELECT coalesce(subscribe.project, ''), subscribe.topic, w.token,
               CASE WHEN w.pruned THEN 'failed' ELSE 'pending' END,
               CASE WHEN w.pruned THEN 'UNREGISTERED: the token was pruned earlier (FCM reported it unregistered); not subscribed' END
        FROM wanted w
        ON CONFLICT ON CONSTRAINT topic_subscriptions_pkey DO UPDATE
        SET state = excluded.state, error = excluded.error, attempts = 0, run_at = now(), updated_at = now(),
            generation = s.generation + 1
        WHERE s.state IN ('removing', 'failed')
        RETURNING s.state
    )
    SELECT count(*) FILTER (WHERE state = 'pending') INTO changed FROM upserted;
    RETURN changed;
END
$fn$;
