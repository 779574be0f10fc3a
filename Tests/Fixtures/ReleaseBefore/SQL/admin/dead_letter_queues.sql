-- Queues that hold dead letters, by name (an index-only walk of dead_letters_queue).
SELECT DISTINCT queue FROM herald.dead_letters ORDER BY queue
