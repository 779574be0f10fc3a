-- set_quiet_hours: from "from" until "until" (wall-clock times; "from" after "until" spans
-- midnight) in the token's time zone, the queue's jobs are not sent: the claim makes them wait
-- (scheduled) until the window ends. NULL for both removes the quiet hours.
CREATE OR REPLACE FUNCTION herald.set_quiet_hours(queue text, "from" time, until time)
RETURNS void LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF set_quiet_hours.queue IS NULL OR set_quiet_hours.queue = '' THEN
        RAISE EXCEPTION 'herald.set_quiet_hours: queue name must not be empty' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF (set_quiet_hours."from" IS NULL) <> (set_quiet_hours.until IS NULL) THEN
        RAISE EXCEPTION 'herald.set_quiet_hours: give both from and until, or both null to remove them (got % and %)',
            coalesce(set_quiet_hours."from"::text, 'null'), coalesce(set_quiet_hours.until::text, 'null')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF set_quiet_hours."from" = set_quiet_hours.until THEN
        RAISE EXCEPTION 'herald.set_quiet_hours: from and until are both %; quiet hours need a start and a different end', set_quiet_hours."from"
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    INSERT INTO herald.queues AS q (name, quiet_from, quiet_until)
    VALUES (set_quiet_hours.queue, set_quiet_hours."from", set_quiet_hours.until)
    ON CONFLICT ON CONSTRAINT queues_pkey DO UPDATE
    SET quiet_from = excluded.quiet_from, quiet_until = excluded.quiet_until, updated_at = now();
END $$;
