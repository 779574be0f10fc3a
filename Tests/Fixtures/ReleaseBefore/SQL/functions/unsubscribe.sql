-- unsubscribe: the tokens should leave the topic; the pool carries it out with batchRemove (also
-- for tokens Herald never subscribed: an app may have subscribed them itself). Returns how many
-- tokens now wait for a request.
CREATE OR REPLACE FUNCTION herald.unsubscribe(topic text, tokens text[], project text DEFAULT NULL)
RETURNS integer LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    changed integer;
BEGIN
    PERFORM herald._check_topic_call('unsubscribe', unsubscribe.topic, unsubscribe.tokens);
    WITH upserted AS (
        INSERT INTO herald.topic_subscriptions AS s (project, topic, token, state)
        SELECT DISTINCT coalesce(unsubscribe.project, ''), unsubscribe.topic, u.t, 'removing'
        FROM unnest(unsubscribe.tokens) AS u(t)
        ON CONFLICT ON CONSTRAINT topic_subscriptions_pkey DO UPDATE
        SET state = 'removing', error = NULL, attempts = 0, run_at = now(), updated_at = now(), generation = s.generation + 1
        WHERE s.state <> 'removing'
        RETURNING s.state
    )
    SELECT count(*) INTO changed FROM upserted;
    RETURN changed;
END
$fn$;
