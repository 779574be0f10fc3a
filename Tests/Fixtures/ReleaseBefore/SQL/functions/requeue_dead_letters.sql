-- requeue_dead_letters puts each chosen dead letter back as a fresh job (attempts reset; a dry run
-- stays a dry run and the project stays the same) and
-- removes it, returning (dead_letter_id, job_id) for each. Like herald.retry_dead_letter, a dead
-- letter whose dedupe_key is held by a pending job stays where it is: its message is not the
-- pending job's, whatever the key says. Letters another session is handling are skipped
-- (SKIP LOCKED), so two operators replaying the same class at once never duplicate a message.
CREATE OR REPLACE FUNCTION herald.requeue_dead_letters(ids bigint[] DEFAULT NULL, queue text DEFAULT NULL,
                                            reason_like text DEFAULT NULL)
RETURNS TABLE (dead_letter_id bigint, job_id bigint)
LANGUAGE plpgsql SET search_path = pg_catalog AS $$
DECLARE
    dead herald.dead_letters;
    new_id bigint;
BEGIN
    FOR dead IN
        SELECT * FROM herald.dead_letters d
        WHERE ($1 IS NULL OR d.id = ANY ($1))
          AND ($2 IS NULL OR d.queue = $2)
          AND ($3 IS NULL OR d.reason LIKE $3)
        ORDER BY d.id
        FOR UPDATE SKIP LOCKED
    LOOP
        new_id := NULL;
        INSERT INTO herald.jobs AS j (queue, kind, priority, message, max_attempts, dedupe_key, validate_only, project)
        VALUES (dead.queue, dead.kind, dead.priority, dead.message, dead.max_attempts, dead.dedupe_key, dead.validate_only,
                dead.project)
        ON CONFLICT (dedupe_key) WHERE dedupe_key IS NOT NULL AND state IN ('available', 'running') DO NOTHING
        RETURNING j.id INTO new_id;
        CONTINUE WHEN new_id IS NULL;
        DELETE FROM herald.dead_letters d WHERE d.id = dead.id;
        dead_letter_id := dead.id;
        job_id := new_id;
        RETURN NEXT;
    END LOOP;
END $$;
