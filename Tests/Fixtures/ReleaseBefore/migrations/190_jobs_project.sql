-- Herald: jobs addressed to a project of the registry (herald.projects, migration 180).
--
-- * herald.jobs.project: the registry name of the Firebase project the job is sent for; NULL: the
--   pool's own credentials (GOOGLE_APPLICATION_CREDENTIALS), as before, so existing deployments
--   change nothing. A name not in the registry is refused at INSERT (trigger jobs_project,
--   Sources/Queue/SQL/functions/_check_job_project.sql), by herald.enqueue or by hand.
-- * herald.dead_letters.project: kept with the dead letter, so a replay goes out for the same
--   project, never with another project's credentials.
-- * jobs_claim_unit leads with the project: a pool claims one project's jobs (`herald work
--   --project NAME`, or those of no project), and another project's backlog is never scanned.
--   Rebuilding it reads herald.jobs' available rows once, under a lock that holds inserts back.
-- * claim_batch, _claim_units, _claim_unit, enqueue and enqueue_multicast gain a parameter: their old signatures
--   are dropped here and defined again from Sources/Queue/SQL/functions.

ALTER TABLE herald.jobs ADD COLUMN project text;
ALTER TABLE herald.dead_letters ADD COLUMN project text;

DROP INDEX IF EXISTS herald.jobs_claim_unit;
CREATE INDEX jobs_claim_unit ON herald.jobs ((coalesce(project, '')), queue, (coalesce(campaign_id, 0)), priority, run_at, id)
    WHERE state = 'available';

DROP FUNCTION IF EXISTS herald.claim_batch(text[], integer, double precision, text, text, double precision, integer, timestamptz);
DROP FUNCTION IF EXISTS herald._claim_units(text[]);
DROP FUNCTION IF EXISTS herald._claim_unit(text, bigint, integer, double precision, text, text, timestamptz);
DROP FUNCTION IF EXISTS herald.enqueue(jsonb, timestamptz, text, integer, integer, text, boolean, bigint, interval);
DROP FUNCTION IF EXISTS herald.enqueue_multicast(jsonb, text[], timestamptz, text, integer, integer, text, boolean, bigint);
