-- _claim_topic_work_before_280: herald.claim_topic_work as releases before migration 280 named
-- its parameters (p_project for the FCM project), kept for callers of those releases. 280 renamed
-- it aside instead of dropping it, so a call that resolved it before that herald migrate
-- committed still finds its function (it keeps its OID); this body hands the call to the new
-- claim_topic_work. Dropped by a later release (docs/sql-layout.md).
CREATE OR REPLACE FUNCTION herald._claim_topic_work_before_280(p_project text, p_worker text, p_limit integer,
                                                               p_lease_seconds double precision)
RETURNS TABLE (project text, topic text, token text, state text, generation bigint, attempts integer)
LANGUAGE sql SET search_path = pg_catalog, pg_temp AS $$
    SELECT * FROM herald.claim_topic_work(p_project, p_worker, p_limit, p_lease_seconds)
$$;
