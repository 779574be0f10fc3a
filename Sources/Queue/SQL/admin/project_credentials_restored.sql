-- A worker of registry project $1 holds an access token from its key again: a pause its key's
-- failure set (reason 'credentials: ...') is lifted; an operator's pause stays. Returns whether
-- it was lifted.
UPDATE herald.projects
SET paused_reason = NULL, paused_cause = NULL, paused_at = NULL, updated_at = now()
WHERE name = $1 AND paused_reason LIKE 'credentials: %'
RETURNING name
