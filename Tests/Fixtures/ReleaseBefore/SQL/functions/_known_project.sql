-- The registry entry (herald.projects) of a project named by an operator; an unknown name is an
-- error naming it. `caller` starts the message (herald.pause_project_sending, ...).
CREATE OR REPLACE FUNCTION herald._known_project(name text, caller text) RETURNS herald.projects
LANGUAGE plpgsql SET search_path = pg_catalog AS $$
DECLARE
    p herald.projects;
BEGIN
    IF _known_project.name IS NULL OR _known_project.name = '' THEN
        RAISE EXCEPTION '%: project name must not be empty', caller USING ERRCODE = 'invalid_parameter_value',
            HINT = 'Give the name of a registered project; herald.project_registry lists them.';
    END IF;
    SELECT * INTO p FROM herald.projects r WHERE r.name = _known_project.name FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION '%: no project named "%" in the registry', caller, left(_known_project.name, 100)
            USING ERRCODE = 'no_data_found',
                  HINT = 'herald.project_registry lists the projects; herald.add_project registers one.';
    END IF;
    RETURN p;
END $$;
