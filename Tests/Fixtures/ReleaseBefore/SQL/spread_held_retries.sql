-- A project pause ends at $1 (seconds since 1970): the retries due before then (jobs tried or
-- snoozed before, at most $3 of them) are spread evenly at random over the $2 seconds after it,
-- so they come back gradually, not in one burst when the pause ends. Jobs never tried keep their
-- order; the adapted rate paces them.
UPDATE herald.jobs j
SET state = 'scheduled', run_at = to_timestamp($1::float8) + make_interval(secs => random() * $2::float8)
WHERE j.id IN (SELECT h.id FROM herald.jobs h
               WHERE h.state IN ('scheduled', 'available') AND h.run_at < to_timestamp($1::float8)
                 AND (h.attempts > 0 OR h.snoozes > 0)
               LIMIT $3::integer
               FOR UPDATE SKIP LOCKED)
  AND j.state IN ('scheduled', 'available')
