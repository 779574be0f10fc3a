-- --profile: every statement's calls and time together, pg_stat_statements' own queries aside.
SELECT coalesce(sum(calls), 0)::bigint, coalesce(sum(total_exec_time), 0)::float8
FROM public.pg_stat_statements WHERE query NOT LIKE '%pg_stat_statements%'
