-- A job's project must be in the registry (herald.projects): a name nobody registered would
-- leave the job unsent (no pool works it) or, worse, make it look like another project's. The
-- trigger runs only for rows that name a project, so jobs of no project cost nothing more.
-- A project is removed from the registry only without pending jobs (herald.remove_project).
-- An APNs app's jobs are APNs messages (with apns_token, checked by jobs_apns): an FCM message
-- addressed to an app is refused, as no FCM key could send it.
CREATE OR REPLACE FUNCTION herald._check_job_project() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
    entry_service text;
BEGIN
    SELECT p.service INTO entry_service FROM herald.projects p WHERE p.name = NEW.project;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'herald.jobs.project: no project named "%" in the registry (herald.projects)', NEW.project
            USING ERRCODE = 'foreign_key_violation',
                  HINT = 'Register it first (herald projects add NAME --credentials FILE, or herald.add_project), '
                      || 'or leave project NULL to send with the pool''s own credentials; herald projects list shows the names.';
    END IF;
    IF entry_service = 'apns' AND NOT (NEW.message ? 'apns_token') THEN
        RAISE EXCEPTION 'herald.jobs.project: "%" is an APNs app; its jobs are APNs messages (with apns_token and apns), and this one has no apns_token', NEW.project
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Give the device token as apns_token, or address the message to an FCM project (herald projects list).';
    END IF;
    RETURN NEW;
END
$fn$;

CREATE OR REPLACE TRIGGER jobs_project BEFORE INSERT OR UPDATE OF project ON herald.jobs
    FOR EACH ROW WHEN (NEW.project IS NOT NULL)
    EXECUTE FUNCTION herald._check_job_project();
