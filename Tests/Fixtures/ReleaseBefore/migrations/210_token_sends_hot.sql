-- Herald: a cheaper frequency cap in the claim.
--
-- * herald.token_sends gets room in its pages (fillfactor 50): the claim rewrites a capped
--   token's row on every send, and with room in its page the new version goes there as a
--   heap-only tuple, so the primary key is not written again. Rows already stored move to pages
--   with room as they are next updated.
-- * herald._claim_unit hands herald._audience_hold each job's id, token and own time zone (read
--   from the row it updates) instead of the cap and quiet hours parsing every claimed message
--   again and joining herald.jobs: both change signature, so the old ones are dropped here and
--   defined again from Sources/Queue/SQL/functions.

ALTER TABLE herald.token_sends SET (fillfactor = 50);

DROP FUNCTION IF EXISTS herald._claim_unit(text, bigint, integer, double precision, text, text, timestamptz, text);
DROP FUNCTION IF EXISTS herald._audience_hold(text, herald.claimed_job[], timestamptz);
