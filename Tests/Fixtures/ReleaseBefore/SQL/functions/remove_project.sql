-- remove_project: takes a project out of the registry. Only the entry goes: the key file or
-- variable it named is left where it is. Refused while jobs of the project are pending
-- (scheduled, available or running): they would be left with no pool to send them; cancel or
-- let them finish first. Its dead letters stay, and cannot be replayed until it is added again.
CREATE OR REPLACE FUNCTION herald.remove_project(name text)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog AS $$
DECLARE
    p herald.projects := herald._known_project(remove_project.name, 'herald.remove_project');
    pending bigint;
BEGIN
    SELECT count(*) INTO pending FROM herald.jobs j
    WHERE j.project = p.name AND j.state IN ('scheduled', 'available', 'running');
    IF pending > 0 THEN
        RAISE EXCEPTION 'herald.remove_project: project "%" has % pending jobs; nothing was removed', p.name, pending
            USING ERRCODE = 'object_in_use',
                  HINT = 'Let them finish (herald work --project ' || p.name || ' --drain), or delete or cancel them, then remove the project.';
    END IF;
    DELETE FROM herald.projects r WHERE r.name = p.name;
END $$;
