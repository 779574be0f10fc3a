-- set_frequency_cap: at most max_per_token claims per token in any window of length per, across
-- the queue's jobs and campaigns. A job over the cap waits (scheduled) until the window allows
-- it, or, with discard, is discarded with the reason. NULL for both removes the cap.
CREATE OR REPLACE FUNCTION herald.set_frequency_cap(queue text, max_per_token integer, per interval, discard boolean DEFAULT false)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog AS $$
BEGIN
    IF set_frequency_cap.queue IS NULL OR set_frequency_cap.queue = '' THEN
        RAISE EXCEPTION 'herald.set_frequency_cap: queue name must not be empty' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF (set_frequency_cap.max_per_token IS NULL) <> (set_frequency_cap.per IS NULL) THEN
        RAISE EXCEPTION 'herald.set_frequency_cap: give both max_per_token and per, or both null to remove the cap (got % and %)',
            coalesce(set_frequency_cap.max_per_token::text, 'null'), coalesce(set_frequency_cap.per::text, 'null')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF set_frequency_cap.max_per_token IS NOT NULL AND (set_frequency_cap.max_per_token < 1 OR set_frequency_cap.max_per_token > 1000) THEN
        RAISE EXCEPTION 'herald.set_frequency_cap: max_per_token must be between 1 and 1000, not %', set_frequency_cap.max_per_token
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM herald._check_period('herald.set_frequency_cap', 'per', set_frequency_cap.per);
    INSERT INTO herald.queues AS q (name, cap_max, cap_per, cap_discard)
    VALUES (set_frequency_cap.queue, set_frequency_cap.max_per_token, set_frequency_cap.per, coalesce(set_frequency_cap.discard, false))
    ON CONFLICT ON CONSTRAINT queues_pkey DO UPDATE
    SET cap_max = excluded.cap_max, cap_per = excluded.cap_per, cap_discard = excluded.cap_discard, updated_at = now();
END $$;
