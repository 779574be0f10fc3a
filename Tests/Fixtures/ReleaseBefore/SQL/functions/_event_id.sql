-- Gives a transaction that writes herald.events rows its transaction id (xid) before the rows
-- take their ids: the statement's BEFORE trigger runs before any of its rows is formed, and each
-- row's id comes from its column's default, nextval('herald.events_id_seq'). So every event id
-- is taken after its writer's xid exists, which is what lets herald.events_since tell when no
-- smaller id can still commit. Once per statement, not per row (migration 220).
CREATE OR REPLACE FUNCTION herald._event_id() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog AS $$
BEGIN
    PERFORM pg_current_xact_id();
    RETURN NULL;
END $$;

CREATE OR REPLACE TRIGGER events_id BEFORE INSERT ON herald.events
    FOR EACH STATEMENT EXECUTE FUNCTION herald._event_id();
