-- Raises SQLSTATE 22023 with "<code> at <path>: <reason>" for a rejection.
CREATE OR REPLACE FUNCTION herald._legacy_raise(result jsonb) RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF result ? 'error' THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
            MESSAGE = (result #>> '{error,code}') || ' at ' || (result #>> '{error,path}') || ': ' || (result #>> '{error,reason}'),
            DETAIL = 'legacy error ' || (result #>> '{error,code}') || ', field ' || (result #>> '{error,path}'),
            HINT = 'Fix the legacy payload; docs/legacy.md section 4 lists what each field accepts.';
    END IF;
    RETURN result;
END
$fn$;
