-- resume_campaign: claims go on; max_errors counts dead letters afresh from here.
CREATE OR REPLACE FUNCTION herald.resume_campaign(campaign_id bigint) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    c herald.campaigns := herald._campaign(resume_campaign.campaign_id, 'herald.resume_campaign');
BEGIN
    IF c.state = 'cancelled' THEN
        RAISE EXCEPTION 'herald.resume_campaign: campaign % (%) was cancelled and cannot be resumed; create a new one', c.id, c.name
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    UPDATE herald.campaigns
    SET state = CASE WHEN started_at IS NULL THEN 'scheduled' ELSE 'running' END, paused_reason = NULL, errors = 0
    WHERE id = c.id AND state = 'paused';
END $$;
