-- Herald: a frequency cap counts a claim's sends in one statement.
--
-- The claim upserts each capped token's row once per batch: it drops the sends older than the
-- cap's period, appends the sends it allows, and records here how many that was, so the same
-- statement's RETURNING tells which of the batch's jobs for that token go now and which wait.

ALTER TABLE herald.token_sends ADD COLUMN last_counted integer NOT NULL DEFAULT 0;
