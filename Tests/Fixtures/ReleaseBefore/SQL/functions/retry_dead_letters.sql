-- retry_dead_letters: every dead letter of `queue` (NULL: any) whose reason is LIKE `reason_like`
-- (NULL: any) back as a fresh job; returns how many. Kept letters (dedupe key pending) are not counted.
CREATE OR REPLACE FUNCTION herald.retry_dead_letters(queue text DEFAULT NULL, reason_like text DEFAULT NULL)
RETURNS integer LANGUAGE sql SET search_path = pg_catalog AS $$
    SELECT count(*)::integer FROM herald.requeue_dead_letters(NULL, $1, $2);
$$;
