-- Queues you can steer. A queue exists once it has jobs, dead letters or settings.
CREATE OR REPLACE FUNCTION herald._known_queue(name text, caller text) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF _known_queue.name IS NULL OR _known_queue.name = '' THEN
        RAISE EXCEPTION '%: queue name must not be empty', caller USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM herald.queues q WHERE q.name = _known_queue.name)
       AND NOT EXISTS (SELECT 1 FROM herald.jobs j WHERE j.queue = _known_queue.name)
       AND NOT EXISTS (SELECT 1 FROM herald.dead_letters d WHERE d.queue = _known_queue.name) THEN
        RAISE EXCEPTION '%: no queue named "%" (no job, dead letter or settings use that name)', caller, _known_queue.name
            USING ERRCODE = 'no_data_found',
                  HINT = 'herald.set_queue_limits creates the settings of a queue before its first job.';
    END IF;
END $$;
