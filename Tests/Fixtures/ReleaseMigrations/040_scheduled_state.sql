-- Herald: jobs due later wait in state 'scheduled', outside the claim index.
--
-- The claim walks the partial index jobs_claim (priority, run_at, id) of available jobs. Jobs
-- whose run_at is in the future used to sit in that index too, so a million urgent jobs
-- scheduled for tomorrow were walked past on every claim. Now a job whose run_at is ahead is
-- 'scheduled' (its own index, by run_at), and becomes 'available' when due: every worker
-- promotes the due jobs it finds when its timer for the earliest run_at fires, and on each poll.
--
-- A plain INSERT needs no change: a row trigger (which runs only for rows due later, thanks to
-- its WHEN clause) makes a future job 'scheduled'. An UPDATE that moves an available job's
-- run_at into the future does the same.

ALTER TABLE herald.jobs DROP CONSTRAINT jobs_state_check;
ALTER TABLE herald.jobs ADD CONSTRAINT jobs_state_check
    CHECK (state IN ('scheduled', 'available', 'running', 'completed', 'discarded', 'cancelled'));

CREATE INDEX jobs_scheduled ON herald.jobs (run_at, id) WHERE state = 'scheduled';

CREATE FUNCTION herald._schedule_job() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog AS $$
BEGIN
    NEW.state := 'scheduled';
    RETURN NEW;
END $$;

CREATE TRIGGER jobs_schedule BEFORE INSERT OR UPDATE OF state, run_at ON herald.jobs
    FOR EACH ROW WHEN (NEW.state = 'available' AND NEW.run_at > now())
    EXECUTE FUNCTION herald._schedule_job();

UPDATE herald.jobs SET state = 'scheduled' WHERE state = 'available' AND run_at > now();

-- The lease index covers rows that hold a lease, not rows whose state is 'running'. A partial
-- index on state = 'running' invited the planner, whenever statistics said few jobs were
-- running, to walk it for every outcome recorded (a nested loop over all running jobs: 580 ms
-- for a batch of 256 beside a million scheduled rows, instead of 5 ms through the primary key).
DROP INDEX herald.jobs_lease;
CREATE INDEX jobs_lease ON herald.jobs (locked_until) WHERE locked_until IS NOT NULL;

-- A dedupe key is taken by any job not yet finished, scheduled ones included.
DROP INDEX herald.jobs_dedupe;
CREATE UNIQUE INDEX jobs_dedupe ON herald.jobs (dedupe_key)
    WHERE dedupe_key IS NOT NULL AND state IN ('scheduled', 'available', 'running');

CREATE OR REPLACE FUNCTION herald.enqueue(message jsonb, run_at timestamptz DEFAULT now(),
                                          queue text DEFAULT 'default', priority integer DEFAULT 0,
                                          max_attempts integer DEFAULT 25, dedupe_key text DEFAULT NULL)
RETURNS bigint LANGUAGE plpgsql SET search_path = pg_catalog AS $$
#variable_conflict use_column
DECLARE
    new_id bigint;
BEGIN
    IF enqueue.message IS NULL THEN
        RAISE EXCEPTION 'herald.enqueue: message must not be null';
    END IF;
    -- Insert, or find the pending job holding the key; if that one finishes in between, insert again.
    LOOP
        INSERT INTO herald.jobs (message, run_at, queue, priority, max_attempts, dedupe_key)
        VALUES (enqueue.message, coalesce(enqueue.run_at, now()), coalesce(enqueue.queue, 'default'),
                coalesce(enqueue.priority, 0), coalesce(enqueue.max_attempts, 25), enqueue.dedupe_key)
        ON CONFLICT (dedupe_key) WHERE dedupe_key IS NOT NULL AND state IN ('scheduled', 'available', 'running') DO NOTHING
        RETURNING id INTO new_id;
        EXIT WHEN new_id IS NOT NULL;
        SELECT j.id INTO new_id FROM herald.jobs j
        WHERE j.dedupe_key = enqueue.dedupe_key AND j.state IN ('scheduled', 'available', 'running');
        EXIT WHEN new_id IS NOT NULL;
    END LOOP;
    RETURN new_id;
END $$;

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
    INSERT INTO herald.jobs (queue, kind, priority, message, max_attempts, dedupe_key)
    VALUES (dead.queue, dead.kind, dead.priority, dead.message, dead.max_attempts, dead.dedupe_key)
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

-- queue_stats: per queue and state, the count; for available jobs the age of the oldest one;
-- `scheduled` repeats the count of jobs due later (kept for queries written before this state).
CREATE OR REPLACE VIEW herald.queue_stats AS
    SELECT queue, state, count(*) AS count,
           now() - min(run_at) FILTER (WHERE state = 'available') AS oldest_available_age,
           count(*) FILTER (WHERE state = 'scheduled') AS scheduled
    FROM herald.jobs GROUP BY queue, state
    UNION ALL
    SELECT queue, 'dead', count(*), NULL, 0 FROM herald.dead_letters GROUP BY queue;
