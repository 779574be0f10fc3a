-- An anchored ARE for a charset such as ["a-z", "0-9", "_"], characters written as \uXXXX so
-- nothing in the set is special.
-- No SET clause, so PostgreSQL can inline it into validate_message (which pins search_path);
-- it uses only pg_catalog functions and operators, found first on any search_path.
CREATE OR REPLACE FUNCTION herald._mv_charset_regex(charset jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $fn$
    SELECT '^[' || string_agg(
        CASE WHEN char_length(e) = 3
             THEN E'\\u' || lpad(to_hex(ascii(substr(e, 1, 1))), 4, '0') || '-' || E'\\u' || lpad(to_hex(ascii(substr(e, 3, 1))), 4, '0')
             ELSE E'\\u' || lpad(to_hex(ascii(e)), 4, '0') END, '' ORDER BY o) || ']*$'
    FROM jsonb_array_elements_text(charset) WITH ORDINALITY AS x(e, o)
$fn$;
