-- A job inserted, or moved, with its run_at ahead waits in state 'scheduled', outside the claim
-- index, until promoted; the trigger's WHEN clause keeps the function off rows due now.
CREATE OR REPLACE FUNCTION herald._schedule_job() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    NEW.state := 'scheduled';
    RETURN NEW;
END $$;

CREATE OR REPLACE TRIGGER jobs_schedule BEFORE INSERT OR UPDATE OF state, run_at ON herald.jobs
    FOR EACH ROW WHEN (NEW.state = 'available' AND NEW.run_at > now())
    EXECUTE FUNCTION herald._schedule_job();
