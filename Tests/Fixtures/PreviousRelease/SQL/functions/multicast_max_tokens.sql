-- The most tokens one call takes, as the Admin SDKs' send_each_for_multicast enforces.
CREATE OR REPLACE FUNCTION herald.multicast_max_tokens() RETURNS integer LANGUAGE sql IMMUTABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$ SELECT 500 $fn$;
