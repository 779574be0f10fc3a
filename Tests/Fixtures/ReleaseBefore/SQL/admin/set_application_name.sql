-- Names this connection $1 in pg_stat_activity.
SELECT set_config('application_name', $1, false)
