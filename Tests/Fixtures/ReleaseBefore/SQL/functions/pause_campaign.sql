-- pause_campaign: no job of it is claimed until it is resumed; requests in flight finish.
CREATE OR REPLACE FUNCTION herald.pause_campaign(campaign_id bigint) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog AS $$
DECLARE
    c herald.campaigns := herald._campaign(pause_campaign.campaign_id, 'herald.pause_campaign');
BEGIN
    IF herald._finish_if_done(c) THEN
        c.state := 'finished';
    END IF;
    IF c.state IN ('cancelled', 'finished') THEN
        RAISE EXCEPTION 'herald.pause_campaign: campaign % (%) is %; there is nothing left to pause', c.id, c.name, c.state
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    UPDATE herald.campaigns SET state = 'paused', paused_reason = 'paused with herald.pause_campaign'
    WHERE id = c.id AND state <> 'paused';
END $$;
