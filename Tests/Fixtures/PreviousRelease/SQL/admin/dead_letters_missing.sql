-- The ids of $1 that name no dead letter.
SELECT wanted FROM pg_catalog.unnest($1::bigint[]) AS wanted
WHERE NOT EXISTS (SELECT 1 FROM herald.dead_letters d WHERE d.id = wanted) ORDER BY wanted
