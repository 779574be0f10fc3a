-- Herald: sending at FCM's limits.
--
-- * herald.jobs.snoozes: how many times a quota answer (QUOTA_EXCEEDED: a device's, a topic's
--   or the project's limit) put the job back. Such an answer says nothing about the message, so
--   the first ones do not count against max_attempts (record_outcomes.sql, outcome "snooze");
--   past the worker's cap they do, so a target that never accepts still ends in a dead letter.
-- * herald.project_rates.adapted_per_second / adapted_at: the rate the project's workers found
--   FCM accepts, shared by every pool. After a project quota answer a worker lowers it (to a
--   share of the rate it had, written with the time); from then on every worker raises it again
--   a little each second while FCM accepts, up to herald work --max-rate (the ceiling), as TCP
--   finds a link's rate. NULL: nothing was refused yet, the ceiling applies.

ALTER TABLE herald.jobs ADD COLUMN snoozes integer NOT NULL DEFAULT 0;

ALTER TABLE herald.project_rates
    ADD COLUMN adapted_per_second double precision CHECK (adapted_per_second > 0),
    ADD COLUMN adapted_at timestamptz;
