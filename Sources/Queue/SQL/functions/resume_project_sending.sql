-- resume_project_sending: ends the pause (herald.pause_project_sending, or one a pool set) of a
-- registered project. Quota pauses (herald.project_pauses) are FCM's and end by themselves.
-- Lifts a pause of any cause (an operator's, a refused key's, Apple's refusal). Returns false
-- when the project was not paused.
CREATE OR REPLACE FUNCTION herald.resume_project_sending(name text)
RETURNS boolean LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    p herald.projects := herald._known_project(resume_project_sending.name, 'herald.resume_project_sending');
BEGIN
    IF p.paused_reason IS NULL THEN
        RETURN false;
    END IF;
    UPDATE herald.projects r SET paused_reason = NULL, paused_cause = NULL, paused_at = NULL, updated_at = now() WHERE r.name = p.name;
    -- Every pool claims its jobs at once, and takes its entry up afresh (a key, team or topic
    -- corrected while it was paused), without waiting for its next reading of the registry.
    PERFORM pg_notify('herald_jobs', 'registry:' || p.name);
    RETURN true;
END $$;
