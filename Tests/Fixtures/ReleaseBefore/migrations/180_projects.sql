-- Herald: the registry of Firebase projects (herald.projects), the first step towards one
-- deployment sending for several projects.
--
-- Each row names a project (what jobs and commands will use), the FCM project id its
-- service-account key belongs to, and WHERE that key is: an absolute file path, or env:VAR naming
-- an environment variable of the pool. Never the key itself: the CHECK on credentials refuses
-- anything else (JSON, a PEM key, any text with a line break or a brace), so no secret reaches
-- the database even through a hand-written INSERT. A project is enabled while paused_reason is
-- null; this pause is an operator's, for as long as they want, and is not the quota pause of
-- herald.project_pauses (FCM's answer, for a few seconds).
--
-- Jobs are addressed to a project from migration 190 on (herald.jobs.project).
-- The functions that change the registry live in Sources/Queue/SQL/functions
-- (add_project, pause_project_sending, resume_project_sending, remove_project), the listing in
-- Sources/Queue/SQL/views/project_registry.sql.

CREATE TABLE herald.projects (
    name           text PRIMARY KEY
                   CONSTRAINT projects_name_slug CHECK (name ~ '^[a-z0-9][a-z0-9_-]{0,62}$'),
    fcm_project_id text NOT NULL CONSTRAINT projects_fcm_project_id_key UNIQUE
                   CONSTRAINT projects_fcm_project_id_shape CHECK (fcm_project_id ~ '^[a-z0-9][a-z0-9.:_-]{0,99}$'),
    credentials    text NOT NULL
                   CONSTRAINT projects_credentials_reference CHECK (
                       length(credentials) <= 1024 AND credentials !~ '-----'
                       AND (credentials ~ '^/[^[:cntrl:]{}"'']*$'
                            OR credentials ~ '^env:[A-Za-z_][A-Za-z0-9_]{0,127}$')),
    max_rate       double precision
                   CONSTRAINT projects_max_rate_positive CHECK (max_rate > 0 AND max_rate < 'Infinity'::double precision),
    paused_reason  text,
    paused_at      timestamptz,
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT projects_paused_when CHECK ((paused_reason IS NULL) = (paused_at IS NULL))
);
