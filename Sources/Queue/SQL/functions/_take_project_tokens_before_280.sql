-- _take_project_tokens_before_280: herald.take_project_tokens as releases before migration 280
-- named its parameters (p_project for the FCM project), kept for callers of those releases. 280
-- renamed it aside instead of dropping it, so a call that resolved it before that herald migrate
-- committed still finds its function (it keeps its OID); this body hands the call to the new
-- take_project_tokens. Dropped by a later release (docs/sql-layout.md).
CREATE OR REPLACE FUNCTION herald._take_project_tokens_before_280(p_project text, p_rate double precision, p_wanted integer,
                                                                  p_now timestamptz DEFAULT NULL)
RETURNS TABLE (granted integer, wait_seconds double precision)
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    RETURN QUERY SELECT * FROM herald.take_project_tokens(p_project, p_rate, p_wanted, p_now);
END
$$;
