-- A dashboard connection: named in pg_stat_activity, every statement bounded by $1 milliseconds.
SELECT set_config('application_name', 'herald dashboard', false), set_config('statement_timeout', $1, false)
