-- A finished job's outcome as a legacy error string (docs/legacy.md 4.10), from the reason
-- recorded with it: a v1 error code, "gave up ...; last error: <code>: ...", or a legacy rejection.
CREATE OR REPLACE FUNCTION herald._legacy_error(reason text, message jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT CASE
        WHEN reason ~ '^(MissingRegistration|InvalidParameters|InvalidTtl|InvalidDataKey|MessageTooBig|InvalidJson) at legacy'
            THEN split_part(reason, ' ', 1)
        WHEN reason ~ '^message[.:]' THEN 'InvalidParameters'
        ELSE CASE split_part(coalesce(substring(reason FROM 'last error: (.*)$'), reason), ':', 1)
            WHEN 'UNREGISTERED' THEN 'NotRegistered'
            WHEN 'SENDER_ID_MISMATCH' THEN 'MismatchSenderId'
            WHEN 'PERMISSION_DENIED' THEN 'MismatchSenderId'
            WHEN 'UNAVAILABLE' THEN 'Unavailable'
            WHEN 'INTERNAL' THEN 'InternalServerError'
            WHEN 'THIRD_PARTY_AUTH_ERROR' THEN 'InvalidApnsCredential'
            WHEN 'APNS_AUTH_ERROR' THEN 'InvalidApnsCredential'
            WHEN 'QUOTA_EXCEEDED' THEN
                CASE WHEN message ?| ARRAY['topic', 'condition'] OR message ->> 'to' LIKE '/topics/%'
                     THEN 'TopicsMessageRateExceeded' ELSE 'DeviceMessageRateExceeded' END
            WHEN 'INVALID_ARGUMENT' THEN 'InvalidRegistration'
            ELSE 'InternalServerError'
        END
    END
$fn$;
