-- Herald: a quota answer slows every worker of the project, not only the process that got it.
--
-- When FCM answers QUOTA_EXCEEDED for the project or a topic, the worker that got it records
-- how long to hold back here; every worker claiming for that project skips claiming until then.

CREATE TABLE herald.sender_pauses (
    project_id   text PRIMARY KEY,
    paused_until timestamptz NOT NULL,
    reason       text
);
