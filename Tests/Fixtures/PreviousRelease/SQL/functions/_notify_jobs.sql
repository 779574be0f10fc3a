-- Wake-up: one NOTIFY per statement, however many rows it inserted. Workers also poll. The
-- payload names the projects of the statement's first 64 rows (`-` for jobs of no project,
-- comma-separated): a worker carrying many projects claims for those first, so a one-time code
-- of one project does not wait for its turn among hundreds of projects with due jobs. A larger
-- INSERT's other projects are found by the claim's listing as any others.
CREATE OR REPLACE FUNCTION herald._notify_jobs() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM pg_notify('herald_jobs', coalesce(
        (SELECT string_agg(DISTINCT coalesce(n.project, '-'), ',') FROM (SELECT project FROM new_jobs LIMIT 64) n), ''));
    RETURN NULL;
END $$;

CREATE OR REPLACE TRIGGER jobs_notify AFTER INSERT ON herald.jobs
    REFERENCING NEW TABLE AS new_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION herald._notify_jobs();
