-- legacy_result: the jobs' outcomes in the legacy multicast shape, results[i] for job_ids[i]:
-- {"message_id": ...}, {"error": "<Table 9 string, docs/legacy.md 3>"}, or {"pending": true} while the job is not
-- final (then counted in neither success nor failure).
CREATE OR REPLACE FUNCTION herald.legacy_result(job_ids bigint[]) RETURNS jsonb
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    results jsonb := '[]';
    item jsonb;
    success integer := 0;
    failure integer := 0;
    x record;
BEGIN
    IF job_ids IS NULL OR cardinality(job_ids) = 0 THEN
        RAISE EXCEPTION 'herald.legacy_result: give the job ids herald.enqueue_legacy returned'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    FOR x IN SELECT * FROM herald._job_outcomes(legacy_result.job_ids) LOOP
        IF x.state = 'completed' THEN
            item := jsonb_build_object('message_id', regexp_replace(coalesce(x.fcm_message_name, x.job_id::text), '^.*/', ''));
        ELSIF x.state = 'discarded' AND (x.last_error LIKE 'UNREGISTERED%' OR x.last_error LIKE '%was pruned earlier%') THEN
            item := '{"error": "NotRegistered"}';
        ELSIF x.state IN ('discarded', 'cancelled') THEN
            -- Not a Table 9 string (docs/legacy.md 4.10): nobody at FCM refused it, the job was stopped here.
            item := '{"error": "Cancelled"}';
        ELSIF x.state IS NOT NULL THEN
            item := '{"pending": true}';
        ELSIF x.dead_reason IS NOT NULL THEN
            item := jsonb_build_object('error', herald._legacy_error(x.dead_reason, x.dead_message));
        ELSE
            RAISE EXCEPTION 'herald.legacy_result: job % is neither in herald.jobs nor in herald.dead_letters', x.job_id
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = 'Finished jobs are deleted after the worker''s --retention (24h by default); read results before then.';
        END IF;
        IF item ? 'message_id' THEN success := success + 1; ELSIF item ? 'error' THEN failure := failure + 1; END IF;
        results := results || jsonb_build_array(item);
    END LOOP;
    RETURN jsonb_build_object(
        -- The legacy API's multicast_id: the first job's id (the one herald.enqueue_legacy returns first).
        'multicast_id', job_ids[1],
        'success', success, 'failure', failure, 'canonical_ids', 0, 'results', results);
END
$fn$;
