-- A v1 error code and message from a reason the worker recorded: "CODE: message", "gave up after
-- N attempts (max_attempts); last error: CODE: message", a validation issue ("message.x: ..."),
-- or a discard for a token pruned earlier.
CREATE OR REPLACE FUNCTION herald._v1_error(reason text) RETURNS jsonb
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT CASE
        WHEN reason IS NULL THEN jsonb_build_object('code', 'UNKNOWN', 'message', 'no reason was recorded')
        WHEN reason ~ '^message[.:\[]' THEN jsonb_build_object('code', 'INVALID_ARGUMENT', 'message', reason)
        WHEN reason LIKE '%was pruned earlier%' THEN jsonb_build_object('code', 'UNREGISTERED', 'message', reason)
        ELSE (SELECT jsonb_build_object('code', CASE WHEN last ~ '^[A-Z][A-Z0-9_]*:' THEN split_part(last, ':', 1) ELSE 'UNKNOWN' END,
                                        'message', reason)
              FROM (SELECT coalesce(substring(reason FROM 'last error: (.*)$'), reason) AS last) AS l)
    END
$fn$;
