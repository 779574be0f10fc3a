-- What autovacuum would have done by then to a table that has delivered for a while.
VACUUM ANALYZE herald.jobs
