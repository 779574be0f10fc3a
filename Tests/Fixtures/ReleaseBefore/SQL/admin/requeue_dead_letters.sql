-- Puts dead letters back as fresh jobs: ids $1, or those of queue $2 with a reason LIKE $3.
SELECT dead_letter_id, job_id FROM herald.requeue_dead_letters($1::bigint[], $2, $3)
