-- How many tokens a bucket holds at most: a tenth of a second's worth (at least one), so a
-- limit is spread over the second instead of spent at its start.
CREATE OR REPLACE FUNCTION herald._burst(rate double precision) RETURNS double precision
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT greatest(1.0, rate / 10) $$;
