-- Bad input for every period Herald takes (dedupe_for, a frequency cap's period, the token
-- registry's idle times): NULL is the caller's business; zero, negative or longer than ten years
-- is refused naming the function, the parameter and the value.
CREATE OR REPLACE FUNCTION herald._check_period(caller text, name text, period interval)
RETURNS void LANGUAGE plpgsql IMMUTABLE SET search_path = pg_catalog AS $$
BEGIN
    IF period IS NULL THEN
        RETURN;
    END IF;
    IF period <= interval '0' THEN
        RAISE EXCEPTION '%: % must be a positive interval, got %', caller, name, period
            USING ERRCODE = 'invalid_parameter_value', HINT = 'For example ''1 day''.';
    END IF;
    IF period > interval '10 years' THEN
        RAISE EXCEPTION '%: % of % is longer than 10 years', caller, name, period
            USING ERRCODE = 'invalid_parameter_value', HINT = 'Give a period of at most 10 years.';
    END IF;
END $$;
