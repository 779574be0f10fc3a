-- pause_project_sending: an operator's pause of a registered project, with a reason, until
-- herald.resume_project_sending. Not the quota pause: herald.project_pauses (and
-- Sources/Queue/SQL/pause_project.sql) hold the few seconds FCM asks a project to wait after a
-- QUOTA_EXCEEDED, set and lifted by the pools themselves. Its cause (herald.projects.paused_cause)
-- is 'operator'. Returns false when the project was paused already (a reason given then replaces
-- the old one, and the pause becomes the operator's).
CREATE OR REPLACE FUNCTION herald.pause_project_sending(name text, reason text DEFAULT NULL)
RETURNS boolean LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    p herald.projects := herald._known_project(pause_project_sending.name, 'herald.pause_project_sending');
    why text := coalesce(nullif(btrim(pause_project_sending.reason), ''), 'paused with herald.pause_project_sending');
BEGIN
    IF length(why) > 500 THEN
        RAISE EXCEPTION 'herald.pause_project_sending: the reason is % characters long; give at most 500', length(why)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p.paused_reason IS NOT NULL THEN
        IF nullif(btrim(pause_project_sending.reason), '') IS NOT NULL AND why <> p.paused_reason THEN
            UPDATE herald.projects r SET paused_reason = why, paused_cause = 'operator', updated_at = now() WHERE r.name = p.name;
        END IF;
        RETURN false;
    END IF;
    UPDATE herald.projects r SET paused_reason = why, paused_cause = 'operator', paused_at = now(), updated_at = now()
    WHERE r.name = p.name;
    RETURN true;
END $$;
