-- _give_back_project_tokens_before_280: herald._give_back_project_tokens as releases before
-- migration 280 named its parameters (p_project for the FCM project), kept for callers of those
-- releases. 280 renamed it aside instead of dropping it, so a call that resolved it before that
-- herald migrate committed still finds its function (it keeps its OID); this body hands the call
-- to the new one. Dropped by a later release (docs/sql-layout.md).
CREATE OR REPLACE FUNCTION herald._give_back_project_tokens_before_280(p_project text, p_tokens double precision) RETURNS void
LANGUAGE sql SET search_path = pg_catalog, pg_temp AS $$
    SELECT herald._give_back_project_tokens(p_project, p_tokens)
$$;
