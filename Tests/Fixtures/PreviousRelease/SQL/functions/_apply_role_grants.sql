-- _apply_role_grants: run by every herald migrate after the definitions: PUBLIC executes no herald
-- function (a new one starts with EXECUTE for PUBLIC unless the migrating role's default
-- privileges say otherwise), and each role recorded in herald.role_grants gets its kind again, so
-- what a migration added is granted too. A recorded role that no longer exists is skipped.
-- Returns how many roles were granted.
CREATE OR REPLACE FUNCTION herald._apply_role_grants() RETURNS integer
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    g record;
    n integer := 0;
BEGIN
    REVOKE ALL ON ALL FUNCTIONS IN SCHEMA herald FROM PUBLIC;
    FOR g IN SELECT r.role, r.kind FROM herald.role_grants r ORDER BY r.role LOOP
        IF EXISTS (SELECT 1 FROM pg_roles x WHERE x.rolname = g.role) THEN
            PERFORM herald.grant_role(g.role, g.kind);
            n := n + 1;
        END IF;
    END LOOP;
    RETURN n;
END
$$;
