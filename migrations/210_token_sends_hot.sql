-- Herald: the frequency cap's rows are updated in place.
--
-- The claim rewrites a capped token's herald.token_sends row on every send. With room left in
-- its page (fillfactor), the new version goes there as a heap-only tuple: the primary key is not
-- written again. Rows already stored move to pages with room as they are next updated.

ALTER TABLE herald.token_sends SET (fillfactor = 50);
