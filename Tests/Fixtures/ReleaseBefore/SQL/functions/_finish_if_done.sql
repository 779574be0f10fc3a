-- A running campaign whose jobs have all been settled is finished, even before the maintenance
-- leader marks it so: says whether the campaign is finished (pause and cancel then refuse it).
CREATE OR REPLACE FUNCTION herald._finish_if_done(c herald.campaigns) RETURNS boolean
LANGUAGE plpgsql SET search_path = pg_catalog AS $$
BEGIN
    IF c.state = 'running' AND NOT EXISTS (
        SELECT 1 FROM herald.jobs j WHERE j.campaign_id = c.id AND j.state IN ('scheduled', 'available', 'running')) THEN
        UPDATE herald.campaigns SET state = 'finished', finished_at = coalesce(finished_at, now()) WHERE id = c.id;
        RETURN true;
    END IF;
    RETURN c.state = 'finished';
END $$;
