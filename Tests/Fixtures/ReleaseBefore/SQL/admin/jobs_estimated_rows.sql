-- The planner's estimate of herald.jobs' rows (-1 when never analysed).
SELECT reltuples FROM pg_class WHERE oid = 'herald.jobs'::regclass
