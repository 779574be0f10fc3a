-- project_registry: the registered Firebase projects by name, with where their credentials are
-- (a path or env:VAR, never a key), their rate limit (null: the pool's --max-rate) and their
-- state: enabled, or paused by an operator with the reason (herald.pause_project_sending; FCM's
-- quota pauses are in herald.project_pauses).
CREATE OR REPLACE VIEW herald.project_registry AS
    SELECT p.name, p.fcm_project_id, p.credentials, p.max_rate,
           CASE WHEN p.paused_reason IS NULL THEN 'enabled' ELSE 'paused' END AS state,
           p.paused_reason, p.paused_at, p.created_at, p.updated_at
    FROM herald.projects p
    ORDER BY p.name;
