-- Dead letters of queue $1 (NULL: any) whose reason is LIKE $2 (NULL: any) still there after a
-- replay (kept: their dedupe key is pending, or another session holds them), at most 1000.
SELECT id FROM herald.dead_letters WHERE ($1::text IS NULL OR queue = $1) AND ($2::text IS NULL OR reason LIKE $2)
ORDER BY id LIMIT 1000
