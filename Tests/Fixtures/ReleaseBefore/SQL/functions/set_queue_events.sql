-- set_queue_events: whether the queue's jobs write delivery events to herald.events (completed,
-- dead, discarded, pruned). Off by default: it costs a row per job. Campaign events
-- (campaign_finished, campaign_paused) and subscription_failed are written while any queue has
-- events on.
CREATE OR REPLACE FUNCTION herald.set_queue_events(queue text, enabled boolean)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog AS $$
BEGIN
    IF set_queue_events.queue IS NULL OR set_queue_events.queue = '' THEN
        RAISE EXCEPTION 'herald.set_queue_events: queue name must not be empty' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF set_queue_events.enabled IS NULL THEN
        RAISE EXCEPTION 'herald.set_queue_events: enabled must be true or false, not null (queue %)', set_queue_events.queue
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    INSERT INTO herald.queues AS q (name, events) VALUES (set_queue_events.queue, set_queue_events.enabled)
    ON CONFLICT ON CONSTRAINT queues_pkey DO UPDATE SET events = excluded.events, updated_at = now();
END $$;
