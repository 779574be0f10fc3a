-- Completed jobs above id $1.
SELECT count(*) FROM herald.jobs WHERE state = 'completed' AND id > $1
