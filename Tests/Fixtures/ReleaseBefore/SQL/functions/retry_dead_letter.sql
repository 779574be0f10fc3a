-- retry_dead_letter: puts a dead letter back as a fresh job (attempts reset, validate_only and the
-- project kept),
-- removes the dead letter and returns the new job's id.
CREATE OR REPLACE FUNCTION herald.retry_dead_letter(dead_letter_id bigint)
RETURNS bigint LANGUAGE plpgsql SET search_path = pg_catalog AS $$
DECLARE
    dead herald.dead_letters;
    new_id bigint;
BEGIN
    SELECT * INTO dead FROM herald.dead_letters d WHERE d.id = dead_letter_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'herald.retry_dead_letter: no dead letter with id %', dead_letter_id;
    END IF;
    INSERT INTO herald.jobs (queue, kind, priority, message, max_attempts, dedupe_key, validate_only, project)
    VALUES (dead.queue, dead.kind, dead.priority, dead.message, dead.max_attempts, dead.dedupe_key, dead.validate_only, dead.project)
    ON CONFLICT (dedupe_key) WHERE dedupe_key IS NOT NULL AND state IN ('scheduled', 'available', 'running') DO NOTHING
    RETURNING id INTO new_id;
    IF new_id IS NULL THEN
        -- Keep the dead letter: its message is not the pending job's, whatever the key says.
        RAISE EXCEPTION 'herald.retry_dead_letter: job % with dedupe_key % is pending; the dead letter % is kept',
            (SELECT j.id FROM herald.jobs j WHERE j.dedupe_key = dead.dedupe_key AND j.state IN ('scheduled', 'available', 'running')),
            dead.dedupe_key, dead_letter_id;
    END IF;
    DELETE FROM herald.dead_letters d WHERE d.id = dead_letter_id;
    RETURN new_id;
END $$;
