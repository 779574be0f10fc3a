-- enqueue_legacy: a payload of FCM's legacy HTTP protocol as one job per target, in target order
-- (returned), or SQLSTATE 22023 and nothing enqueued.
CREATE OR REPLACE FUNCTION herald.enqueue_legacy(payload jsonb, run_at timestamptz DEFAULT now(), queue text DEFAULT 'default',
                                      priority integer DEFAULT 0, max_attempts integer DEFAULT 25,
                                      campaign_id bigint DEFAULT NULL)
RETURNS bigint[] LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    translation jsonb := herald._legacy_raise(herald._legacy_translate(payload, floor(extract(epoch FROM now()))::bigint));
BEGIN
    IF enqueue_legacy.campaign_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM herald.campaigns c WHERE c.id = enqueue_legacy.campaign_id) THEN
        RAISE EXCEPTION 'herald.enqueue_legacy: no campaign with id %', enqueue_legacy.campaign_id USING ERRCODE = 'foreign_key_violation';
    END IF;
    RETURN herald._legacy_fan_out(payload, translation, run_at, queue, priority, max_attempts, NULL, enqueue_legacy.campaign_id);
END
$fn$;
