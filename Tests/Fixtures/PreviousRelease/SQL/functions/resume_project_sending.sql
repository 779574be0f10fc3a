-- resume_project_sending: ends an operator's pause (herald.pause_project_sending) of a
-- registered project. Quota pauses (herald.project_pauses) are FCM's and end by themselves.
-- Returns false when the project was not paused.
CREATE OR REPLACE FUNCTION herald.resume_project_sending(name text)
RETURNS boolean LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    p herald.projects := herald._known_project(resume_project_sending.name, 'herald.resume_project_sending');
BEGIN
    IF p.paused_reason IS NULL THEN
        RETURN false;
    END IF;
    UPDATE herald.projects r SET paused_reason = NULL, paused_at = NULL, updated_at = now() WHERE r.name = p.name;
    RETURN true;
END $$;
