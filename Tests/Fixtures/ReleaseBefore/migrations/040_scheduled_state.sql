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
