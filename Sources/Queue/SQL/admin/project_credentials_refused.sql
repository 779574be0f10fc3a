-- A pool's worker cannot use the key of registry project $1 ($2: why, naming the file or
-- variable, never the key): the project is paused with that reason, so `herald projects list`
-- and the claim see it, unless an operator paused it (their reason stays). The worker tries again
-- later, and its first success lifts this pause (project_credentials_restored.sql).
UPDATE herald.projects
SET paused_reason = $2, paused_cause = 'credentials', paused_at = now(), updated_at = now()
WHERE name = $1 AND (paused_reason IS NULL OR paused_reason LIKE 'credentials: %') AND paused_reason IS DISTINCT FROM $2
