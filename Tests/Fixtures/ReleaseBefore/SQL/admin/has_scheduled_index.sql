-- Whether herald.jobs has the partial index of scheduled jobs (migration 040).
SELECT EXISTS (SELECT 1 FROM pg_index WHERE indrelid = 'herald.jobs'::regclass
               AND pg_get_expr(indpred, indrelid) = '(state = ''scheduled''::text)')
