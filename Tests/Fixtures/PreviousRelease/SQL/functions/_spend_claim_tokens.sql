-- After a pair's claim of p_got jobs at p_now: the queue's and the campaign's buckets keep what
-- is left of the tokens they held (p_queue_tokens, p_campaign_tokens; NULL: no such bucket), and
-- a campaign's first claim marks it running. A campaign's row is written only for its bucket or
-- its first claim, so claims do not queue behind each other (or behind recording) on it.
CREATE OR REPLACE FUNCTION herald._spend_claim_tokens(p_queue text, p_campaign bigint, p_got integer,
                                                      p_queue_tokens double precision, p_campaign_tokens double precision,
                                                      p_campaign_state text, p_now timestamptz)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $fn$
BEGIN
    IF p_queue_tokens IS NOT NULL THEN
        UPDATE herald.queues qs SET tokens = p_queue_tokens - p_got, refilled_at = p_now WHERE qs.name = p_queue;
    END IF;
    IF p_campaign <> 0 AND (p_campaign_tokens IS NOT NULL OR p_campaign_state <> 'running') THEN
        UPDATE herald.campaigns cs
        SET tokens = CASE WHEN p_campaign_tokens IS NULL THEN cs.tokens ELSE p_campaign_tokens - p_got END,
            refilled_at = CASE WHEN p_campaign_tokens IS NULL THEN cs.refilled_at ELSE p_now END,
            state = CASE WHEN cs.state IN ('scheduled', 'finished') THEN 'running' ELSE cs.state END,
            started_at = coalesce(cs.started_at, p_now), finished_at = NULL
        WHERE cs.id = p_campaign;
    END IF;
END
$fn$;
