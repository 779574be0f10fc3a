-- A pair that got p_got jobs, all it was allowed and fewer than the p_wanted of its share, was
-- held back by a limit: in how many seconds the binding one lets jobs go again. For each bucket
-- that ran short (the FCM project's p_fcm_project_tokens, the queue's, the campaign's: tokens
-- before this claim, and their rates), when it holds half its burst again; for a queue out of
-- room (max_in_flight), shortly. The soonest of them; NULL when none ran short.
-- Inlined into the claim, so no SET clause: its operators name their schema (see _burst.sql).
CREATE OR REPLACE FUNCTION herald._claim_wait(p_wanted integer, p_got integer,
                                              p_fcm_project_tokens double precision, p_fcm_project_rate double precision,
                                              p_queue_tokens double precision, p_queue_rate double precision,
                                              p_campaign_tokens double precision, p_campaign_rate double precision,
                                              p_room integer)
RETURNS double precision LANGUAGE sql IMMUTABLE AS $$
    SELECT least(
        CASE WHEN (p_fcm_project_tokens OPERATOR(pg_catalog.-) p_got) OPERATOR(pg_catalog.<) p_wanted
             THEN herald._wait(p_fcm_project_tokens OPERATOR(pg_catalog.-) p_got, p_fcm_project_rate, p_wanted) END,
        CASE WHEN (p_queue_tokens OPERATOR(pg_catalog.-) p_got) OPERATOR(pg_catalog.<) p_wanted
             THEN herald._wait(p_queue_tokens OPERATOR(pg_catalog.-) p_got, p_queue_rate, p_wanted) END,
        CASE WHEN (p_campaign_tokens OPERATOR(pg_catalog.-) p_got) OPERATOR(pg_catalog.<) p_wanted
             THEN herald._wait(p_campaign_tokens OPERATOR(pg_catalog.-) p_got, p_campaign_rate, p_wanted) END,
        CASE WHEN (p_room OPERATOR(pg_catalog.-) p_got) OPERATOR(pg_catalog.<=) 0 THEN 0.02 END)
$$;
