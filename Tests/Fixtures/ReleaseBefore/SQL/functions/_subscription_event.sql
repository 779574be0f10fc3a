-- Delivery event subscription_failed (migration 130): FCM refused to subscribe or unsubscribe a
-- token to a topic (herald.record_topic_results), while any queue has events on.
CREATE OR REPLACE FUNCTION herald._subscription_event() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM herald.queues q WHERE q.events) THEN
        INSERT INTO herald.events (kind, token, detail)
        VALUES ('subscription_failed', NEW.token,
                jsonb_build_object('topic', NEW.topic, 'project', NEW.project, 'error', NEW.error));
    END IF;
    RETURN NULL;
END $$;

CREATE OR REPLACE TRIGGER topic_subscriptions_event AFTER UPDATE OF state ON herald.topic_subscriptions
    FOR EACH ROW WHEN (NEW.state = 'failed' AND OLD.state IS DISTINCT FROM NEW.state)
    EXECUTE FUNCTION herald._subscription_event();
