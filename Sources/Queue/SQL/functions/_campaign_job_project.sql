-- A campaign's jobs are sent for the campaign's project (herald.campaigns.project, set by
-- herald.create_campaign(..., project => 'name')): a job put into a campaign without a project
-- takes the campaign's, and one naming another project (or a project, in a campaign of none) is
-- refused, so a campaign's INSERT ... SELECT never sends with another project's key. Runs only
-- for jobs of a campaign (one lookup by the campaign's primary key); jobs_project then checks
-- the name against the registry (BEFORE triggers run in name order).
CREATE OR REPLACE FUNCTION herald._campaign_job_project() RETURNS trigger
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

CREATE OR REPLACE TRIGGER jobs_campaign_project BEFORE INSERT OR UPDATE OF project, campaign_id ON herald.jobs
    FOR EACH ROW WHEN (NEW.campaign_id IS NOT NULL)
    EXECUTE FUNCTION herald._campaign_job_project();
