-- from_legacy_form: from_legacy for the legacy plain-text form body (docs/legacy.md 4.9).
CREATE OR REPLACE FUNCTION herald.from_legacy_form(body text, at timestamptz DEFAULT now()) RETURNS jsonb
LANGUAGE plpgsql STABLE
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    payload jsonb := herald._legacy_form_payload(body);
BEGIN
    IF payload ? 'error' THEN
        RETURN herald._legacy_raise(payload);
    END IF;
    RETURN herald.from_legacy(payload, at);
END
$fn$;
