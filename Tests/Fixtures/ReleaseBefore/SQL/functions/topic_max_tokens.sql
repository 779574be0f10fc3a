-- The most tokens one subscribe / unsubscribe call takes (as the Admin SDKs allow), which is also
-- the most one batchAdd / batchRemove request carries.
CREATE OR REPLACE FUNCTION herald.topic_max_tokens() RETURNS integer LANGUAGE sql IMMUTABLE AS $fn$ SELECT 1000 $fn$;
