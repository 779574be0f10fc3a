-- The campaign with this id, locked, or an error naming the id.
CREATE OR REPLACE FUNCTION herald._campaign(campaign_id bigint, caller text) RETURNS herald.campaigns
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    found_row herald.campaigns;
BEGIN
    SELECT * INTO found_row FROM herald.campaigns c WHERE c.id = _campaign.campaign_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION '%: no campaign with id %', caller, coalesce(_campaign.campaign_id::text, 'null')
            USING ERRCODE = 'no_data_found';
    END IF;
    RETURN found_row;
END $$;
