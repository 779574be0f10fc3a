-- Scheduled jobs per queue, from their partial index.
SELECT queue, 'scheduled', count(*), NULL::float8 FROM herald.jobs WHERE state = 'scheduled' GROUP BY 1
