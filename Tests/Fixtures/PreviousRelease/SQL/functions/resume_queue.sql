CREATE OR REPLACE FUNCTION herald.resume_queue(name text) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM herald._known_queue(resume_queue.name, 'herald.resume_queue');
    UPDATE herald.queues q SET paused = false, updated_at = now() WHERE q.name = resume_queue.name;
    PERFORM pg_notify('herald_jobs', '');
END $$;
