-- A project pause ends at $1 (seconds since 1970): the retries due before then (jobs tried or
-- snoozed before, at most $3 of them) are spread evenly at random over the $2 seconds after it,
-- so they come back gradually, not in one burst when the pause ends. Jobs never tried keep their
-- order; the adapted rate paces them.
-- Only the paused project's retries move: the jobs of project $4 (a registry name; NULL: the
-- jobs of no project, as claim_batch's p_project), and those of the registry entry of FCM
-- project $5 (NULL: none), whose claims the same hold stops. Another project's retries keep
-- their times: a project paused costs the others nothing.
UPDATE herald.jobs j
SET state = 'scheduled', run_at = to_timestamp($1::float8) + make_interval(secs => random() * $2::float8)
WHERE j.id IN (SELECT h.id FROM herald.jobs h
               WHERE h.state IN ('scheduled', 'available') AND h.run_at < to_timestamp($1::float8)
                 AND (h.attempts > 0 OR h.snoozes > 0)
                 AND (coalesce(h.project, '') = coalesce($4::text, '')
                      OR h.project = (SELECT r.name FROM herald.projects r WHERE r.fcm_project_id = $5::text))
               LIMIT $3::integer
               FOR UPDATE SKIP LOCKED)
  AND j.state IN ('scheduled', 'available')
