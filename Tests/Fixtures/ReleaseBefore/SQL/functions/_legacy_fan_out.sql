-- Inserts one job per target of an accepted translation (the first row given by first_id when a
-- row already exists) and records the multicast. Returns the job ids in target order.
-- The same, joining the fanned-out rows to a campaign and counting them there.
CREATE OR REPLACE FUNCTION herald._legacy_fan_out(payload jsonb, translation jsonb, run_at timestamptz, queue text,
                                       priority integer, max_attempts integer, first_id bigint)
RETURNS bigint[] LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    targets integer := jsonb_array_length(translation -> 'messages');
    tokens jsonb := payload -> 'registration_ids';
    ids bigint[];
BEGIN
    -- The ids first, so each row's position is known without relying on insertion order.
    ids := ARRAY(SELECT nextval(pg_get_serial_sequence('herald.jobs', 'id'))
                 FROM generate_series(CASE WHEN first_id IS NULL THEN 1 ELSE 2 END, targets));
    IF first_id IS NOT NULL THEN
        ids := first_id || ids;
    END IF;
    -- The rows stay legacy (one registration id each), so the worker builds each request with the
    -- clock of its attempt; the fan-out itself is not translated again.
    PERFORM set_config('herald.legacy_fanning_out', 'on', true);
    INSERT INTO herald.jobs (id, queue, priority, message, run_at, max_attempts, validate_only)
    SELECT ids[x.o], coalesce(_legacy_fan_out.queue, 'default'), coalesce(_legacy_fan_out.priority, 0),
           CASE WHEN tokens IS NULL THEN payload
                ELSE (payload - 'registration_ids') || jsonb_build_object('registration_ids', jsonb_build_array(tokens -> (x.o - 1))) END,
           coalesce(_legacy_fan_out.run_at, now()), coalesce(_legacy_fan_out.max_attempts, 25),
           (translation ->> 'validate_only')::boolean
    FROM generate_series(1, targets) AS x(o)
    WHERE first_id IS NULL OR x.o > 1;
    PERFORM set_config('herald.legacy_fanning_out', '', true);
    IF targets > 1 THEN
        -- Recorded as herald.enqueue_multicast records its own (herald.multicasts, kept 7 days).
        INSERT INTO herald.multicasts (job_ids, tokens)
        VALUES (ids, ARRAY(SELECT t FROM jsonb_array_elements_text(tokens) WITH ORDINALITY AS e(t, o) ORDER BY e.o));
        DELETE FROM herald.multicasts m WHERE m.created_at < now() - interval '7 days';
    END IF;
    RETURN ids;
END
$fn$;

CREATE OR REPLACE FUNCTION herald._legacy_fan_out(payload jsonb, translation jsonb, run_at timestamptz, queue text,
                                       priority integer, max_attempts integer, first_id bigint, campaign_id bigint)
RETURNS bigint[] LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    ids bigint[] := herald._legacy_fan_out(payload, translation, run_at, queue, priority, max_attempts, first_id);
BEGIN
    IF _legacy_fan_out.campaign_id IS NOT NULL THEN
        -- The rows were inserted without it: join them to the campaign and count them there.
        UPDATE herald.jobs j SET campaign_id = _legacy_fan_out.campaign_id
        WHERE j.id = ANY (ids) AND (first_id IS NULL OR j.id <> first_id);
        UPDATE herald.campaigns c SET total = c.total + cardinality(ids) - CASE WHEN first_id IS NULL THEN 0 ELSE 1 END
        WHERE c.id = _legacy_fan_out.campaign_id;
    END IF;
    RETURN ids;
END
$fn$;
