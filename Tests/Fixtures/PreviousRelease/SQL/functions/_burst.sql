-- How many tokens a bucket holds at most: a tenth of a second's worth (at least one), so a
-- limit is spread over the second instead of spent at its start.
-- No SET clause, so the claim inlines it (with one, a call of _refill cost about 100 µs instead
-- of 2 to 4 µs, measured); instead every operator names its schema, so no search_path changes
-- what runs (GREATEST, LEAST and EXTRACT are syntax, not looked up).
CREATE OR REPLACE FUNCTION herald._burst(rate double precision) RETURNS double precision
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT greatest(1.0, rate OPERATOR(pg_catalog./) 10) $$;
