-- Jobs in herald.jobs.
SELECT count(*) FROM herald.jobs
