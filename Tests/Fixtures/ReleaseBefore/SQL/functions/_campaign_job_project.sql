-- A campaign's jobs are sent for the campaign's project (herald.campaigns.project, set by
-- herald.create_campaign(..., project => 'name')): jobs inserted into a campaign without a
-- project take the campaign's, and one naming another project (or a project, in a campaign of
-- none) is refused, so a campaign's INSERT ... SELECT never sends with another project's key.
--
-- Once per INSERT statement, over the rows it inserted (a transition table), not once per row:
-- a row trigger's lookup doubled the time of a campaign's INSERT ... SELECT (200,000 jobs: 7.6 to
-- 10.9 s without it, 13.5 to 15.8 s with it). Here a campaign of no project costs one join of the
-- new rows with herald.campaigns, and only the jobs of a project's campaign inserted without a
-- project are written again. Rows moved into a campaign by an UPDATE are checked by
-- jobs_campaign_project_update (_campaign_job_project_update.sql).
CREATE OR REPLACE FUNCTION herald._campaign_job_project() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog AS $fn$
DECLARE
    bad record;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM new_jobs n WHERE n.campaign_id IS NOT NULL) THEN
        RETURN NULL;  -- no job of a campaign (herald.enqueue without campaign_id): one scan of the new rows
    END IF;
    SELECT n.campaign_id, n.project, c.project AS campaign_project INTO bad
    FROM new_jobs n JOIN herald.campaigns c ON c.id = n.campaign_id
    WHERE n.project IS NOT NULL AND n.project IS DISTINCT FROM c.project
    LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'herald.jobs.project: "%" is not the project of campaign % (%)', bad.project, bad.campaign_id,
                coalesce('project "' || bad.campaign_project || '"', 'no project: the pool''s own credentials')
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Leave project NULL in a campaign''s jobs: they take the campaign''s (herald.create_campaign(..., project => ...)).';
    END IF;
    UPDATE herald.jobs j SET project = c.project
    FROM new_jobs n JOIN herald.campaigns c ON c.id = n.campaign_id
    WHERE j.id = n.id AND n.project IS NULL AND c.project IS NOT NULL;
    RETURN NULL;
END
$fn$;

CREATE OR REPLACE TRIGGER jobs_campaign_project AFTER INSERT ON herald.jobs
    REFERENCING NEW TABLE AS new_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION herald._campaign_job_project();
