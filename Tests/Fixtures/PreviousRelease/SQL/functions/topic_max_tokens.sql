-- The most tokens one batchAdd / batchRemove request carries (the pool's
-- TopicManagement.maxTokensPerRequest). No longer a limit on a subscribe / unsubscribe call;
-- kept because the previous release's herald._check_topic_call calls it until `herald migrate`
-- re-applies the function files: drop it (a numbered migration) in the release after.
CREATE OR REPLACE FUNCTION herald.topic_max_tokens() RETURNS integer LANGUAGE sql IMMUTABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$ SELECT 1000 $fn$;
