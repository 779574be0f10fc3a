-- Whether this session holds (or now takes) the maintenance leader's advisory lock $1.
SELECT pg_try_advisory_lock($1) AS leader
