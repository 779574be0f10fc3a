-- The known name (of the JSON list names) nearest to k, when it is close enough to be the one
-- meant: k's snake_case form when that is a known name (a lowerCamelCase name such as
-- useAsV1DataMessage, however many words it has); else the nearest name, at most 1 edit for a
-- name of up to 3 characters, 2 up to 6, else 3; ties go to the name listed first. NULL when none
-- is. The Swift validator's KnownFields.suggestion does the same.
CREATE OR REPLACE FUNCTION herald._mv_suggest(k text, names jsonb) RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    name text;
    lim integer;
    distance integer;
    best text;
    best_distance integer;
    -- Each ASCII capital after the first character becomes '_' and its lower case; a first one
    -- only its lower case. The class is spelled out: a range such as [A-Z] may follow the collation.
    snake text := translate(left(k, 1), 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz')
                  || translate(regexp_replace(substr(k, 2), '([ABCDEFGHIJKLMNOPQRSTUVWXYZ])', '_\1', 'g'),
                               'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz');
BEGIN
    IF snake <> k AND names ? snake THEN
        RETURN snake;
    END IF;
    FOR name IN SELECT e FROM jsonb_array_elements_text(names) WITH ORDINALITY AS x(e, o) ORDER BY o LOOP
        lim := CASE WHEN char_length(name) <= 3 THEN 1 WHEN char_length(name) <= 6 THEN 2 ELSE 3 END;
        CONTINUE WHEN abs(char_length(k) - char_length(name)) > lim;
        distance := herald._mv_distance(k, name);
        IF distance <= lim AND (best_distance IS NULL OR distance < best_distance) THEN
            best := name;
            best_distance := distance;
        END IF;
    END LOOP;
    RETURN best;
END
$fn$;
