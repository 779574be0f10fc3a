-- multicast_result: the outcome of each token of a multicast, in token order, in the shape of the
-- Admin SDKs' BatchResponse: {"success_count", "failure_count", "responses": [...]}, each entry
-- {"success": true, "message_id": "projects/p/messages/1"}, {"success": false, "error": {"code":
-- "UNREGISTERED", "message": "..."}}, or {"pending": true} while its job is not final (counted
-- in neither count). A job cancelled by hand reads {"success": false, "error": {"code": "CANCELLED"}}.
CREATE OR REPLACE FUNCTION herald.multicast_result(multicast_id bigint) RETURNS jsonb
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    m herald.multicasts;
    responses jsonb := '[]';
    item jsonb;
    successes integer := 0;
    failures integer := 0;
    x record;
    job record;
    dead record;
BEGIN
    SELECT * INTO m FROM herald.multicasts c WHERE c.id = multicast_result.multicast_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'herald.multicast_result: no multicast with id %', multicast_result.multicast_id
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Give the id herald.enqueue_multicast returned; multicasts are forgotten 7 days after they were made.';
    END IF;
    FOR x IN SELECT u.id, u.o FROM unnest(m.job_ids) WITH ORDINALITY AS u(id, o) ORDER BY u.o LOOP
        SELECT j.state, j.fcm_message_name, j.last_error INTO job FROM herald.jobs j WHERE j.id = x.id;
        IF FOUND THEN
            IF job.state = 'completed' THEN
                item := jsonb_build_object('success', true, 'message_id', job.fcm_message_name);
            ELSIF job.state = 'discarded' THEN
                item := jsonb_build_object('success', false, 'error', herald._v1_error(job.last_error));
            ELSIF job.state = 'cancelled' THEN
                item := jsonb_build_object('success', false,
                                           'error', jsonb_build_object('code', 'CANCELLED', 'message', coalesce(job.last_error, 'cancelled before it was sent')));
            ELSE
                item := '{"pending": true}';
            END IF;
        ELSE
            SELECT d.reason INTO dead FROM herald.dead_letters d WHERE d.job_id = x.id ORDER BY d.dead_at DESC, d.id DESC LIMIT 1;
            IF NOT FOUND THEN
                RAISE EXCEPTION 'herald.multicast_result: job % of multicast % is neither in herald.jobs nor in herald.dead_letters', x.id, m.id
                    USING ERRCODE = 'invalid_parameter_value',
                          HINT = 'Finished jobs are deleted after the worker''s --retention (24h by default); read results before then.';
            END IF;
            item := jsonb_build_object('success', false, 'error', herald._v1_error(dead.reason));
        END IF;
        IF item ? 'success' THEN
            IF (item ->> 'success')::boolean THEN successes := successes + 1; ELSE failures := failures + 1; END IF;
        END IF;
        responses := responses || jsonb_build_array(item);
    END LOOP;
    RETURN jsonb_build_object('success_count', successes, 'failure_count', failures, 'responses', responses);
END
$fn$;
