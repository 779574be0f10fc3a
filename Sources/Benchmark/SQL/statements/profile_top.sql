-- --profile: the $1 statements that took the most time, pg_stat_statements' own queries aside.
SELECT query, calls, rows, total_exec_time, shared_blks_hit, shared_blks_read
FROM public.pg_stat_statements
WHERE query NOT LIKE '%pg_stat_statements%'
ORDER BY total_exec_time DESC
LIMIT $1
