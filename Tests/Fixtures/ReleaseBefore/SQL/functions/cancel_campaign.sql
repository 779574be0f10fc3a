-- cancel_campaign: its jobs not yet claimed become 'cancelled' (returned: how many); requests in
-- flight finish. A cancelled campaign takes no new jobs.
CREATE OR REPLACE FUNCTION herald.cancel_campaign(campaign_id bigint) RETURNS integer
LANGUAGE plpgsql SET search_path = pg_catalog AS $$
DECLARE
    c herald.campaigns := herald._campaign(cancel_campaign.campaign_id, 'herald.cancel_campaign');
    n integer;
BEGIN
    IF herald._finish_if_done(c) THEN
        c.state := 'finished';
    END IF;
    IF c.state = 'finished' THEN
        RAISE EXCEPTION 'herald.cancel_campaign: campaign % (%) has finished; there is nothing left to cancel', c.id, c.name
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    UPDATE herald.jobs j SET state = 'cancelled', finished_at = now(), last_error = 'campaign cancelled'
    WHERE j.campaign_id = c.id AND j.state IN ('scheduled', 'available');
    GET DIAGNOSTICS n = ROW_COUNT;
    UPDATE herald.campaigns
    SET state = 'cancelled', cancelled = cancelled + n, paused_reason = NULL,
        finished_at = coalesce(finished_at, now())
    WHERE id = c.id;
    RETURN n;
END $$;
