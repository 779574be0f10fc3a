-- Dead letters per queue (an index-only scan of dead_letters_queue).
SELECT queue, count(*) FROM herald.dead_letters GROUP BY queue
