-- herald.events rows of kind completed for the jobs above id $1.
SELECT count(*) FROM herald.events WHERE kind = 'completed' AND job_id > $1
