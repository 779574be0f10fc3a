-- How long until a bucket holding `tokens` has enough for the next claim: half its burst (at
-- least one token, at most what the claim wants).
CREATE OR REPLACE FUNCTION herald._wait(tokens double precision, rate double precision, wanted integer) RETURNS double precision
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT greatest(0.001, (greatest(1.0, least(herald._burst(rate) / 2, wanted)) - tokens) / rate) $$;
