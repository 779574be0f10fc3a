-- The highest job id so far (0 for none).
SELECT coalesce(max(id), 0) FROM herald.jobs
