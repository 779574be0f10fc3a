-- Herald: the frequency cap's rows are updated in place.
--
-- The claim rewrites a capped token's herald.token_sends row on every send. With room left in
-- its page (fillfactor), the new version goes there as a heap-only tuple: the primary key is not
-- written again. Rows already stored move to pages with room as they are next updated.

ALTER TABLE herald.token_sends SET (fillfactor = 50);

-- herald._claim_unit hands herald._audience_hold each job's token and time zone (read from the
-- row it updates) instead of the claim parsing every message again: both change signature.
DROP FUNCTION IF EXISTS herald._claim_unit(text, bigint, integer, double precision, text, text, timestamptz, text);
DROP FUNCTION IF EXISTS herald._audience_hold(text, herald.claimed_job[], timestamptz);
