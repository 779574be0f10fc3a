-- set_queue_limits: null removes a limit.
CREATE OR REPLACE FUNCTION herald.set_queue_limits(name text, max_per_second double precision DEFAULT NULL,
                                        max_in_flight integer DEFAULT NULL)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog AS $$
BEGIN
    IF set_queue_limits.name IS NULL OR set_queue_limits.name = '' THEN
        RAISE EXCEPTION 'herald.set_queue_limits: queue name must not be empty' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF set_queue_limits.max_per_second IS NOT NULL AND NOT set_queue_limits.max_per_second > 0 THEN
        RAISE EXCEPTION 'herald.set_queue_limits: max_per_second must be more than 0 (or null for no limit), not %', set_queue_limits.max_per_second
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF set_queue_limits.max_in_flight IS NOT NULL AND set_queue_limits.max_in_flight < 1 THEN
        RAISE EXCEPTION 'herald.set_queue_limits: max_in_flight must be at least 1 (or null for no limit), not %', set_queue_limits.max_in_flight
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    INSERT INTO herald.queues AS q (name, max_per_second, max_in_flight, tokens, refilled_at)
    VALUES (set_queue_limits.name, set_queue_limits.max_per_second, set_queue_limits.max_in_flight,
            herald._burst(coalesce(set_queue_limits.max_per_second, 1)), now())
    ON CONFLICT ON CONSTRAINT queues_pkey DO UPDATE
    SET max_per_second = excluded.max_per_second, max_in_flight = excluded.max_in_flight, updated_at = now(),
        tokens = least(q.tokens, herald._burst(coalesce(excluded.max_per_second, 1)));
END $$;
