-- Herald: delivery event ids from the column's default, the writer's transaction id from a
-- trigger per statement.
--
-- The trigger events_id called a PL/pgSQL function for every event row to give the writing
-- transaction its id before taking the event's from herald.events_id_seq (what
-- herald.events_since relies on). One call per INSERT statement does the same: the statement's
-- BEFORE trigger runs before any of its rows is formed, so before any row's default takes its
-- id. functions/_event_id.sql defines the trigger again, per statement.

ALTER TABLE herald.events ALTER COLUMN id SET DEFAULT nextval('herald.events_id_seq');
