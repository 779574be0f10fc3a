-- Herald: legacy payloads as jobs, dry runs, and results in the legacy shape.
--
-- * herald.jobs.validate_only: the request carries "validate_only": true, so FCM validates the
--   message and delivers nothing. Such a job still ends 'completed' (with the name FCM returned);
--   validate_only = true on a completed job means "validated, not delivered".
-- * herald.enqueue(..., validate_only => true) sets it; legacy dry_run sets it too.
-- * herald.enqueue_legacy(payload, ...) / herald.enqueue_legacy_form(body, ...): one job per
--   target, in target order, or SQLSTATE 22023 and nothing enqueued.
-- * A legacy payload written straight into herald.jobs.message (by code written for the old API)
--   is recognised by the rule of docs/legacy.md 4.1. A valid multicast row is fanned out here into one
--   row per registration token (the inserted row keeps the first token, so INSERT ... RETURNING id
--   still answers); the worker translates each single-target row when it builds the request, so
--   apns-expiration counts from that moment on every attempt. A row the translation refuses is
--   left as it is, never raising in the application's transaction, and the worker dead-letters it
--   with the Table 9 code (docs/legacy.md 3) and path before any request.
-- * herald.legacy_result(job_ids) answers in the legacy multicast shape (docs/legacy.md 4.10).

ALTER TABLE herald.jobs ADD COLUMN validate_only boolean NOT NULL DEFAULT false;
-- A dead letter remembers it, so replaying a dry run never delivers it for real.
ALTER TABLE herald.dead_letters ADD COLUMN validate_only boolean NOT NULL DEFAULT false;

-- The jobs of one fanned-out legacy request, so legacy_result can name the multicast and a row
-- written by a trigger can find its siblings (herald.legacy_multicast).
CREATE TABLE herald.legacy_multicasts (
    job_id       bigint PRIMARY KEY,
    multicast_id bigint NOT NULL,
    position     integer NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX legacy_multicasts_multicast ON herald.legacy_multicasts (multicast_id, position);
CREATE INDEX legacy_multicasts_created ON herald.legacy_multicasts (created_at);

-- enqueue's ON CONFLICT names the predicate of jobs_dedupe as migration 040 made it (scheduled
-- jobs are pending too).
DROP FUNCTION IF EXISTS herald.enqueue(jsonb, timestamptz, text, integer, integer, text);
