-- revoke_role: takes back everything `role` was granted in schema herald (by grant_role or by
-- hand: tables, columns, sequences, functions, the schema itself) and, unless `forget` is false,
-- its record in herald.role_grants, so herald migrate does not grant it again. Only the schema
-- owner may run it.
CREATE OR REPLACE FUNCTION herald.revoke_role(role text, forget boolean DEFAULT true) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    grantee text := quote_ident(role);
BEGIN
    IF role IS NULL OR NOT EXISTS (SELECT 1 FROM pg_roles r WHERE r.rolname = revoke_role.role) THEN
        RAISE EXCEPTION 'herald.revoke_role: role % does not exist', quote_nullable(role)
            USING ERRCODE = 'undefined_object';
    END IF;
    -- Revoking a table's privileges takes its column privileges too.
    EXECUTE format('REVOKE ALL ON ALL TABLES IN SCHEMA herald FROM %s', grantee);
    EXECUTE format('REVOKE ALL ON ALL SEQUENCES IN SCHEMA herald FROM %s', grantee);
    EXECUTE format('REVOKE ALL ON ALL FUNCTIONS IN SCHEMA herald FROM %s', grantee);
    EXECUTE format('REVOKE ALL ON SCHEMA herald FROM %s', grantee);
    IF forget THEN
        DELETE FROM herald.role_grants g WHERE g.role = revoke_role.role;
    END IF;
END
$$;
