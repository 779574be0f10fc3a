-- Compatibility: herald.project_pauses under the name it had before migration 140, for pools of
-- releases older than that one still running while an upgrade rolls (their quota pause writes
-- here; the view is simple, so PostgreSQL turns INSERT ... ON CONFLICT on it into one on the
-- table). Nothing of this release uses it. Dropped by a later release's migration, once no pool
-- that old can still run (docs/operations.md, Upgrades).
CREATE OR REPLACE VIEW herald.sender_pauses AS
SELECT project_id, paused_until, reason FROM herald.project_pauses;
