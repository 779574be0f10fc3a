-- How long until a bucket holding `tokens` has enough for the next claim: half its burst (at
-- least one token, at most what the claim wants).
-- Inlined into the claim, so no SET clause: its operators name their schema (see _burst.sql).
CREATE OR REPLACE FUNCTION herald._wait(tokens double precision, rate double precision, wanted integer) RETURNS double precision
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT greatest(0.001, ((greatest(1.0, least(herald._burst(rate) OPERATOR(pg_catalog./) 2, wanted)) OPERATOR(pg_catalog.-) tokens)
                              OPERATOR(pg_catalog./) rate)) $$;
