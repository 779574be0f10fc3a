-- _claim_wait_before_280: herald._claim_wait as releases before migration 280 named its
-- parameters (p_project for the FCM project's tokens), kept for callers of those releases. 280
-- renamed it aside instead of dropping it, so a call that resolved it before that herald migrate
-- committed still finds its function (it keeps its OID); this body hands the call to the new one.
-- Dropped by a later release (docs/sql-layout.md).
CREATE OR REPLACE FUNCTION herald._claim_wait_before_280(p_wanted integer, p_got integer,
                                                         p_project double precision, p_project_rate double precision,
                                                         p_queue_tokens double precision, p_queue_rate double precision,
                                                         p_campaign_tokens double precision, p_campaign_rate double precision,
                                                         p_room integer)
RETURNS double precision LANGUAGE sql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT herald._claim_wait(p_wanted, p_got, p_project, p_project_rate, p_queue_tokens, p_queue_rate,
                              p_campaign_tokens, p_campaign_rate, p_room)
$$;
