-- The most tokens one call takes, as the Admin SDKs' send_each_for_multicast enforces.
CREATE OR REPLACE FUNCTION herald.multicast_max_tokens() RETURNS integer LANGUAGE sql IMMUTABLE AS $fn$ SELECT 500 $fn$;
