-- remove_dead_letters: deletes the chosen dead letters (also only those dead for longer than
-- `older_than` when given) and returns their ids.
CREATE OR REPLACE FUNCTION herald.remove_dead_letters(ids bigint[] DEFAULT NULL, queue text DEFAULT NULL,
                                           reason_like text DEFAULT NULL, older_than interval DEFAULT NULL)
RETURNS SETOF bigint LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    DELETE FROM herald.dead_letters d
    WHERE ($1 IS NULL OR d.id = ANY ($1))
      AND ($2 IS NULL OR d.queue = $2)
      AND ($3 IS NULL OR d.reason LIKE $3)
      AND ($4 IS NULL OR d.dead_at < now() - $4)
    RETURNING d.id;
$$;
