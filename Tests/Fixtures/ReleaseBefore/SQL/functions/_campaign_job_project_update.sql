-- A job moved into a campaign, or given another project, by an UPDATE: as at INSERT
-- (_campaign_job_project.sql), it takes the campaign's project when it has none, and naming
-- another project is refused. Only for an UPDATE that sets project or campaign_id (the
-- workers' updates set neither).
CREATE OR REPLACE FUNCTION herald._campaign_job_project_update() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog AS $fn$
DECLARE
    campaign_project text;
BEGIN
    SELECT c.project INTO campaign_project FROM herald.campaigns c WHERE c.id = NEW.campaign_id;
    IF NOT FOUND THEN
        RETURN NEW;  -- jobs_campaign_id_fkey refuses it, naming the campaign
    END IF;
    IF NEW.project IS NULL THEN
        NEW.project := campaign_project;
    ELSIF NEW.project IS DISTINCT FROM campaign_project THEN
        RAISE EXCEPTION 'herald.jobs.project: "%" is not the project of campaign % (%)', NEW.project, NEW.campaign_id,
                coalesce('project "' || campaign_project || '"', 'no project: the pool''s own credentials')
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Leave project NULL in a campaign''s jobs: they take the campaign''s (herald.create_campaign(..., project => ...)).';
    END IF;
    RETURN NEW;
END
$fn$;

CREATE OR REPLACE TRIGGER jobs_campaign_project_update BEFORE UPDATE OF project, campaign_id ON herald.jobs
    FOR EACH ROW WHEN (NEW.campaign_id IS NOT NULL)
    EXECUTE FUNCTION herald._campaign_job_project_update();
