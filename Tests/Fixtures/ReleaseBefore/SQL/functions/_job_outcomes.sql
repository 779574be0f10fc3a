-- _job_outcomes: what became of each of a multicast's jobs, in the order given (the machinery
-- of herald.multicast_result and herald.legacy_result): the job's row while herald.jobs has it,
-- else its latest dead letter. Both null: the job is in neither (read too late, or never a job).
CREATE OR REPLACE FUNCTION herald._job_outcomes(p_job_ids bigint[])
RETURNS TABLE (job_id bigint, state text, fcm_message_name text, last_error text, dead_reason text, dead_message jsonb)
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT u.id, j.state, j.fcm_message_name, j.last_error, d.reason, d.message
    FROM unnest(p_job_ids) WITH ORDINALITY AS u(id, o)
    LEFT JOIN herald.jobs j ON j.id = u.id
    LEFT JOIN LATERAL (SELECT dl.reason, dl.message FROM herald.dead_letters dl
                       WHERE dl.job_id = u.id ORDER BY dl.dead_at DESC, dl.id DESC LIMIT 1) d ON j.id IS NULL
    ORDER BY u.o
$fn$;
