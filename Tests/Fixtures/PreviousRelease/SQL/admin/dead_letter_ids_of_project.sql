-- The ids of the dead letters of registry project $1 of queue $2 (NULL: any) whose reason is LIKE
-- $3 (NULL: any): herald dead retry|discard --all --project hands them to
-- herald.requeue_dead_letters / remove_dead_letters, which choose by queue and reason only.
SELECT coalesce(pg_catalog.array_agg(id ORDER BY id), '{}')::text FROM herald.dead_letters
WHERE project = $1 AND ($2::text IS NULL OR queue = $2) AND ($3::text IS NULL OR reason LIKE $3)
