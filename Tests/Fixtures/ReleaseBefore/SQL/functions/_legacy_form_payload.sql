CREATE OR REPLACE FUNCTION herald._legacy_form_payload(body text) RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    payload jsonb := '{}';
    data jsonb := '{}';
    seen text[] := '{}';
    piece text;
    name text;
    value text;
BEGIN
    FOR piece IN SELECT x.p FROM unnest(string_to_array(coalesce(body, ''), '&')) WITH ORDINALITY AS x(p, o) WHERE x.p <> '' ORDER BY x.o LOOP
        name := herald._legacy_url_decode(split_part(piece, '=', 1));
        IF name IS NULL THEN
            RETURN herald._legacy_reject('InvalidParameters', 'legacy', 'is not valid percent-encoded UTF-8');
        END IF;
        value := herald._legacy_url_decode(CASE WHEN strpos(piece, '=') > 0 THEN substr(piece, strpos(piece, '=') + 1) ELSE '' END);
        IF value IS NULL THEN
            RETURN herald._legacy_reject('InvalidParameters', 'legacy.' || name, 'is not valid percent-encoded UTF-8');
        END IF;
        IF name = ANY (seen) THEN
            RETURN herald._legacy_reject('InvalidParameters', 'legacy.' || name, 'is given more than once');
        END IF;
        seen := seen || name;
        IF starts_with(name, 'data.') THEN
            IF name = 'data.' THEN
                RETURN herald._legacy_reject('InvalidParameters', 'legacy.data', 'data. needs a key, as in data.score=3x1');
            END IF;
            data := data || jsonb_build_object(substr(name, 6), value);
        ELSIF name = 'registration_id' THEN
            payload := payload || jsonb_build_object('registration_ids', jsonb_build_array(value));
        ELSIF name IN ('collapse_key', 'restricted_package_name') THEN
            payload := payload || jsonb_build_object(name, value);
        ELSIF name = 'time_to_live' THEN
            IF value !~ '^[0-9]+$' THEN
                RETURN herald._legacy_reject('InvalidTtl', 'legacy.time_to_live',
                    'must be a whole number of seconds from 0 to 2419200 (4 weeks), not ' || to_json(value)::text);
            END IF;
            payload := payload || jsonb_build_object(name, value::numeric);
        ELSIF name = 'dry_run' THEN
            IF value NOT IN ('true', '1', 'false', '0') THEN
                RETURN herald._legacy_reject('InvalidParameters', 'legacy.dry_run', 'must be true, false, 1 or 0, not ' || to_json(value)::text);
            END IF;
            payload := payload || jsonb_build_object(name, value IN ('true', '1'));
        ELSE
            RETURN herald._legacy_reject('InvalidParameters', 'legacy.' || name,
                to_json(name)::text || ' is not a plain-text legacy parameter (docs/legacy.md Table 3)');
        END IF;
    END LOOP;
    IF coalesce(payload #>> '{registration_ids,0}', '') = '' THEN
        RETURN herald._legacy_reject('MissingRegistration', 'legacy.registration_id', 'a plain-text request needs registration_id');
    END IF;
    IF data <> '{}' THEN
        payload := payload || jsonb_build_object('data', data);
    END IF;
    RETURN payload;
END
$fn$;
