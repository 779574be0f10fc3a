-- A plain-text body (docs/legacy.md Table 3) read into the JSON payload it stands for
-- (docs/legacy.md 4.9), or
-- {"error": ...}. registration_id becomes a one-element registration_ids, so a value starting
-- with /topics/ stays a token, as docs/legacy.md 4.9 says.
CREATE OR REPLACE FUNCTION herald._legacy_url_decode(s text) RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    bytes bytea := '';
    raw bytea := convert_to(s, 'UTF8');
    i integer := 0;
    b integer;
BEGIN
    WHILE i < length(raw) LOOP
        b := get_byte(raw, i);
        IF b = 43 THEN            -- '+'
            bytes := bytes || '\x20'::bytea;
        ELSIF b = 37 THEN         -- '%'
            IF i + 2 > length(raw) - 1 OR convert_from(substring(raw FROM i + 2 FOR 2), 'SQL_ASCII') !~ '^[0-9A-Fa-f]{2}$' THEN
                RETURN NULL;
            END IF;
            bytes := bytes || decode(convert_from(substring(raw FROM i + 2 FOR 2), 'SQL_ASCII'), 'hex');
            i := i + 2;
        ELSE
            bytes := bytes || substring(raw FROM i + 1 FOR 1);
        END IF;
        i := i + 1;
    END LOOP;
    RETURN convert_from(bytes, 'UTF8');
EXCEPTION WHEN character_not_in_repertoire OR untranslatable_character OR invalid_parameter_value THEN
    RETURN NULL;
END
$fn$;
