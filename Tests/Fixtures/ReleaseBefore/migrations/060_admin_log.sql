-- The operators' audit trail and the indexes the dashboard's dead-letter pages read.
--
-- admin_log: one row per action taken from `herald dashboard` or `herald dead` (retry, discard,
-- login failures are not actions and are not recorded). `ids` are dead-letter ids; `details`
-- holds the filter of a bulk action and the jobs created; `source` says from where (the
-- client's address for the dashboard, the user and host for the shell). Tokens never land here.
CREATE TABLE herald.admin_log (
    id      bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at      timestamptz NOT NULL DEFAULT now(),
    action  text        NOT NULL,
    ids     bigint[]    NOT NULL DEFAULT '{}',
    details jsonb       NOT NULL DEFAULT '{}',
    source  text        NOT NULL
);
CREATE INDEX admin_log_at ON herald.admin_log (at);

-- Filtering dead letters by queue, newest first, and counting them per queue for /metrics by an
-- index-only scan. Dead letters are written rarely, so the extra index costs the hot path nothing.
CREATE INDEX dead_letters_queue ON herald.dead_letters (queue, dead_at);
