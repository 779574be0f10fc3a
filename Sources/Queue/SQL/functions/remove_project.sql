-- remove_project: takes a project out of the registry. Only the entry goes: the key file or
-- variable it named is left where it is.
CREATE OR REPLACE FUNCTION herald.remove_project(name text)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog AS $$
DECLARE
    p herald.projects := herald._known_project(remove_project.name, 'herald.remove_project');
BEGIN
    DELETE FROM herald.projects r WHERE r.name = p.name;
END $$;
