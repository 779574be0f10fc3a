-- project_registry: the registered Firebase projects by name, with where their credentials are
-- (a path or env:VAR, never a key), their rate limit (null: the pool's --max-rate) and their
-- state: enabled, or paused by an operator with the reason (herald.pause_project_sending; FCM's
-- quota pauses are in herald.project_pauses). `service` (added last, migration 290) is 'fcm', or
-- 'apns' for an APNs app (fcm_project_id null; its own fields are in herald.apns_apps);
-- `paused_cause` (migration 360) what decided a pause: operator, credentials, apns_auth,
-- apns_topic or apns_url; `android_apps` (migration 380): the Firebase app ids whose delivery
-- data FCM is asked for.
CREATE OR REPLACE VIEW herald.project_registry AS
    SELECT p.name, p.fcm_project_id, p.credentials, p.max_rate,
           CASE WHEN p.paused_reason IS NULL THEN 'enabled' ELSE 'paused' END AS state,
           p.paused_reason, p.paused_at, p.created_at, p.updated_at, p.service, p.paused_cause, p.android_apps
    FROM herald.projects p
    ORDER BY p.name;
