-- Herald: APNs apps in the project registry, and APNs jobs in herald.jobs.
--
-- An entry of herald.projects is now of a service: 'fcm' (every entry so far: a Firebase project,
-- fcm_project_id set) or 'apns' (an app of Apple's provider API: the key id, team id and topic
-- of its token-based key, and whether it sends to the sandbox). Both kinds share one namespace,
-- so the per-project machinery (pauses, jobs.project, rates, metrics, the dashboard) serves an
-- APNs app as it serves an FCM project. The credentials column of an APNs app says where its
-- .p8 key is (a path or env:VAR, never the key: the CHECK of migration 180 holds for it too).
-- Whatever lists FCM projects to work or send them reads service = 'fcm' only.
--
-- herald.apns_rules holds the APNs message rules of the binary that migrated (Sources/FCM/Rules/
-- apns-rules.json, loaded by every herald migrate through herald.load_apns_rules), read by
-- herald.validate_apns_message and the trigger jobs_apns (Sources/Queue/SQL/functions).
--
-- herald.enqueue gains apns_app: its old signature is dropped here and defined again from
-- Sources/Queue/SQL/functions/enqueue.sql (callers passing arguments by position or by their
-- names are not affected).

ALTER TABLE herald.projects
    ADD COLUMN service text NOT NULL DEFAULT 'fcm'
        CONSTRAINT projects_service_known CHECK (service IN ('fcm', 'apns')),
    ADD COLUMN apns_key_id text
        CONSTRAINT projects_apns_key_id_shape CHECK (apns_key_id ~ '^[A-Z0-9]{10}$'),
    ADD COLUMN apns_team_id text
        CONSTRAINT projects_apns_team_id_shape CHECK (apns_team_id ~ '^[A-Z0-9]{10}$'),
    ADD COLUMN apns_topic text
        CONSTRAINT projects_apns_topic_shape CHECK (apns_topic ~ '^[A-Za-z0-9][A-Za-z0-9.-]{0,154}$'),
    ADD COLUMN apns_sandbox boolean;

ALTER TABLE herald.projects ALTER COLUMN fcm_project_id DROP NOT NULL;

-- Each kind has exactly its own fields.
ALTER TABLE herald.projects ADD CONSTRAINT projects_service_fields CHECK (
    CASE service
    WHEN 'fcm' THEN fcm_project_id IS NOT NULL AND apns_key_id IS NULL AND apns_team_id IS NULL
                    AND apns_topic IS NULL AND apns_sandbox IS NULL
    ELSE fcm_project_id IS NULL AND apns_key_id IS NOT NULL AND apns_team_id IS NOT NULL
         AND apns_topic IS NOT NULL AND apns_sandbox IS NOT NULL
    END);

-- Beside the definition, the lists the check reads for every APNs job, taken from it when it
-- is loaded, so a message that passes is judged with operators alone (no query per rule).
CREATE TABLE herald.apns_rules (
    id              boolean PRIMARY KEY DEFAULT true CONSTRAINT apns_rules_one_row CHECK (id),
    definition      jsonb NOT NULL,
    fcm_targets     text[] NOT NULL,
    apns_fields     text[] NOT NULL,
    priorities      text[] NOT NULL,
    push_types      jsonb NOT NULL,   -- {"alert": {...the rule file's entry...}, ...}
    aps_field_names text[] NOT NULL,
    loaded_at       timestamptz NOT NULL DEFAULT now()
);

DROP FUNCTION IF EXISTS herald.enqueue(jsonb, timestamptz, text, integer, integer, text, boolean, bigint, interval, text);
