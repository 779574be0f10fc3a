-- Enqueue-to-delivered (finished_at - created_at) of the completed jobs above id $1, in ms:
-- how many, p50, p99, max.
SELECT count(*),
       percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM finished_at - created_at)) * 1000,
       percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM finished_at - created_at)) * 1000,
       max(extract(epoch FROM finished_at - created_at)) * 1000
FROM herald.jobs WHERE id > $1 AND state = 'completed'
