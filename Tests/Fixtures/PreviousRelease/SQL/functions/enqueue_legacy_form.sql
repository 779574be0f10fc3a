-- enqueue_legacy_form: enqueue_legacy for the legacy plain-text form (docs/legacy.md 4.9).
CREATE OR REPLACE FUNCTION herald.enqueue_legacy_form(body text, run_at timestamptz DEFAULT now(), queue text DEFAULT 'default',
                                           priority integer DEFAULT 0, max_attempts integer DEFAULT 25,
                                           campaign_id bigint DEFAULT NULL)
RETURNS bigint[] LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    payload jsonb := herald._legacy_raise(herald._legacy_form_payload(body));
BEGIN
    RETURN herald.enqueue_legacy(payload, run_at, queue, priority, max_attempts, enqueue_legacy_form.campaign_id);
END
$fn$;
