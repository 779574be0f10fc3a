-- A job's project must be in the registry (herald.projects): a name nobody registered would
-- leave the job unsent (no pool works it) or, worse, make it look like another project's. The
-- trigger runs only for rows that name a project, so jobs of no project cost nothing more.
-- A project is removed from the registry only without pending jobs (herald.remove_project).
CREATE OR REPLACE FUNCTION herald._check_job_project() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog AS $fn$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM herald.projects p WHERE p.name = NEW.project) THEN
        RAISE EXCEPTION 'herald.jobs.project: no project named "%" in the registry (herald.projects)', NEW.project
            USING ERRCODE = 'foreign_key_violation',
                  HINT = 'Register it first (herald projects add NAME --credentials FILE, or herald.add_project), '
                      || 'or leave project NULL to send with the pool''s own credentials; herald projects list shows the names.';
    END IF;
    RETURN NEW;
END
$fn$;

CREATE OR REPLACE TRIGGER jobs_project BEFORE INSERT OR UPDATE OF project ON herald.jobs
    FOR EACH ROW WHEN (NEW.project IS NOT NULL)
    EXECUTE FUNCTION herald._check_job_project();
