-- _claim_allowance_before_280: herald._claim_allowance as releases before migration 280 named
-- its parameters (p_project for the FCM project's tokens), kept for callers of those releases.
-- 280 renamed it aside instead of dropping it, so a call that resolved it before that herald
-- migrate committed still finds its function (it keeps its OID); this body hands the call to the
-- new one. Dropped by a later release (docs/sql-layout.md).
CREATE OR REPLACE FUNCTION herald._claim_allowance_before_280(
    p_queue text, p_campaign bigint, p_wanted integer, p_project double precision,
    p_locked_queues text[], p_locked_campaigns bigint[], p_now timestamptz,
    OUT allowed integer, OUT busy boolean,
    OUT queue_rate double precision, OUT queue_tokens double precision, OUT room integer,
    OUT campaign_rate double precision, OUT campaign_tokens double precision, OUT campaign_state text,
    OUT label text)
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    SELECT * INTO allowed, busy, queue_rate, queue_tokens, room, campaign_rate, campaign_tokens, campaign_state, label
    FROM herald._claim_allowance(p_queue, p_campaign, p_wanted, p_project, p_locked_queues, p_locked_campaigns, p_now);
END
$$;
