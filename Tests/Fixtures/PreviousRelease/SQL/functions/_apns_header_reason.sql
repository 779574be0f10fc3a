-- Why an APNs message may not set header `header_name` to `header_value` under the rules `def`
-- (herald.apns_rules.definition), or NULL when it may: a name the rule file's `headers` does not
-- list, a value that is not a string, or one outside its entry's format and byte bounds. The
-- same words as APNsMessageRules.headerReason in Swift. The push type and the priority are
-- judged by herald.validate_apns_message itself.
CREATE OR REPLACE FUNCTION herald._apns_header_reason(def jsonb, header_name text, header_value jsonb) RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    header jsonb;
    s text;
BEGIN
    SELECT h INTO header FROM jsonb_array_elements(def -> 'headers') AS h WHERE h ->> 'name' = header_name;
    IF header IS NULL THEN
        RETURN herald._mv_fill(def -> 'messages' ->> 'header.unknown', jsonb_build_object('headers',
            (SELECT string_agg(h ->> 'name', ', ' ORDER BY o) FROM jsonb_array_elements(def -> 'headers') WITH ORDINALITY AS x(h, o))));
    END IF;
    IF jsonb_typeof(header_value) <> 'string' THEN
        RETURN herald._mv_fill(def -> 'messages' ->> 'header.type', jsonb_build_object('type', jsonb_typeof(header_value)));
    END IF;
    IF NOT header ? 'message' THEN
        RETURN NULL;
    END IF;
    s := header_value #>> '{}';
    IF octet_length(s) < coalesce((header ->> 'min_bytes')::integer, 0)
       OR octet_length(s) > coalesce((header ->> 'max_bytes')::integer, octet_length(s))
       OR (header ->> 'format' = 'digits' AND s !~ '^[0-9]*$')
       OR (header ->> 'format' = 'uuid' AND s !~ '^[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}$') THEN
        RETURN herald._mv_fill(def -> 'messages' ->> (header ->> 'message'), jsonb_build_object(
            'value', herald._apns_render(s, (def ->> 'value_max_characters')::integer), 'size', octet_length(s)::text,
            'min', coalesce(header ->> 'min_bytes', ''), 'max', coalesce(header ->> 'max_bytes', '')));
    END IF;
    RETURN NULL;
END
$fn$;
