-- Claims up to p_count due jobs of one (queue, campaign) pair of project p_project (NULL: jobs of
-- no project), priority first, into 'running'
-- under a lease until p_now + p_lease seconds held by p_worker (locked rows are skipped, never
-- waited for), and returns them as the worker reads them: the message with the campaign's
-- analytics label p_label put in (unless it has one, or is a legacy payload), whether its token
-- was pruned already (or, for a campaign's job when campaigns skip stale tokens, is stale: its
-- last_error then says so, and the worker discards it with that reason), and a device group's
-- key and members. (PL/pgSQL, so its plan is kept between claims; an array, so the claim adds it
-- to its own without a row-by-row detour.) With p_audience (the queue has a frequency cap or
-- quiet hours), also each job's id, token and own time zone, in the same order, for
-- herald._audience_hold; NULL otherwise.
CREATE OR REPLACE FUNCTION herald._claim_unit(p_queue text, p_campaign bigint, p_count integer, p_lease double precision,
                                              p_worker text, p_label text, p_now timestamptz, p_project text DEFAULT NULL,
                                              p_audience boolean DEFAULT false,
                                              OUT taken herald.claimed_job[], OUT ids bigint[], OUT tokens text[], OUT zones text[])
LANGUAGE plpgsql SET search_path = pg_catalog AS $fn$
BEGIN
    WITH picked AS (
        SELECT j.id AS picked_id,
               -- A campaign's send to a token the aging rule marked stale, when campaigns skip them.
               (p_campaign <> 0 AND j.kind = 'send'
                AND (SELECT a.skip_stale_for_campaigns FROM herald.token_aging a)
                AND EXISTS (SELECT 1 FROM herald.device_tokens d
                            WHERE d.token = coalesce(j.message->>'token', j.message->>'to') AND d.stale_at IS NOT NULL)) AS stale
        FROM herald.jobs j
        WHERE j.state = 'available' AND coalesce(j.project, '') = coalesce(p_project, '')
          AND j.queue = p_queue AND coalesce(j.campaign_id, 0) = p_campaign AND j.run_at <= p_now
        ORDER BY j.priority, j.run_at, j.id
        LIMIT p_count
        FOR UPDATE SKIP LOCKED
    ),
    claimed AS (
        UPDATE herald.jobs j
        SET state = 'running', attempts = j.attempts + 1,
            locked_until = p_now + make_interval(secs => p_lease), locked_by = p_worker,
            last_error = CASE WHEN picked.stale THEN 'STALE: token not reported since it went stale (herald.touch_token); campaigns skip stale tokens (herald.set_token_aging); not sent'
                              WHEN j.last_error LIKE 'STALE:%' THEN NULL ELSE j.last_error END
        FROM picked WHERE j.id = picked.picked_id
        RETURNING j.id, j.queue, j.kind,
            (CASE WHEN p_label IS NOT NULL AND j.kind = 'send'
                       AND NOT coalesce(j.message -> 'fcm_options' ? 'analytics_label', false)
                       AND NOT herald.is_legacy(j.message)
                  THEN j.message || jsonb_build_object('fcm_options',
                           coalesce(j.message -> 'fcm_options', '{}'::jsonb) || jsonb_build_object('analytics_label', p_label))
                  ELSE j.message END)::text AS message,
            j.attempts, j.max_attempts,
            (picked.stale OR (j.kind = 'send' AND j.message ?| ARRAY['token', 'to', 'registration_ids']
                AND EXISTS (SELECT 1 FROM herald.pruned_tokens p
                            WHERE p.token = coalesce(j.message->>'token', j.message->>'to', j.message->'registration_ids'->>0))))
                AS token_pruned,
            j.last_error, extract(epoch FROM j.created_at)::float8 AS created_at, extract(epoch FROM j.run_at)::float8 AS due_at,
            (SELECT g.notification_key FROM herald.device_groups g
                WHERE j.kind = 'group' AND g.name = j.message->>'notification_key_name') AS group_key,
            (SELECT array_to_json(g.members)::text FROM herald.device_groups g
                WHERE j.kind = 'group' AND g.name = j.message->>'notification_key_name') AS group_members,
            j.validate_only, j.campaign_id,
            CASE WHEN p_audience THEN j.message->>'token' END AS token, j.time_zone
    )
    SELECT array_agg(ROW(c.id, c.queue, c.kind, c.message, c.attempts, c.max_attempts, c.token_pruned, c.last_error,
                         c.created_at, c.due_at, c.group_key, c.group_members, c.validate_only, c.campaign_id)::herald.claimed_job),
           array_agg(c.id) FILTER (WHERE p_audience), array_agg(c.token) FILTER (WHERE p_audience),
           array_agg(c.time_zone) FILTER (WHERE p_audience)
    INTO taken, ids, tokens, zones FROM claimed c;
    taken := coalesce(taken, '{}');
END
$fn$;
