-- A pair that got p_got jobs, all it was allowed and fewer than the p_wanted of its share, was
-- held back by a limit: in how many seconds the binding one lets jobs go again. For each bucket
-- that ran short (the project's p_project tokens, the queue's, the campaign's: tokens before this
-- claim, and their rates), when it holds half its burst again; for a queue out of room
-- (max_in_flight), shortly. The soonest of them; NULL when none ran short.
CREATE OR REPLACE FUNCTION herald._claim_wait(p_wanted integer, p_got integer,
                                              p_project double precision, p_project_rate double precision,
                                              p_queue_tokens double precision, p_queue_rate double precision,
                                              p_campaign_tokens double precision, p_campaign_rate double precision,
                                              p_room integer)
RETURNS double precision LANGUAGE sql IMMUTABLE AS $$
    SELECT least(
        CASE WHEN p_project - p_got < p_wanted THEN herald._wait(p_project - p_got, p_project_rate, p_wanted) END,
        CASE WHEN p_queue_tokens - p_got < p_wanted THEN herald._wait(p_queue_tokens - p_got, p_queue_rate, p_wanted) END,
        CASE WHEN p_campaign_tokens - p_got < p_wanted THEN herald._wait(p_campaign_tokens - p_got, p_campaign_rate, p_wanted) END,
        CASE WHEN p_room - p_got <= 0 THEN 0.02 END)
$$;
