-- _remove_project_before_360: herald.remove_project as releases before migration 360 had it
-- (without force, returning nothing), kept for calls of those releases in flight. 360 renamed it
-- aside instead of dropping it, so a call that resolved herald.remove_project before that herald
-- migrate committed still finds its function (it keeps its OID); this body hands the call to the
-- new remove_project, refused as before while the entry has pending jobs. Dropped by a later
-- release (docs/sql-layout.md).
CREATE OR REPLACE FUNCTION herald._remove_project_before_360(name text)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM herald.remove_project(_remove_project_before_360.name, false);
END
$$;
