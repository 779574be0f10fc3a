-- The progress watch's counts run in its own backend, whose time is left out of the phase's: a
-- parallel scan would spend it in worker processes counted as the cluster's.
SET max_parallel_workers_per_gather = 0
