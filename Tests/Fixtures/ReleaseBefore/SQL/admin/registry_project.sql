-- One project of the registry (herald.projects) as a pool works it: the FCM project id its
-- credentials must be for, where they are (a path or env:VAR, never the key), its rate ceiling
-- (NULL: the pool's --max-rate) and why it is paused (NULL: it is not). No row: not registered.
SELECT p.fcm_project_id, p.credentials, p.max_rate, p.paused_reason
FROM herald.projects p
WHERE p.name = $1
