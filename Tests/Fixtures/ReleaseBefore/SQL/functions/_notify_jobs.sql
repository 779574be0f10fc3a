-- Wake-up: one NOTIFY per statement, however many rows it inserted. Workers also poll.
CREATE OR REPLACE FUNCTION herald._notify_jobs() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog AS $$
BEGIN
    PERFORM pg_notify('herald_jobs', '');
    RETURN NULL;
END $$;

CREATE OR REPLACE TRIGGER jobs_notify AFTER INSERT ON herald.jobs
    FOR EACH STATEMENT EXECUTE FUNCTION herald._notify_jobs();
