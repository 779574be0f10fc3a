-- Counts the jobs a statement added to each campaign; refuses jobs for a cancelled campaign.
CREATE OR REPLACE FUNCTION herald._count_campaign_jobs() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    refused text;
BEGIN
    SELECT c.name INTO refused
    FROM herald.campaigns c WHERE c.state = 'cancelled' AND c.id IN (SELECT i.campaign_id FROM inserted i)
    LIMIT 1;
    IF refused IS NOT NULL THEN
        RAISE EXCEPTION 'herald.jobs: campaign % is cancelled; create a new campaign for these jobs', refused
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    UPDATE herald.campaigns c
    SET total = c.total + n.count,
        state = CASE WHEN c.state = 'finished' THEN 'running' ELSE c.state END,
        finished_at = CASE WHEN c.state = 'finished' THEN NULL ELSE c.finished_at END
    FROM (SELECT i.campaign_id, count(*) AS count FROM inserted i WHERE i.campaign_id IS NOT NULL GROUP BY i.campaign_id) n
    WHERE c.id = n.campaign_id;
    RETURN NULL;
END $$;

CREATE OR REPLACE TRIGGER jobs_campaign_totals AFTER INSERT ON herald.jobs
    REFERENCING NEW TABLE AS inserted
    FOR EACH STATEMENT EXECUTE FUNCTION herald._count_campaign_jobs();
