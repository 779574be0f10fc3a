-- This connection's backend, to read its CPU time from /proc.
SELECT pg_backend_pid()
