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
    job record;
    dead record;
BEGIN
    IF job_ids IS NULL OR cardinality(job_ids) = 0 THEN
        RAISE EXCEPTION 'herald.legacy_result: give the job ids herald.enqueue_legacy returned'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    FOR x IN SELECT u.id, u.o FROM unnest(job_ids) WITH ORDINALITY AS u(id, o) ORDER BY u.o LOOP
        SELECT j.state, j.fcm_message_name, j.last_error, j.message INTO job FROM herald.jobs j WHERE j.id = x.id;
        IF FOUND THEN
            IF job.state = 'completed' THEN
                item := jsonb_build_object('message_id', regexp_replace(coalesce(job.fcm_message_name, x.id::text), '^.*/', ''));
            ELSIF job.state = 'discarded' AND (job.last_error LIKE 'UNREGISTERED%' OR job.last_error LIKE '%was pruned earlier%') THEN
                item := '{"error": "NotRegistered"}';
            ELSIF job.state IN ('discarded', 'cancelled') THEN
                -- Not a Table 9 string (docs/legacy.md 4.10): nobody at FCM refused it, the job was stopped here.
                item := '{"error": "Cancelled"}';
            ELSE
                item := '{"pending": true}';
            END IF;
        ELSE
            SELECT d.reason, d.message INTO dead FROM herald.dead_letters d WHERE d.job_id = x.id ORDER BY d.dead_at DESC, d.id DESC LIMIT 1;
            IF NOT FOUND THEN
                RAISE EXCEPTION 'herald.legacy_result: job % is neither in herald.jobs nor in herald.dead_letters', x.id
                    USING ERRCODE = 'invalid_parameter_value',
                          HINT = 'Finished jobs are deleted after the worker''s --retention (24h by default); read results before then.';
            END IF;
            item := jsonb_build_object('error', herald._legacy_error(dead.reason, dead.message));
        END IF;
        IF item ? 'message_id' THEN success := success + 1; ELSIF item ? 'error' THEN failure := failure + 1; END IF;
        results := results || jsonb_build_array(item);
    END LOOP;
    RETURN jsonb_build_object(
        'multicast_id', coalesce((SELECT m.multicast_id FROM herald.legacy_multicasts m WHERE m.job_id = job_ids[1]), job_ids[1]),
        'success', success, 'failure', failure, 'canonical_ids', 0, 'results', results);
END
$fn$;
