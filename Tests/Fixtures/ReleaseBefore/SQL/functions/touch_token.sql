-- touch_token: the app reported its token (at start, on refresh): the registry records it as
-- seen now, with whatever else is given (NULL keeps what is known). A stale token is fresh
-- again; one the aging rule pruned is registered again. Idempotent and cheap: a token seen in the
-- last minute with nothing new is not written again, and time_zone is checked against
-- pg_timezone_names only when it changes.
CREATE OR REPLACE FUNCTION herald.touch_token(token text, platform text DEFAULT NULL, user_ref text DEFAULT NULL,
                                              project text DEFAULT NULL, time_zone text DEFAULT NULL)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog AS $$
#variable_conflict use_column
DECLARE
    known herald.device_tokens;
BEGIN
    IF touch_token.token IS NULL OR btrim(touch_token.token) = '' THEN
        RAISE EXCEPTION 'herald.touch_token: token must not be empty, got %', coalesce(quote_literal(touch_token.token), 'null')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF length(touch_token.token) > 4096 THEN
        RAISE EXCEPTION 'herald.touch_token: token is % characters long; FCM registration tokens are far shorter', length(touch_token.token)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT * INTO known FROM herald.device_tokens d WHERE d.token = touch_token.token;
    IF touch_token.time_zone IS NOT NULL AND touch_token.time_zone IS DISTINCT FROM known.time_zone
       AND NOT EXISTS (SELECT 1 FROM pg_timezone_names z WHERE z.name = touch_token.time_zone) THEN
        RAISE EXCEPTION 'herald.touch_token: time_zone % is not a time zone PostgreSQL knows', quote_literal(touch_token.time_zone)
            USING ERRCODE = 'invalid_parameter_value', HINT = 'Give an IANA name such as ''Europe/Istanbul'' (see pg_timezone_names).';
    END IF;
    IF known.token IS NOT NULL AND known.last_seen_at > now() - interval '1 minute' AND known.stale_at IS NULL
       AND (touch_token.platform IS NULL OR touch_token.platform = known.platform)
       AND (touch_token.user_ref IS NULL OR touch_token.user_ref = known.user_ref)
       AND (touch_token.project IS NULL OR touch_token.project = known.project)
       AND (touch_token.time_zone IS NULL OR touch_token.time_zone = known.time_zone) THEN
        RETURN;
    END IF;
    INSERT INTO herald.device_tokens AS d (token, platform, user_ref, project, time_zone, last_seen_at)
    VALUES (touch_token.token, touch_token.platform, touch_token.user_ref, touch_token.project, touch_token.time_zone, now())
    ON CONFLICT ON CONSTRAINT device_tokens_pkey DO UPDATE
    SET last_seen_at = greatest(d.last_seen_at, excluded.last_seen_at), stale_at = NULL,
        platform = coalesce(excluded.platform, d.platform), user_ref = coalesce(excluded.user_ref, d.user_ref),
        project = coalesce(excluded.project, d.project), time_zone = coalesce(excluded.time_zone, d.time_zone);
END $$;
