-- Apple refused APNs app $1 in a way every job of it would meet: a pool pauses it with reason $2
-- and cause $3 (apns_auth, apns_topic, apns_url), unless it is paused already (an operator's
-- reason stays). True when this paused it.
UPDATE herald.projects
SET paused_reason = $2, paused_cause = $3, paused_at = now(), updated_at = now()
WHERE name = $1 AND service = 'apns' AND paused_reason IS NULL
RETURNING true
