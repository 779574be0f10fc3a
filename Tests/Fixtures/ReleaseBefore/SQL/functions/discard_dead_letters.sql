-- discard_dead_letters: deletes every dead letter of `queue` whose reason is LIKE `reason_like`
-- and that died more than `older_than` ago (each NULL: any); returns how many.
CREATE OR REPLACE FUNCTION herald.discard_dead_letters(queue text DEFAULT NULL, reason_like text DEFAULT NULL,
                                            older_than interval DEFAULT NULL)
RETURNS integer LANGUAGE sql SET search_path = pg_catalog AS $$
    SELECT count(*)::integer FROM herald.remove_dead_letters(NULL, $1, $2, $3);
$$;
