-- Records a batch of outcomes ($1, a JSON array of {id, att, a, name, err, delay, token, cap}; a: completed,
-- retried, dead, discarded, pruned, released or snoozed, Metrics' MessageOutcome) of jobs
-- held by worker $2; $3 is the retention in seconds (0: finished jobs are deleted at once).
-- Every outcome applies only while the job is still running under this worker's lease for the
-- attempt it belongs to (`att`), so a late answer never settles a later claim. The counts of the
-- jobs' campaigns move with them; a campaign that reaches max_errors dead letters pauses itself.
-- A snooze (a quota answer) puts the job back without counting the attempt while it has been
-- snoozed fewer than `cap` times (herald.jobs.snoozes, migrations/120_fcm_limits.sql).
-- Returns how many rows each kind of outcome changed.
WITH input AS (
    SELECT * FROM jsonb_to_recordset($1::jsonb) AS x(id bigint, a text, name text, err text, delay float8, token text, att int, cap int)
),
finished AS (
    UPDATE herald.jobs j
    SET state = CASE WHEN i.a = 'completed' THEN 'completed' ELSE 'discarded' END,
        finished_at = now(), fcm_message_name = i.name, locked_until = NULL,
        last_error = coalesce(i.err, j.last_error),
        errors = CASE WHEN i.err IS NULL THEN j.errors
                 ELSE j.errors || jsonb_build_array(jsonb_build_object('at', now(), 'attempt', j.attempts, 'error', i.err)) END
    FROM input i
    WHERE j.id = i.id AND i.a IN ('completed', 'discarded', 'pruned') AND j.state = 'running' AND j.locked_by = $2 AND j.attempts = i.att AND $3::float8 > 0
    RETURNING j.id, j.campaign_id, i.a, j.queue, i.name, i.err, coalesce(i.token, j.message->>'token') AS token
),
removed AS (
    DELETE FROM herald.jobs j USING input i
    WHERE j.id = i.id AND i.a IN ('completed', 'discarded', 'pruned') AND j.state = 'running' AND j.locked_by = $2 AND j.attempts = i.att AND $3::float8 <= 0
    RETURNING j.id, j.campaign_id, i.a, j.queue, i.name, i.err, coalesce(i.token, j.message->>'token') AS token
),
retried AS (
    UPDATE herald.jobs j
    SET state = CASE WHEN i.delay > 0 THEN 'scheduled' ELSE 'available' END,
        run_at = now() + make_interval(secs => i.delay), locked_until = NULL, locked_by = NULL,
        last_error = i.err,
        errors = j.errors || jsonb_build_array(jsonb_build_object('at', now(), 'attempt', j.attempts, 'error', i.err))
    FROM input i
    WHERE j.id = i.id AND i.a = 'retried' AND j.state = 'running' AND j.locked_by = $2 AND j.attempts = i.att
    RETURNING j.id
),
released AS (
    UPDATE herald.jobs j
    SET state = CASE WHEN i.delay > 0 THEN 'scheduled' ELSE 'available' END,
        attempts = greatest(j.attempts - 1, 0), locked_until = NULL, locked_by = NULL,
        run_at = CASE WHEN i.delay > 0 THEN now() + make_interval(secs => i.delay) ELSE j.run_at END
    FROM input i
    WHERE j.id = i.id AND i.a = 'released' AND j.state = 'running' AND j.locked_by = $2 AND j.attempts = i.att
    RETURNING j.id
),
snoozed AS (
    UPDATE herald.jobs j
    SET state = CASE WHEN i.delay > 0 THEN 'scheduled' ELSE 'available' END,
        run_at = now() + make_interval(secs => i.delay), locked_until = NULL, locked_by = NULL,
        attempts = CASE WHEN j.snoozes < coalesce(i.cap, 0) THEN greatest(j.attempts - 1, 0) ELSE j.attempts END,
        snoozes = j.snoozes + 1,
        last_error = i.err,
        errors = j.errors || jsonb_build_array(jsonb_build_object('at', now(), 'attempt', j.attempts, 'error', i.err,
                                                                  'snooze', j.snoozes + 1))
    FROM input i
    WHERE j.id = i.id AND i.a = 'snoozed' AND j.state = 'running' AND j.locked_by = $2 AND j.attempts = i.att
    RETURNING j.id
),
dead AS (
    DELETE FROM herald.jobs j USING input i
    WHERE j.id = i.id AND i.a = 'dead' AND j.state = 'running' AND j.locked_by = $2 AND j.attempts = i.att
    RETURNING j.id, j.queue, j.kind, j.priority, j.message, j.attempts, j.max_attempts, j.dedupe_key,
        j.created_at, i.err, j.validate_only, j.campaign_id, j.project,
        j.errors || jsonb_build_array(jsonb_build_object('at', now(), 'attempt', j.attempts, 'error', i.err)) AS errors
),
lettered AS (
    INSERT INTO herald.dead_letters (job_id, queue, kind, priority, message, attempts, max_attempts, dedupe_key,
                                     reason, errors, created_at, validate_only, campaign_id, project)
    SELECT id, queue, kind, priority, message, attempts, max_attempts, dedupe_key, err, errors, created_at, validate_only, campaign_id,
           project FROM dead
    RETURNING 1
),
settled AS (
    SELECT campaign_id, a, NULL::text AS err FROM finished WHERE campaign_id IS NOT NULL
    UNION ALL SELECT campaign_id, a, NULL FROM removed WHERE campaign_id IS NOT NULL
    UNION ALL SELECT campaign_id, 'dead', err FROM dead WHERE campaign_id IS NOT NULL
),
counted AS (
    UPDATE herald.campaigns c
    SET completed = c.completed + n.completed, discarded = c.discarded + n.discarded, dead = c.dead + n.dead,
        errors = c.errors + n.dead,
        state = CASE WHEN c.state IN ('scheduled', 'running') AND c.errors + n.dead >= c.max_errors THEN 'paused' ELSE c.state END,
        paused_reason = CASE WHEN c.state IN ('scheduled', 'running') AND c.errors + n.dead >= c.max_errors
                             THEN 'paused itself after ' || (c.errors + n.dead) || ' dead letters (max_errors ' || c.max_errors
                                  || '); the last: ' || left(n.last_error, 500)
                             ELSE c.paused_reason END
    FROM (SELECT campaign_id, count(*) FILTER (WHERE a = 'completed') AS completed,
                 count(*) FILTER (WHERE a IN ('discarded', 'pruned')) AS discarded,
                 count(*) FILTER (WHERE a = 'dead') AS dead, max(err) AS last_error
          FROM settled GROUP BY campaign_id) n
    WHERE c.id = n.campaign_id
    RETURNING 1
),
-- Delivery events (migration 130), for the queues switched on with herald.set_queue_events;
-- campaign and subscription events come from triggers (functions/_campaign_event.sql, ...).
events AS (
    INSERT INTO herald.events (kind, queue, job_id, campaign_id, token, detail)
    SELECT e.kind, e.queue, e.id, e.campaign_id, e.token, e.detail
    FROM (SELECT a AS kind, queue, id, campaign_id, token,
                 CASE WHEN a = 'completed' THEN jsonb_build_object('message_name', name) ELSE jsonb_build_object('reason', err) END AS detail
          FROM finished UNION ALL SELECT a, queue, id, campaign_id, token,
                 CASE WHEN a = 'completed' THEN jsonb_build_object('message_name', name) ELSE jsonb_build_object('reason', err) END
          FROM removed UNION ALL SELECT 'dead', queue, id, campaign_id, message->>'token', jsonb_build_object('reason', err) FROM dead) e
    WHERE EXISTS (SELECT 1 FROM herald.queues q WHERE q.name = e.queue AND q.events)
    ORDER BY e.id
    RETURNING 1
),
ledger AS (
    INSERT INTO herald.pruned_tokens (token, reason, job_id)
    SELECT token, err, id FROM input WHERE a = 'pruned' AND token IS NOT NULL
    ON CONFLICT (token) DO NOTHING
    RETURNING 1
)
SELECT (SELECT count(*) FROM finished) + (SELECT count(*) FROM removed) AS finished,
       (SELECT count(*) FROM retried) AS retried,
       (SELECT count(*) FROM released) AS released,
       (SELECT count(*) FROM snoozed) AS snoozed,
       (SELECT count(*) FROM lettered) AS dead,
       (SELECT count(*) FROM ledger) AS pruned,
       (SELECT count(*) FROM counted) AS campaigns,
       (SELECT count(*) FROM events) AS events
