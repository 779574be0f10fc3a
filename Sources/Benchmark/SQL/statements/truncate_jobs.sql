-- Empties the queue of the bench's own database.
TRUNCATE herald.jobs, herald.dead_letters
