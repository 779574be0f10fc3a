-- A bucket's tokens at `at`: what it held, plus what the rate added since, up to the burst.
-- Inlined into the claim, so no SET clause: its operators name their schema (see _burst.sql).
CREATE OR REPLACE FUNCTION herald._refill(tokens double precision, rate double precision, refilled_at timestamptz, at timestamptz)
RETURNS double precision LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT least(herald._burst(rate),
                   tokens OPERATOR(pg_catalog.+)
                       (greatest(0, extract(epoch FROM (at OPERATOR(pg_catalog.-) refilled_at))) OPERATOR(pg_catalog.*) rate)) $$;
