-- Takes up to p_wanted tokens from the bucket of FCM project p_fcm_project (p_rate a second).
-- Returns how many were granted and, when fewer than wanted, in how many seconds the bucket holds
-- enough for a claim again. Grants nothing while the FCM project is held back after a quota answer
-- (and then no wait: the pause's end is what the worker waits for). p_now: the time to refill the
-- bucket to (NULL: now()).
CREATE OR REPLACE FUNCTION herald.take_project_tokens(p_fcm_project text, p_rate double precision, p_wanted integer,
                                                      p_now timestamptz DEFAULT NULL)
RETURNS TABLE (granted integer, wait_seconds double precision)
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
    v_now timestamptz := coalesce(p_now, now());
    v_tokens double precision;
BEGIN
    IF p_fcm_project IS NULL OR NOT p_rate > 0 THEN
        RAISE EXCEPTION 'herald.take_project_tokens: needs an FCM project id and a rate above 0 (got %, %)',
            coalesce(p_fcm_project, 'null'), coalesce(p_rate::text, 'null')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF EXISTS (SELECT 1 FROM herald.project_pauses s WHERE s.project_id = p_fcm_project AND s.paused_until > v_now) THEN
        granted := 0; wait_seconds := NULL;
        RETURN NEXT;
        RETURN;
    END IF;
    INSERT INTO herald.project_rates AS r (project_id, max_per_second, tokens, refilled_at)
    VALUES (p_fcm_project, p_rate, herald._burst(p_rate), v_now)
    ON CONFLICT (project_id) DO UPDATE
    SET tokens = herald._refill(r.tokens, excluded.max_per_second, r.refilled_at, excluded.refilled_at),
        max_per_second = excluded.max_per_second, refilled_at = excluded.refilled_at
    RETURNING r.tokens INTO v_tokens;
    granted := least(greatest(p_wanted, 0), greatest(0, floor(v_tokens))::integer);
    IF granted > 0 THEN
        UPDATE herald.project_rates r SET tokens = v_tokens - granted WHERE r.project_id = p_fcm_project;
    END IF;
    wait_seconds := CASE WHEN granted < p_wanted THEN herald._wait(v_tokens - granted, p_rate, p_wanted) END;
    RETURN NEXT;
END
$fn$;
