-- Double quotes become single quotes; outside quotes the keywords in and topics are lower-cased
-- (a word is a run of ASCII letters, digits and _). Topic names are never changed.
CREATE OR REPLACE FUNCTION herald._legacy_condition(c text) RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    parts text[] := string_to_array(replace(c, '"', ''''), '''');
BEGIN
    FOR i IN 1 .. coalesce(array_length(parts, 1), 0) BY 2 LOOP
        parts[i] := regexp_replace(
            regexp_replace(parts[i], '(^|[^A-Za-z0-9_])[iI][nN](?=[^A-Za-z0-9_]|$)', '\1in', 'g'),
            '(^|[^A-Za-z0-9_])[tT][oO][pP][iI][cC][sS](?=[^A-Za-z0-9_]|$)', '\1topics', 'g');
    END LOOP;
    RETURN array_to_string(parts, '''');
END
$fn$;
