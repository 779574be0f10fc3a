-- Fills {name} placeholders of a template from params in one pass (a value containing {...}
-- is never expanded again); unknown names stay as written.
CREATE OR REPLACE FUNCTION herald._mv_fill(template text, params jsonb) RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    result text := '';
    rest text := template;
    open_at integer;
    close_at integer;
    name text;
BEGIN
    LOOP
        open_at := strpos(rest, '{');
        EXIT WHEN open_at = 0;
        close_at := strpos(substr(rest, open_at + 1), '}');
        EXIT WHEN close_at = 0;
        name := substr(rest, open_at + 1, close_at - 1);
        result := result || substr(rest, 1, open_at - 1);
        IF params ? name THEN
            result := result || coalesce(params ->> name, '');
        ELSE
            result := result || substr(rest, open_at, close_at + 1);
        END IF;
        rest := substr(rest, open_at + close_at + 1);
    END LOOP;
    RETURN result || rest;
END
$fn$;
