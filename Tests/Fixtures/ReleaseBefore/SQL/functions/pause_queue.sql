CREATE OR REPLACE FUNCTION herald.pause_queue(name text) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog AS $$
BEGIN
    PERFORM herald._known_queue(pause_queue.name, 'herald.pause_queue');
    INSERT INTO herald.queues AS q (name, paused) VALUES (pause_queue.name, true)
    ON CONFLICT ON CONSTRAINT queues_pkey DO UPDATE SET paused = true, updated_at = now();
    PERFORM pg_notify('herald_jobs', '');
END $$;
