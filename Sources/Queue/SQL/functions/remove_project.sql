-- remove_project: takes a project (or APNs app) out of the registry. Only the entry goes: the key
-- file or variable it named is left where it is. Without `force` it is refused while jobs of the
-- entry are pending (scheduled, available or running): they would be left with no pool to send
-- them; cancel or let them finish first. With `force` those jobs are moved to herald.dead_letters
-- first, each with the reason that says so (a running job's request may still be answered: its
-- worker's outcome then finds the job gone and changes nothing), and their campaigns count them
-- as dead. Returns how many jobs were dead-lettered. Its dead letters stay, and cannot be
-- replayed until it is added again.
CREATE OR REPLACE FUNCTION herald.remove_project(name text, force boolean DEFAULT false)
RETURNS bigint LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    p herald.projects := herald._known_project(remove_project.name, 'herald.remove_project');
    pending bigint;
    what text := CASE p.service WHEN 'apns' THEN 'APNs app' ELSE 'project' END;
    command text := CASE p.service WHEN 'apns' THEN 'herald apns' ELSE 'herald projects' END;
BEGIN
    IF NOT coalesce(remove_project.force, false) THEN
        SELECT count(*) INTO pending FROM herald.jobs j
        WHERE j.project = p.name AND j.state IN ('scheduled', 'available', 'running');
        IF pending > 0 THEN
            RAISE EXCEPTION 'herald.remove_project: % "%" has % pending jobs; nothing was removed (let them finish, or remove it with force => true to dead-letter them)',
                what, p.name, pending
                USING ERRCODE = 'object_in_use',
                      HINT = 'Let them finish (herald work --project ' || p.name || ' --drain), or delete or cancel them, then remove it; '
                             || 'or dead-letter them with it: ' || command || ' remove ' || p.name || ' --force (herald.remove_project(name, force => true)).';
        END IF;
        DELETE FROM herald.projects r WHERE r.name = p.name;
        RETURN 0;
    END IF;
    WITH gone AS (
        DELETE FROM herald.jobs j
        WHERE j.project = p.name AND j.state IN ('scheduled', 'available', 'running')
        RETURNING j.id, j.queue, j.kind, j.priority, j.message, j.attempts, j.max_attempts, j.dedupe_key, j.created_at,
                  j.validate_only, j.campaign_id, j.project, j.errors
    ), lettered AS (
        INSERT INTO herald.dead_letters (job_id, queue, kind, priority, message, attempts, max_attempts, dedupe_key,
                                         reason, errors, created_at, validate_only, campaign_id, project)
        SELECT g.id, g.queue, g.kind, g.priority, g.message, g.attempts, g.max_attempts, g.dedupe_key,
               'removed with ' || what || ' ' || p.name || ' (' || command || ' remove --force); not sent',
               g.errors, g.created_at, g.validate_only, g.campaign_id, g.project
        FROM gone g
        RETURNING campaign_id
    ), counted AS (
        UPDATE herald.campaigns c SET dead = c.dead + n.dead
        FROM (SELECT campaign_id, count(*) AS dead FROM lettered WHERE campaign_id IS NOT NULL GROUP BY campaign_id) n
        WHERE c.id = n.campaign_id
        RETURNING 1
    )
    SELECT count(*) INTO pending FROM lettered;
    DELETE FROM herald.projects r WHERE r.name = p.name;
    RETURN pending;
END $$;
