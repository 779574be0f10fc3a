-- How many of p_wanted jobs the pair (p_queue, p_campaign) may have at p_now: no more than the
-- FCM project's tokens granted to this claim (p_fcm_project_tokens; NULL: no FCM project rate),
-- the queue's bucket (max_per_second) and room (max_in_flight minus its running jobs), and the
-- campaign's bucket allow. A limited queue or campaign whose row this claim could not lock
-- (p_locked_queues, p_locked_campaigns: another claim holds it) allows nothing: busy, try again
-- shortly. Also returns what spending the buckets and saying when to come back need: each
-- bucket's rate and tokens at p_now, the room, the campaign's state and analytics label.
CREATE OR REPLACE FUNCTION herald._claim_allowance(
    p_queue text, p_campaign bigint, p_wanted integer, p_fcm_project_tokens double precision,
    p_locked_queues text[], p_locked_campaigns bigint[], p_now timestamptz,
    OUT allowed integer, OUT busy boolean,
    OUT queue_rate double precision, OUT queue_tokens double precision, OUT room integer,
    OUT campaign_rate double precision, OUT campaign_tokens double precision, OUT campaign_state text,
    OUT label text)
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
    q herald.queues;
    c herald.campaigns;
BEGIN
    allowed := p_wanted;
    busy := false;
    IF p_fcm_project_tokens IS NOT NULL THEN
        allowed := least(allowed, greatest(0, floor(p_fcm_project_tokens))::integer);
    END IF;

    SELECT * INTO q FROM herald.queues qs WHERE qs.name = p_queue;
    IF FOUND THEN
        IF (q.max_per_second IS NOT NULL OR q.max_in_flight IS NOT NULL) AND NOT p_queue = ANY (p_locked_queues) THEN
            allowed := 0; busy := true;
            RETURN;
        END IF;
        IF q.max_per_second IS NOT NULL THEN
            queue_rate := q.max_per_second;
            queue_tokens := herald._refill(q.tokens, q.max_per_second, q.refilled_at, p_now);
            allowed := least(allowed, greatest(0, floor(queue_tokens))::integer);
        END IF;
        IF q.max_in_flight IS NOT NULL THEN
            SELECT greatest(0, q.max_in_flight - count(*))::integer INTO room FROM herald.jobs j
            WHERE j.locked_until IS NOT NULL AND j.state = 'running' AND j.queue = p_queue;
            allowed := least(allowed, room);
        END IF;
    END IF;

    IF p_campaign <> 0 THEN
        SELECT * INTO c FROM herald.campaigns cs WHERE cs.id = p_campaign;
        IF c.max_per_second IS NOT NULL AND NOT p_campaign = ANY (p_locked_campaigns) THEN
            allowed := 0; busy := true;
            RETURN;
        END IF;
        campaign_state := c.state;
        label := c.analytics_label;
        IF c.max_per_second IS NOT NULL THEN
            campaign_rate := c.max_per_second;
            campaign_tokens := herald._refill(c.tokens, c.max_per_second, c.refilled_at, p_now);
            allowed := least(allowed, greatest(0, floor(campaign_tokens))::integer);
        END IF;
    END IF;
END
$fn$;
