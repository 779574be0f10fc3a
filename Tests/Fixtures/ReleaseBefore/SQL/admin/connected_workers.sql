-- Worker processes connected to this database: connections whose application_name is $1.
SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND datname = current_database()
