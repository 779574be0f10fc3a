-- A bucket's tokens at `at`: what it held, plus what the rate added since, up to the burst.
CREATE OR REPLACE FUNCTION herald._refill(tokens double precision, rate double precision, refilled_at timestamptz, at timestamptz)
RETURNS double precision LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT least(herald._burst(rate), tokens + greatest(0, extract(epoch FROM at - refilled_at)) * rate) $$;
