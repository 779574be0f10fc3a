-- apns_apps: the registered APNs apps by name (herald.projects of service 'apns'), with where
-- their .p8 key is (a path or env:VAR, never the key), key id, team id, topic (bundle id),
-- environment (sandbox or production), rate limit (null: the pool's --max-rate) and state:
-- enabled, or paused with the reason and what decided it (paused_cause: operator, credentials,
-- apns_auth, apns_topic, apns_url; added last, migration 360). FCM projects are in
-- herald.project_registry.
CREATE OR REPLACE VIEW herald.apns_apps AS
    SELECT p.name, p.credentials AS key_file, p.apns_key_id AS key_id, p.apns_team_id AS team_id,
           p.apns_topic AS topic, p.apns_sandbox AS sandbox, p.max_rate,
           CASE WHEN p.paused_reason IS NULL THEN 'enabled' ELSE 'paused' END AS state,
           p.paused_reason, p.paused_at, p.created_at, p.updated_at, p.paused_cause
    FROM herald.projects p
    WHERE p.service = 'apns'
    ORDER BY p.name;
