-- set_token_aging: the aging rule's settings. A token not reported (herald.touch_token) for
-- stale_after is stale; for prune_after, pruned (defaults 30 and 270 days, FCM's own figures).
-- skip_stale_for_campaigns: a campaign's job to a stale token is discarded without a request
-- (transactional sends, outside campaigns, still go). NULL keeps a setting as it is.
CREATE OR REPLACE FUNCTION herald.set_token_aging(stale_after interval DEFAULT NULL, prune_after interval DEFAULT NULL,
                                                  skip_stale_for_campaigns boolean DEFAULT NULL)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog AS $$
DECLARE
    current herald.token_aging;
BEGIN
    PERFORM herald._check_period('herald.set_token_aging', 'stale_after', set_token_aging.stale_after);
    PERFORM herald._check_period('herald.set_token_aging', 'prune_after', set_token_aging.prune_after);
    SELECT * INTO current FROM herald.token_aging FOR UPDATE;
    IF coalesce(set_token_aging.prune_after, current.prune_after) <= coalesce(set_token_aging.stale_after, current.stale_after) THEN
        RAISE EXCEPTION 'herald.set_token_aging: prune_after % must be longer than stale_after %',
            coalesce(set_token_aging.prune_after, current.prune_after), coalesce(set_token_aging.stale_after, current.stale_after)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    UPDATE herald.token_aging
    SET stale_after = coalesce(set_token_aging.stale_after, current.stale_after),
        prune_after = coalesce(set_token_aging.prune_after, current.prune_after),
        skip_stale_for_campaigns = coalesce(set_token_aging.skip_stale_for_campaigns, current.skip_stale_for_campaigns);
END $$;
