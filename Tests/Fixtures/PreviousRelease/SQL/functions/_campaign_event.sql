-- Delivery events of campaigns (migration 130): campaign_finished and campaign_paused (by
-- herald.pause_campaign, or by itself after max_errors dead letters, detail.reason says which),
-- written by the statement that changes the campaign's state, while any queue has events on
-- (herald.set_queue_events).
CREATE OR REPLACE FUNCTION herald._campaign_event() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM herald.queues q WHERE q.events) THEN
        INSERT INTO herald.events (kind, campaign_id, detail)
        VALUES ('campaign_' || NEW.state, NEW.id,
                CASE WHEN NEW.state = 'paused' THEN jsonb_build_object('name', NEW.name, 'reason', NEW.paused_reason)
                     ELSE jsonb_build_object('name', NEW.name, 'completed', NEW.completed, 'dead', NEW.dead,
                                             'discarded', NEW.discarded, 'cancelled', NEW.cancelled) END);
    END IF;
    RETURN NULL;
END $$;

CREATE OR REPLACE TRIGGER campaigns_event AFTER UPDATE OF state ON herald.campaigns
    FOR EACH ROW WHEN (NEW.state IN ('finished', 'paused') AND OLD.state IS DISTINCT FROM NEW.state)
    EXECUTE FUNCTION herald._campaign_event();
