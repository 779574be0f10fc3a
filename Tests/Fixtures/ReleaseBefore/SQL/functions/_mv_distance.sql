-- Edits between a and b: insertions, deletions, substitutions and swaps of two adjacent
-- characters (optimal string alignment), ASCII letters compared in lower case. The Swift
-- validator's KnownFields.distance computes the same.
CREATE OR REPLACE FUNCTION herald._mv_distance(a text, b text) RETURNS integer
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    s text[] := CASE WHEN a = '' THEN '{}'::text[]
                     ELSE regexp_split_to_array(translate(a, 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz'), '') END;
    t text[] := CASE WHEN b = '' THEN '{}'::text[]
                     ELSE regexp_split_to_array(translate(b, 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz'), '') END;
    n integer := coalesce(cardinality(s), 0);
    m integer := coalesce(cardinality(t), 0);
    d integer[];
    cost integer;
BEGIN
    IF n = 0 THEN RETURN m; END IF;
    IF m = 0 THEN RETURN n; END IF;
    d := array_fill(0, ARRAY[n + 1, m + 1], ARRAY[0, 0]);
    FOR i IN 0..n LOOP d[i][0] := i; END LOOP;
    FOR j IN 0..m LOOP d[0][j] := j; END LOOP;
    FOR i IN 1..n LOOP
        FOR j IN 1..m LOOP
            cost := CASE WHEN s[i] = t[j] THEN 0 ELSE 1 END;
            d[i][j] := least(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost);
            IF i > 1 AND j > 1 AND s[i] = t[j - 1] AND s[i - 1] = t[j] THEN
                d[i][j] := least(d[i][j], d[i - 2][j - 2] + 1);
            END IF;
        END LOOP;
    END LOOP;
    RETURN d[n][m];
END
$fn$;
