-- Herald: roles by what they do, and nothing for PUBLIC.
--
-- PostgreSQL lets PUBLIC execute every new function; with USAGE on schema herald, any role could
-- then call every herald function, the registry's and the pool's included. From here on, PUBLIC
-- executes none of them, and the functions this role creates later start so too (the grants of a
-- role kind, herald.grant_role, are applied again by every herald migrate: functions/_apply_role_grants.sql).
--
-- role_grants records which role was given which kind (producer, reader, operator), so that
-- herald migrate can grant what later migrations add. admin_log records which role took each
-- action: operators write it only through herald.record_admin_action, which stamps their role.
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA herald FROM PUBLIC;
REVOKE ALL ON ALL TABLES IN SCHEMA herald FROM PUBLIC;
REVOKE ALL ON ALL SEQUENCES IN SCHEMA herald FROM PUBLIC;
REVOKE ALL ON SCHEMA herald FROM PUBLIC;
-- Per schema, default privileges can only add to the global ones, so EXECUTE is taken from PUBLIC
-- for every function this role creates in this database (Herald's role is its own, per the README).
ALTER DEFAULT PRIVILEGES REVOKE EXECUTE ON FUNCTIONS FROM PUBLIC;
ALTER DEFAULT PRIVILEGES IN SCHEMA herald REVOKE ALL ON TABLES FROM PUBLIC;
ALTER DEFAULT PRIVILEGES IN SCHEMA herald REVOKE ALL ON SEQUENCES FROM PUBLIC;

CREATE TABLE herald.role_grants (
    role       text        PRIMARY KEY,
    kind       text        NOT NULL CHECK (kind IN ('producer', 'reader', 'operator')),
    granted_at timestamptz NOT NULL DEFAULT now()
);

ALTER TABLE herald.admin_log ADD COLUMN recorded_by text NOT NULL DEFAULT session_user;
