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
BEGIN
    SELECT * INTO m FROM herald.multicasts c WHERE c.id = multicast_result.multicast_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'herald.multicast_result: no multicast with id %', multicast_result.multicast_id
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Give the id herald.enqueue_multicast returned; multicasts are forgotten 7 days after they were made.';
    END IF;
    FOR x IN SELECT * FROM herald._job_outcomes(m.job_ids) LOOP
        IF x.state = 'completed' THEN
            item := jsonb_build_object('success', true, 'message_id', x.fcm_message_name);
        ELSIF x.state = 'discarded' THEN
            item := jsonb_build_object('success', false, 'error', herald._v1_error(x.last_error));
        ELSIF x.state = 'cancelled' THEN
            item := jsonb_build_object('success', false,
                                       'error', jsonb_build_object('code', 'CANCELLED', 'message', coalesce(x.last_error, 'cancelled before it was sent')));
        ELSIF x.state IS NOT NULL THEN
            item := '{"pending": true}';
        ELSIF x.dead_reason IS NOT NULL THEN
            item := jsonb_build_object('success', false, 'error', herald._v1_error(x.dead_reason));
        ELSE
            RAISE EXCEPTION 'herald.multicast_result: job % of multicast % is neither in herald.jobs nor in herald.dead_letters', x.job_id, m.id
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = 'Finished jobs are deleted after the worker''s --retention (24h by default); read results before then.';
        END IF;
        IF item ? 'success' THEN
            IF (item ->> 'success')::boolean THEN successes := successes + 1; ELSE failures := failures + 1; END IF;
        END IF;
        responses := responses || jsonb_build_array(item);
    END LOOP;
    RETURN jsonb_build_object('success_count', successes, 'failure_count', failures, 'responses', responses);
END
$fn$;
