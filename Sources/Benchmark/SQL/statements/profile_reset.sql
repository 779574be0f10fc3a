-- --profile: forgets what pg_stat_statements counted so far, before a phase.
SELECT public.pg_stat_statements_reset()
