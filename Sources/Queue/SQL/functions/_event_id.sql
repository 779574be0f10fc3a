-- Numbers each new herald.events row. The writing transaction's id (xid) is assigned first, then
-- the event id is taken from herald.events_id_seq: so every event id is taken after its writer's
-- xid exists, which is what lets herald.events_since tell when no smaller id can still commit.
CREATE OR REPLACE FUNCTION herald._event_id() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog AS $$
BEGIN
    PERFORM pg_current_xact_id();
    NEW.id := nextval('herald.events_id_seq');
    RETURN NEW;
END $$;

CREATE OR REPLACE TRIGGER events_id BEFORE INSERT ON herald.events
    FOR EACH ROW EXECUTE FUNCTION herald._event_id();
