-- One NOTIFY herald_events per statement that wrote events, however many rows (delivered at
-- commit, so a listener that wakes finds them committed).
CREATE OR REPLACE FUNCTION herald._notify_events() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog AS $$
BEGIN
    PERFORM pg_notify('herald_events', '');
    RETURN NULL;
END $$;

CREATE OR REPLACE TRIGGER events_notify AFTER INSERT ON herald.events
    FOR EACH STATEMENT EXECUTE FUNCTION herald._notify_events();
