-- How many dead letters of queue $1 (NULL: any) have a reason LIKE $2 (NULL: any), of registry
-- project $3 (NULL: any).
SELECT count(*) FROM herald.dead_letters
WHERE ($1::text IS NULL OR queue = $1) AND ($2::text IS NULL OR reason LIKE $2) AND ($3::text IS NULL OR project = $3)
