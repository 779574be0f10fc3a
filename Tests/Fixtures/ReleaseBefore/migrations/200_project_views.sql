-- Herald: several Firebase projects seen per project, and campaigns and device-group operations
-- addressed to one.
--
-- * dead_letters_project: the dead letters of registry projects, so `herald stats`, the
--   dashboard and its JSON API count each project's dead letters without reading the table
--   (partial: the dead letters of no project, all of them before projects, are left out).
-- * herald.campaigns.project: the registry project a campaign sends for
--   (herald.create_campaign(..., project => 'name')); its jobs take it (trigger
--   jobs_campaign_project, Sources/Queue/SQL/functions/_campaign_job_project.sql), and a job of
--   the campaign naming another project is refused.
-- * create_campaign and enqueue_group_op gain a parameter project: their old signatures are
--   dropped here and defined again from Sources/Queue/SQL/functions.

CREATE INDEX dead_letters_project ON herald.dead_letters (project) WHERE project IS NOT NULL;

ALTER TABLE herald.campaigns ADD COLUMN project text;

DROP FUNCTION IF EXISTS herald.create_campaign(text, double precision, text, integer);
DROP FUNCTION IF EXISTS herald.enqueue_group_op(text, text, text[], text, timestamptz);
