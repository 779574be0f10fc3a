-- age_tokens: the token registry's aging rule, run by the maintenance leader with now() (a test
-- passes its own clock). Marks stale the tokens not seen for stale_after, and moves to
-- herald.pruned_tokens, with the reason, those not seen for prune_after (at most p_batch of each
-- per call). Returns how many it marked and pruned.
CREATE OR REPLACE FUNCTION herald.age_tokens(p_now timestamptz, p_batch integer DEFAULT 10000)
RETURNS TABLE (marked_stale bigint, pruned bigint) LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    rules herald.token_aging;
BEGIN
    IF p_now IS NULL THEN
        RAISE EXCEPTION 'herald.age_tokens: now must not be null' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT * INTO rules FROM herald.token_aging;
    WITH gone AS (
        DELETE FROM herald.device_tokens d WHERE d.token IN (
            SELECT x.token FROM herald.device_tokens x WHERE x.last_seen_at < p_now - rules.prune_after
            ORDER BY x.last_seen_at LIMIT p_batch)
        RETURNING d.token, d.last_seen_at
    ), recorded AS (
        INSERT INTO herald.pruned_tokens (token, reason, pruned_at)
        SELECT g.token, 'IDLE: not seen since ' || to_char(g.last_seen_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')
                        || ' (prune_after ' || rules.prune_after || ')', p_now
        FROM gone g
        ON CONFLICT ON CONSTRAINT pruned_tokens_pkey DO NOTHING
        RETURNING 1
    )
    SELECT count(*) INTO pruned FROM gone;
    WITH marked AS (
        UPDATE herald.device_tokens d SET stale_at = p_now WHERE d.token IN (
            SELECT x.token FROM herald.device_tokens x
            WHERE x.stale_at IS NULL AND x.last_seen_at < p_now - rules.stale_after
            ORDER BY x.last_seen_at LIMIT p_batch)
        RETURNING 1
    )
    SELECT count(*) INTO marked_stale FROM marked;
    RETURN NEXT;
END $$;
