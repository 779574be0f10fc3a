-- Herald: a registry entry's pause says what decided it, and an entry can be corrected or removed
-- with its pending jobs.
--
-- herald.projects.paused_cause names what paused an entry, beside the reason's words:
-- 'operator' (herald.pause_project_sending), 'credentials' (a pool could not use its key),
-- 'apns_auth' (Apple refused the app's provider token: key id, team id, key or environment),
-- 'apns_topic' (Apple refused the app's topic: TopicDisallowed) or 'apns_url' (the APNs URL does
-- not lead to Apple's provider API). herald stats, the dashboard and
-- herald_project_paused_jobs{cause} read it instead of guessing from the reason. A pause set by a
-- pool of the previous release has none until it is lifted: readers take the reason's
-- 'credentials: ' prefix for 'credentials' and anything else for 'operator', as before.
--
-- herald.remove_project gains `force` (its pending jobs are dead-lettered first) and returns how
-- many. Its old signature is renamed aside (herald._remove_project_before_360), not dropped: it
-- keeps its OID, so a call that resolved herald.remove_project before this migrate committed still
-- finds its function, whose new body hands the call on (docs/sql-layout.md); the new signature is
-- defined from Sources/Queue/SQL/functions/remove_project.sql (a caller passing only the name is
-- not affected).

ALTER TABLE herald.projects
    ADD COLUMN paused_cause text
        CONSTRAINT projects_paused_cause_known CHECK (paused_cause IN ('operator', 'credentials', 'apns_auth', 'apns_topic', 'apns_url'));

UPDATE herald.projects
SET paused_cause = CASE
        WHEN paused_reason LIKE 'credentials: %' THEN 'credentials'
        WHEN paused_reason LIKE 'APNs: TopicDisallowed%' THEN 'apns_topic'
        WHEN paused_reason LIKE 'APNs: BadPath%' OR paused_reason LIKE 'APNs: MethodNotAllowed%' THEN 'apns_url'
        WHEN paused_reason LIKE 'APNs: %' THEN 'apns_auth'
        ELSE 'operator' END
WHERE paused_reason IS NOT NULL;

DO $$
DECLARE
    old regprocedure := to_regprocedure('herald.remove_project(text)');
BEGIN
    IF old IS NOT NULL THEN
        EXECUTE pg_catalog.format('ALTER FUNCTION %s RENAME TO _remove_project_before_360', old);
    END IF;
END
$$;
